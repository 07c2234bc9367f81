"""What a cluster runs, decoded from a real API server's answers (tests/data/k8s-api-samples:
/version and the APIGroupList of a kube-apiserver v1.36.2 with Kueue's CRDs), and the same
answers with Kueue serving v1beta1 only, no Kueue, or Volcano's CRDs; what the portal then
renders; and a rules review set against the ClusterRole the portal ships."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from cluster.connection import needed_rules
from cluster.discovery import (
    Discovered,
    compare_rules,
    decode_discovery,
    grants,
    render_target,
    served_versions,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "k8s-api-samples"


def recorded(name: str) -> Any:
    return json.loads((DATA / f"{name}.json").read_text())["response"]["body"]


def groups_with(kueue: list[str] | None, *extra: str) -> dict[str, Any]:
    """The recorded APIGroupList with Kueue serving ``kueue`` (None: no Kueue) and the
    ``extra`` groups (v1beta1) added."""
    groups = copy.deepcopy(recorded("a4-get-apis-legacy"))
    groups["groups"] = [g for g in groups["groups"] if g["name"] != "kueue.x-k8s.io"]
    for name, versions in ([("kueue.x-k8s.io", kueue)] if kueue else []) + [
        (g, ["v1beta1"]) for g in extra
    ]:
        groups["groups"].append(
            {
                "name": name,
                "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in versions],
                "preferredVersion": {
                    "groupVersion": f"{name}/{versions[0]}",
                    "version": versions[0],
                },
            }
        )
    return groups


def test_the_recorded_cluster_serves_kueue_v1beta2_preferred_and_v1beta1() -> None:
    found = decode_discovery(
        recorded("a1-get-version"),
        recorded("a4-get-apis-legacy"),
        cluster_policies=None,
        node_labels=[],
    )
    assert found.kubernetes_version == "v1.36.2"
    assert found.kueue_versions == ("v1beta2", "v1beta1")
    assert not found.volcano
    assert not found.gpu_operator
    assert found.gpu_operator_detail == "no ClusterPolicy and no node labelled by the GPU Operator"


def test_the_preferred_version_comes_first_whatever_order_the_list_has() -> None:
    groups = groups_with(["v1beta1", "v1beta2"])
    groups["groups"][-1]["preferredVersion"] = {"version": "v1beta2"}
    assert served_versions(groups, "kueue.x-k8s.io") == ("v1beta2", "v1beta1")
    assert served_versions(groups, "nvidia.com") == ()


def test_a_cluster_policy_says_the_operator_runs_and_the_mig_strategy() -> None:
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"mig": {"strategy": "mixed"}},
        "status": {"state": "ready"},
    }
    found = decode_discovery(
        recorded("a1-get-version"),
        groups_with(["v1beta2"], "nvidia.com"),
        cluster_policies=[policy],
        node_labels=[{"nvidia.com/mig.strategy": "single"}],
    )
    assert (found.gpu_operator, found.gpu_operator_detail, found.mig_strategy) == (
        True,
        "ClusterPolicy cluster-policy: ready",
        "mixed",  # the ClusterPolicy says, not a node's own label
    )


def test_an_installed_crd_without_a_cluster_policy_is_no_running_operator() -> None:
    found = decode_discovery(
        recorded("a1-get-version"),
        groups_with(["v1beta2"], "nvidia.com"),
        cluster_policies=[],
        node_labels=[{"nvidia.com/gpu.deploy.device-plugin": "true"}],
    )
    assert not found.gpu_operator
    assert "no ClusterPolicy" in found.gpu_operator_detail


def test_without_the_cluster_policy_the_nodes_labels_tell() -> None:
    nodes = [
        {"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/mig.strategy": "mixed"},
        {"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/mig.strategy": "mixed"},
        {"kubernetes.io/os": "linux"},
    ]
    found = decode_discovery(
        recorded("a1-get-version"), groups_with(None), cluster_policies=None, node_labels=nodes
    )
    assert found.gpu_operator and found.mig_strategy == "mixed"
    assert found.gpu_operator_detail == "its operands on 2 node(s) (ClusterPolicy not served)"
    forbidden = decode_discovery(
        recorded("a1-get-version"),
        groups_with(None, "nvidia.com"),
        cluster_policies=None,  # listing them was refused
        node_labels=nodes,
    )
    assert forbidden.gpu_operator_detail.endswith("(ClusterPolicy not readable)")


def facts(kueue: tuple[str, ...], volcano: bool) -> Discovered:
    return Discovered("v1.36.2", kueue, volcano, False, "", "")


@pytest.mark.parametrize(
    ("groups", "kueue", "volcano", "target"),
    [
        (groups_with(["v1beta2", "v1beta1"]), ("v1beta2", "v1beta1"), False, ("kueue", "v1beta2")),
        (groups_with(["v1beta2"]), ("v1beta2",), False, ("kueue", "v1beta2")),
        (groups_with(["v1beta1"]), ("v1beta1",), False, ("kueue", "v1beta1")),
        (
            groups_with(None, "scheduling.volcano.sh", "batch.volcano.sh"),
            (),
            True,
            ("volcano", "v1beta2"),
        ),
        (groups_with(None), (), False, ("kueue", "v1beta2")),
    ],
    ids=["both", "v1beta2-only", "v1beta1-only", "volcano", "neither"],
)
def test_the_portal_renders_what_the_cluster_serves(
    groups: dict[str, Any], kueue: tuple[str, ...], volcano: bool, target: tuple[str, str]
) -> None:
    found = decode_discovery(
        recorded("a1-get-version"), groups, cluster_policies=None, node_labels=[]
    )
    assert (found.kueue_versions, found.volcano) == (kueue, volcano)
    assert render_target(found, backend="kueue", version="v1beta2") == target


def test_the_configured_choice_stands_while_it_is_served_or_nothing_is_known() -> None:
    assert render_target(None, backend="kueue", version="v1beta1") == ("kueue", "v1beta1")
    both = facts(("v1beta2", "v1beta1"), True)
    assert render_target(both, backend="kueue", version="v1beta1") == ("kueue", "v1beta1")
    assert render_target(both, backend="volcano", version="v1beta2") == ("volcano", "v1beta2")
    # Volcano configured, the cluster has only Kueue 0.20 (v1beta2 alone).
    kueue_only = facts(("v1beta2",), False)
    assert render_target(kueue_only, backend="volcano", version="v1beta1") == ("kueue", "v1beta2")


# ------------------------------------------------------------------ the rules review

BASIC = [
    {
        "verbs": ["create"],
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
    }
]


def test_a_review_granting_the_cluster_role_misses_nothing() -> None:
    needed = needed_rules()
    checks = compare_rules(needed, {"resourceRules": [*BASIC, *needed], "incomplete": False})
    assert checks and all(c.allowed for c in checks)
    by_resource = {(c.group, c.resource): c.verbs for c in checks}
    assert by_resource[("nvidia.com", "clusterpolicies")] == ("list",)
    assert by_resource[("batch", "jobs")] == ("get",)  # two rules name it: one row
    assert by_resource[("", "nodes")] == ("get", "list", "patch")
    assert len(by_resource) == len(checks)


def test_a_review_without_eviction_and_kueue_writes_names_each_missing_permission() -> None:
    needed = needed_rules()
    granted = [
        {"verbs": ["get", "list", "watch"], "apiGroups": ["*"], "resources": ["*"]},
        {"verbs": ["patch"], "apiGroups": [""], "resources": ["nodes"]},
    ]
    checks = compare_rules(needed, {"resourceRules": granted})
    missing = {(c.group, c.resource): c.missing for c in checks if not c.allowed}
    assert missing[("", "pods/eviction")] == ("create",)
    assert missing[("kueue.x-k8s.io", "clusterqueues")] == ("create", "patch", "delete")
    assert ("", "nodes") not in missing
    assert ("", "pods/proxy") not in missing  # "*" grants subresources too, as in RBAC
    assert [c.allowed for c in checks] == sorted(c.allowed for c in checks)  # missing first


def test_a_rule_for_named_objects_or_a_subresource_wildcard() -> None:
    named = [{"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"], "resourceNames": ["a"]}]
    assert not grants(named, "", "nodes", "get")
    sub = [{"verbs": ["create"], "apiGroups": [""], "resources": ["pods/*"]}]
    assert grants(sub, "", "pods/eviction", "create")
    assert not grants(sub, "", "pods", "create")
    everything = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
    assert grants(everything, "batch", "jobs", "get")
