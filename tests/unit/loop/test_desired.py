"""Rendered objects: exact (golden) for the seed's objects, and valid against real schemas."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.models import Cluster
from cluster.services import settings_cluster
from loop.desired import collect_manifests
from queues.models import ClusterQueue, LocalQueue
from tenants.models import LimitRangeItem, Namespace, QuotaItem, Team
from tests.schemas import schema_errors

pytestmark = pytest.mark.django_db

MANAGED = {"app.kubernetes.io/managed-by": "quartermaster"}


def find(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name)


@pytest.mark.parametrize(
    ("backend", "version"), [("kueue", "v1beta2"), ("kueue", "v1beta1"), ("volcano", "v1beta2")]
)
def test_every_demo_object_validates_against_the_schemas(
    demo: None, backend: str, version: str
) -> None:
    manifests = collect_manifests(backend=backend, version=version)
    kinds = {m["kind"] for m in manifests}
    expected = {"Namespace", "PriorityClass", "ResourceQuota", "LimitRange"}
    expected |= (
        {"Queue"}
        if backend == "volcano"
        else {"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"}
    )
    assert kinds == expected
    assert {m["metadata"]["name"]: schema_errors(m) for m in manifests} == {
        m["metadata"]["name"]: [] for m in manifests
    }


@pytest.mark.parametrize(
    ("kind", "name", "path", "typo"),
    [
        ("ClusterQueue", "cq-train", ("spec",), "cohort"),  # v1beta1 spelling in v1beta2
        (
            "ClusterQueue",
            "cq-train",
            ("spec", "resourceGroups", 0, "flavors", 0, "resources", 0),
            "nominalquota",
        ),
        ("ResourceFlavor", "h100-80gb", ("spec",), "nodeLabel"),
        ("LocalQueue", "team-a-train", ("spec",), "clusterqueue"),
        ("Cohort", "ai-platform", ("spec",), "parent"),
        ("ResourceQuota", "team-a-gpu-quota", ("spec",), "hrad"),
        ("LimitRange", "team-a-gpu-defaults", ("spec", "limits", 0), "defaultRequests"),
        ("PriorityClass", "training-critical", (), "preemptPolicy"),
        ("Namespace", "team-a", ("metadata",), "lables"),
        ("ClusterQueue", "cq-train", ("metadata",), "lables"),
    ],
)
def test_a_misspelt_field_fails_validation(
    demo: None, kind: str, name: str, path: tuple[Any, ...], typo: str
) -> None:
    manifest = copy.deepcopy(find(collect_manifests(), kind, name))
    node: Any = manifest
    for step in path:
        node = node[step]
    node[typo] = "x"
    assert schema_errors(manifest), f"{kind} with {typo!r} passed the schema"


def test_volcano_queue_with_a_misspelt_field_fails(demo: None) -> None:
    queue = copy.deepcopy(find(collect_manifests(backend="volcano"), "Queue", "cq-train"))
    queue["spec"]["capacity"] = {"nvidia.com/gpu": "1"}
    assert schema_errors(queue)


def test_seed_resource_quota_golden(demo: None) -> None:
    """The seed's team-a quota, named as in the seed; GPU values are strings as in the API."""
    assert find(collect_manifests(), "ResourceQuota", "team-a-gpu-quota") == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "team-a-gpu-quota",
            "namespace": "team-a",
            "labels": MANAGED | {"quartermaster.io/team": "team-a"},
        },
        "spec": {
            "hard": {"limits.nvidia.com/gpu": "16", "pods": "50", "requests.nvidia.com/gpu": "16"}
        },
    }


def test_seed_limit_range_golden(demo: None) -> None:
    assert find(collect_manifests(), "LimitRange", "team-a-gpu-defaults") == {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {
            "name": "team-a-gpu-defaults",
            "namespace": "team-a",
            "labels": MANAGED | {"quartermaster.io/team": "team-a"},
        },
        "spec": {
            "limits": [
                {
                    "default": {"nvidia.com/gpu": "1"},
                    "defaultRequest": {"nvidia.com/gpu": "1"},
                    "type": "Container",
                }
            ]
        },
    }


def test_seed_priority_class_golden(demo: None) -> None:
    assert find(collect_manifests(), "PriorityClass", "training-critical") == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "training-critical", "labels": MANAGED},
        "value": 1000000,
        "preemptionPolicy": "PreemptLowerPriority",
        "description": "Training jobs that must not wait.",
    }


def test_seed_cluster_queue_golden_v1beta2(demo: None) -> None:
    assert find(collect_manifests(), "ClusterQueue", "cq-dev") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq-dev", "labels": MANAGED},
        "spec": {
            "cohortName": "ai-platform",
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-dev"]}
                ]
            },
            "queueingStrategy": "BestEffortFIFO",
            "stopPolicy": "None",
            "fairSharing": {"weight": "5"},
            "preemption": {
                "withinClusterQueue": "Never",
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "Never"},
            },
            "flavorFungibility": {
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "TryNextFlavor",
            },
            "resourceGroups": [
                {
                    "coveredResources": [
                        "nvidia.com/mig-1g.10gb",
                        "nvidia.com/mig-2g.20gb",
                        "nvidia.com/mig-3g.40gb",
                    ],
                    "flavors": [
                        {
                            "name": "a100-80gb-balanced",
                            "resources": [
                                {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "16"},
                                {"name": "nvidia.com/mig-2g.20gb", "nominalQuota": "8"},
                                {"name": "nvidia.com/mig-3g.40gb", "nominalQuota": "8"},
                            ],
                        }
                    ],
                },
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100-80gb",
                            "resources": [
                                {
                                    "name": "nvidia.com/gpu",
                                    "nominalQuota": "0",
                                    "borrowingLimit": "10",
                                }
                            ],
                        }
                    ],
                },
            ],
        },
    }


def test_cluster_queue_v1beta1_uses_the_old_cohort_field(demo: None) -> None:
    spec = find(collect_manifests(version="v1beta1"), "ClusterQueue", "cq-train")["spec"]
    assert spec["cohort"] == "ai-platform"
    assert "cohortName" not in spec


def test_cluster_queue_v1beta1_names_fungibility_as_kueue_before_0_16_knows_it(
    demo: None,
) -> None:
    cq = ClusterQueue.objects.get(name="cq-train")
    cq.when_can_borrow, cq.when_can_preempt = "MayStopSearch", "MayStopSearch"
    cq.save()
    old = find(collect_manifests(version="v1beta1"), "ClusterQueue", "cq-train")["spec"]
    assert old["flavorFungibility"] == {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
    new = find(collect_manifests(version="v1beta2"), "ClusterQueue", "cq-train")["spec"]
    assert new["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "MayStopSearch",
    }
    cq.when_can_borrow, cq.when_can_preempt = "TryNextFlavor", "TryNextFlavor"
    cq.save()
    old = find(collect_manifests(version="v1beta1"), "ClusterQueue", "cq-train")["spec"]
    assert old["flavorFungibility"] == {
        "whenCanBorrow": "TryNextFlavor",
        "whenCanPreempt": "TryNextFlavor",
    }


def test_train_queue_admits_exactly_the_namespaces_of_its_local_queues(demo: None) -> None:
    spec = find(collect_manifests(), "ClusterQueue", "cq-train")["spec"]
    assert spec["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-a", "team-b"]


def test_cluster_queue_without_local_queues_admits_no_namespace(demo: None) -> None:
    ClusterQueue.objects.create(name="cq-empty", resource_groups=[])
    assert "namespaceSelector" not in find(collect_manifests(), "ClusterQueue", "cq-empty")["spec"]


def test_local_queues_and_flavor_golden(demo: None) -> None:
    manifests = collect_manifests()
    assert find(manifests, "LocalQueue", "team-a-train") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {
            "name": "team-a-train",
            "namespace": "team-a",
            "labels": MANAGED | {"quartermaster.io/team": "team-a"},
        },
        "spec": {"clusterQueue": "cq-train", "stopPolicy": "None"},
    }
    assert find(manifests, "ResourceFlavor", "h100-80gb")["spec"] == {
        "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "tolerations": [
            {
                "key": "nvidia.com/gpu",
                "operator": "Equal",
                "value": "present",
                "effect": "NoSchedule",
            }
        ],
    }
    assert {(m["kind"], m["metadata"]["name"]) for m in manifests if m["kind"] == "LocalQueue"} == {
        ("LocalQueue", n)
        for n in ["team-a-train", "team-b-train", "online-infer", "offline-batch", "dev-test"]
    }


def test_volcano_queue_golden(demo: None) -> None:
    manifests = collect_manifests(backend="volcano")
    assert find(manifests, "Queue", "cq-dev") == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "cq-dev", "labels": MANAGED},
        "spec": {
            "weight": 5,
            "reclaimable": True,
            "parent": "root",
            "dequeueStrategy": "traverse",
            # MIG slices may be borrowed without limit in the cohort: no ceiling for them.
            "capability": {"nvidia.com/gpu": "10"},
            "deserved": {
                "nvidia.com/gpu": "0",
                "nvidia.com/mig-1g.10gb": "16",
                "nvidia.com/mig-2g.20gb": "8",
                "nvidia.com/mig-3g.40gb": "8",
            },
        },
    }
    # Unlimited borrowing (no borrowingLimit in a cohort) leaves capability unset.
    assert "capability" not in find(manifests, "Queue", "cq-train")["spec"]


def test_apply_order_puts_dependencies_first(demo: None) -> None:
    kinds = [m["kind"] for m in collect_manifests()]
    order = [
        "Namespace",
        "PriorityClass",
        "ResourceQuota",
        "LimitRange",
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
    ]
    assert kinds == sorted(kinds, key=order.index)


def test_export_manifests_prints_a_yaml_stream(
    demo: None, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("export_manifests")
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert documents == collect_manifests()


def test_export_for_one_team_holds_only_its_namespaced_objects(
    demo: None, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("export_manifests", "--team", "team-a")
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [
        ("Namespace", "team-a"),
        ("ResourceQuota", "team-a-gpu-quota"),
        ("LimitRange", "team-a-gpu-defaults"),
        ("LocalQueue", "team-a-train"),
    ]


def test_export_for_an_unknown_team_is_an_error(demo: None) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No team with slug 'team-z'"):
        call_command("export_manifests", "--team", "team-z")


def test_collecting_manifests_takes_a_fixed_number_of_queries(
    demo: None, django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(12):
        collect_manifests()


def _more_namespaces(cluster: Cluster, count: int, *, hard: str) -> None:
    """``count`` namespaces of team-a on ``cluster``, each with a quota item, a LimitRange
    item and a LocalQueue on the cluster's ClusterQueue cq-train (made when missing)."""
    team = Team.objects.get(slug="team-a")
    queue, _ = ClusterQueue.objects.get_or_create(cluster=cluster, name="cq-train")
    for i in range(count):
        ns = Namespace.objects.create(cluster=cluster, name=f"team-a-more-{i}", team=team)
        QuotaItem.objects.create(namespace=ns, resource="requests.nvidia.com/gpu", hard=hard)
        LimitRangeItem.objects.create(
            namespace=ns, limit_type="Container", resource="nvidia.com/gpu", default="1"
        )
        LocalQueue.objects.create(name="more", namespace=ns, cluster_queue=queue)


def test_manifests_take_the_same_queries_at_twice_the_namespaces_and_stay_on_their_cluster(
    demo: None,
) -> None:
    """The queries do not grow with the namespaces, their items and queues; a namespace of
    the same name, with its items and queue, on another cluster adds nothing here."""
    here = settings_cluster()
    with CaptureQueriesContext(connection) as small:
        collect_manifests(cluster=here)
    _more_namespaces(here, 6, hard="4")
    other = Cluster.objects.create(name="other", display_name="Other", connection="token")
    _more_namespaces(other, 8, hard="99")
    with CaptureQueriesContext(connection) as large:
        manifests = collect_manifests(cluster=here)
    assert len(large.captured_queries) == len(small.captured_queries)
    for i in range(6):
        assert find(manifests, "ResourceQuota", f"team-a-more-{i}-gpu-quota")["spec"] == {
            "hard": {"requests.nvidia.com/gpu": "4"}
        }
        assert find(manifests, "LimitRange", f"team-a-more-{i}-gpu-defaults")["spec"] == {
            "limits": [{"type": "Container", "default": {"nvidia.com/gpu": "1"}}]
        }
        queue = next(
            m
            for m in manifests
            if m["kind"] == "LocalQueue" and m["metadata"]["namespace"] == f"team-a-more-{i}"
        )
        assert queue["spec"]["clusterQueue"] == "cq-train"
    names = [m["metadata"]["name"] for m in manifests]
    assert "team-a-more-6" not in names and "team-a-more-7" not in names
    selected = find(manifests, "ClusterQueue", "cq-train")["spec"]["namespaceSelector"]
    assert {f"team-a-more-{i}" for i in range(6)} <= set(selected["matchExpressions"][0]["values"])
    assert "team-a-more-7" not in selected["matchExpressions"][0]["values"]
    theirs = collect_manifests(cluster=other)
    assert find(theirs, "ResourceQuota", "team-a-more-0-gpu-quota")["spec"] == {
        "hard": {"requests.nvidia.com/gpu": "99"}
    }
