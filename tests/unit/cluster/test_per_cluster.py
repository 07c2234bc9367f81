"""What belongs to a cluster stays there: names unique per cluster as Kubernetes makes them,
one cluster's rendering holds only its objects, one cluster's poll writes and retires only its
rows, a node claim holds one cluster's node, and the applier's lock is per cluster."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import psycopg
import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from changes.approval import claim_nodes
from cluster.models import Cluster, ObservedNode
from cluster.services import settings_cluster
from fleet.models import NodePool
from loop.apply import applier_lock
from loop.desired import collect_manifests
from loop.write import write_fleet
from portal.vocabulary.errors import DomainError
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from tenants.models import Namespace, PriorityClass
from tenants.services import set_namespace_quota
from tests.factories import MigChangeRequestFactory, ObservedNodeFactory, TeamFactory

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)


@pytest.fixture
def two() -> tuple[Cluster, Cluster]:
    other = Cluster.objects.create(
        name="inference", display_name="Inference", connection="token", api_url="https://b:6443"
    )
    return settings_cluster(), other


def _queues(cluster: Cluster, team: Any, nominal: str) -> None:
    flavor = ResourceFlavor.objects.create(cluster=cluster, name="h100")
    cohort = Cohort.objects.create(cluster=cluster, name="shared")
    cq = ClusterQueue.objects.create(
        cluster=cluster,
        name="cq-train",
        cohort=cohort,
        resource_groups=[
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": flavor.name,
                        "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}],
                    }
                ],
            }
        ],
    )
    namespace = Namespace.objects.create(cluster=cluster, name="team-a", team=team)
    LocalQueue.objects.create(name="train", namespace=namespace, cluster_queue=cq)


def test_a_name_is_unique_per_cluster_not_across_clusters(two: tuple[Cluster, Cluster]) -> None:
    a, b = two
    team = TeamFactory(slug="team-a")
    _queues(a, team, "8")
    _queues(b, team, "4")  # the same names on the other cluster: other objects
    assert ClusterQueue.objects.filter(name="cq-train").count() == 2
    NodePool.objects.create(cluster=a, name="train", node_selector={"pool": "train"})
    NodePool.objects.create(cluster=b, name="train", node_selector={"pool": "train"})
    for model, values in [
        (Namespace, {"name": "team-a", "team": team}),
        (ClusterQueue, {"name": "cq-train"}),
        (ResourceFlavor, {"name": "h100"}),
        (Cohort, {"name": "shared"}),
        (NodePool, {"name": "train"}),
    ]:
        with pytest.raises(IntegrityError), transaction.atomic():
            model.objects.create(cluster=b, **values)


def test_a_clusters_rendering_holds_only_its_objects(two: tuple[Cluster, Cluster]) -> None:
    a, b = two
    team = TeamFactory(slug="team-a")
    _queues(a, team, "8")
    _queues(b, team, "4")
    Namespace.objects.create(cluster=b, name="team-a-serve", team=team)
    everywhere = PriorityClass.objects.create(name="everywhere", value=10)
    only_a = PriorityClass.objects.create(name="training-only", value=20)
    only_a.clusters.add(a)

    def rendered(cluster: Cluster) -> dict[tuple[str, str, str], Any]:
        return {
            (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"]): m
            for m in collect_manifests(cluster=cluster, backend="kueue", version="v1beta2")
        }

    on_a, on_b = rendered(a), rendered(b)
    assert ("Namespace", "", "team-a-serve") in on_b
    assert ("Namespace", "", "team-a-serve") not in on_a
    assert ("PriorityClass", "", "training-only") in on_a
    assert ("PriorityClass", "", "training-only") not in on_b
    assert everywhere.name in {name for kind, _, name in on_a if kind == "PriorityClass"}
    assert everywhere.name in {name for kind, _, name in on_b if kind == "PriorityClass"}

    def nominal(objects: dict[tuple[str, str, str], Any]) -> str:
        spec = objects[("ClusterQueue", "", "cq-train")]["spec"]
        return str(spec["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"])

    assert (nominal(on_a), nominal(on_b)) == ("8", "4")


def _node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {}, "resourceVersion": "1"},
        "status": {
            "capacity": {},
            "allocatable": {},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
        "spec": {},
    }


def test_a_clusters_poll_writes_and_retires_only_its_rows(two: tuple[Cluster, Cluster]) -> None:
    a, b = two
    write_fleet([_node("gpu-1"), _node("gpu-2")], [], cluster_id=a.pk, now=NOW)
    write_fleet([_node("gpu-1")], [], cluster_id=b.pk, now=NOW)
    assert ObservedNode.objects.filter(name="gpu-1").count() == 2
    # B's next poll sees no nodes: B's gpu-1 is gone, A's nodes are untouched.
    write_fleet([], [], cluster_id=b.pk, now=NOW + dt.timedelta(minutes=1))
    gone = dict(
        ObservedNode.objects.values_list("cluster__name", "gone_since").filter(name="gpu-1")
    )
    assert gone[a.name] is None
    assert gone[b.name] is not None
    assert not ObservedNode.objects.filter(cluster=a, gone_since__isnull=False).exists()


def test_a_claim_holds_one_clusters_node(two: tuple[Cluster, Cluster]) -> None:
    a, b = two
    on_a = MigChangeRequestFactory(cluster=a, nodes=["gpu-1"])
    on_b = MigChangeRequestFactory(cluster=b, nodes=["gpu-1"])
    claim_nodes(on_a)
    claim_nodes(on_b)  # the same name on another cluster is another node
    again = MigChangeRequestFactory(cluster=a, nodes=["gpu-1"])
    with pytest.raises(DomainError, match=f"gpu-1 is held by open request #{on_a.pk}"):
        claim_nodes(again)


def _try_lock_elsewhere(cluster_id: int) -> bool:
    """Whether another database session gets the cluster's applier lock (and lets it go)."""
    params = connection.get_connection_params()
    got: list[bool] = []

    def attempt() -> None:
        with psycopg.connect(**params) as other, other.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [0x5155_4152, cluster_id])
            row = cursor.fetchone()
            got.append(bool(row and row[0]))

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join(timeout=30)
    return got == [True]


def test_the_appliers_lock_is_per_cluster(two: tuple[Cluster, Cluster]) -> None:
    a, b = two
    with applier_lock(a.pk):
        assert not _try_lock_elsewhere(a.pk)  # a second applier of A waits
        assert _try_lock_elsewhere(b.pk)  # B applies meanwhile
    assert _try_lock_elsewhere(a.pk)


def test_a_quota_is_checked_against_its_own_clusters_fleet(
    two: tuple[Cluster, Cluster], platform_admin: Any
) -> None:
    a, b = two
    team = TeamFactory(slug="team-a")
    ObservedNodeFactory(
        cluster=a,
        name="big",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        mig_config="all-disabled",
        allocatable={"nvidia.com/gpu": "8"},
    )
    ObservedNodeFactory(
        cluster=b,
        name="small",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        mig_config="all-disabled",
        gpu_count=1,
        allocatable={"nvidia.com/gpu": "1"},
    )
    on_a = Namespace.objects.create(cluster=a, name="team-a", team=team)
    on_b = Namespace.objects.create(cluster=b, name="team-a", team=team)
    quota = {"requests.nvidia.com/gpu": "4"}
    set_namespace_quota(actor=platform_admin, namespace=on_a, hard=quota, source="web")
    with pytest.raises(ValidationError) as refused:
        set_namespace_quota(actor=platform_admin, namespace=on_b, hard=quota, source="web")
    assert "4 is more than the fleet could ever offer (1 in its best MIG layout)" in str(
        refused.value.message_dict["hard[requests.nvidia.com/gpu]"]
    )


@pytest.mark.django_db(transaction=True)
def test_a_flushed_database_gets_the_settings_cluster_back() -> None:
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)
    assert list(Cluster.objects.values_list("connection", flat=True)) == ["settings"]
