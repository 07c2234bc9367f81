"""The gateway against the demo cluster over HTTP, with the real kubernetes client."""

from __future__ import annotations

from typing import Any

import pytest

import devcluster
from kube import (
    ApplyConflict,
    EvictionBlocked,
    Gateway,
    NotFound,
    ObjectRef,
    PermanentKubeError,
    RetryableKubeError,
    connect,
)
from tests.support import wait_for

QUOTA = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {
        "name": "team-a-gpu-quota",
        "namespace": "team-a",
        "labels": {"app.kubernetes.io/managed-by": "quartermaster"},
    },
    "spec": {"hard": {"requests.nvidia.com/gpu": "16"}},
}


def test_paginated_list_decodes_every_node(gateway: Gateway) -> None:
    pages = list(gateway.list_pages("v1", "Node", page_size=2))
    assert [len(p) for p in pages] == [2, 2, 1]
    names = [n["metadata"]["name"] for page in pages for n in page]
    assert names == ["gpu-a100-01", "gpu-a100-02", "gpu-a100-03", "gpu-h100-01", "gpu-h100-02"]
    assert isinstance(pages[0][0], dict)


def test_list_with_selectors(gateway: Gateway) -> None:
    a100 = gateway.list("v1", "Node", label_selector="nvidia.com/mig.config=all-3g.40gb")
    assert [n["metadata"]["name"] for n in a100] == ["gpu-a100-01", "gpu-a100-02"]
    pending = gateway.list("v1", "Pod", field_selector="spec.nodeName=,status.phase=Pending")
    assert [p["metadata"]["name"] for p in pending] == [
        "train-3g",
        "gang-eval-worker-2",
        "gang-eval-worker-3",
    ]


def test_apply_is_idempotent_and_reports_conflicts(gateway: Gateway) -> None:
    gateway.apply(QUOTA)
    # The quota controller writes the status once, on its own time: compare after it did.
    ref = ObjectRef(
        "v1", "ResourceQuota", QUOTA["metadata"]["name"], QUOTA["metadata"]["namespace"]
    )
    first = wait_for(
        lambda: (live := gateway.get(ref)).get("status", {}).get("hard") and live,
        timeout=10,
        what="the quota's status",
    )
    again = gateway.apply(QUOTA)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    other = connect(url=gateway.api.configuration.host, field_manager="ops-cli")
    changed = {**QUOTA, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}}
    with pytest.raises(ApplyConflict) as caught:
        other.apply(changed)
    assert caught.value.fields == [("quartermaster", ".spec.hard.requests.nvidia.com/gpu")]
    assert other.apply(changed, force=True)["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"


def test_a_conflict_with_an_update_manager_names_it_with_its_version(gateway: Gateway) -> None:
    gateway.apply(QUOTA)
    patcher = connect(url=gateway.api.configuration.host, field_manager="kubectl-patch")
    patcher.merge_patch(
        ObjectRef("v1", "ResourceQuota", QUOTA["metadata"]["name"], QUOTA["metadata"]["namespace"]),
        {"spec": {"hard": {"requests.nvidia.com/gpu": "3"}}},
    )
    with pytest.raises(ApplyConflict) as caught:
        gateway.apply({**QUOTA, "spec": {"hard": {"requests.nvidia.com/gpu": "5"}}})
    assert 'conflict with "kubectl-patch" using v1: .spec.hard' in caught.value.message
    assert caught.value.fields == [("kubectl-patch", ".spec.hard.requests.nvidia.com/gpu")]


def test_permanent_errors_keep_the_servers_message(gateway: Gateway) -> None:
    bad = {**QUOTA, "metadata": {**QUOTA["metadata"], "name": "Bad_Name"}}
    with pytest.raises(PermanentKubeError) as caught:
        gateway.apply(bad)
    assert caught.value.status == 422
    assert 'ResourceQuota "Bad_Name" is invalid' in caught.value.message
    with pytest.raises(NotFound):
        gateway.get(ObjectRef("v1", "Node", "gpu-h100-99"))


def test_unreachable_server_is_retryable() -> None:
    gateway = connect(url="http://127.0.0.1:9")
    with pytest.raises(RetryableKubeError, match="cannot reach the Kubernetes API"):
        gateway.version()


def test_delete_touches_only_managed_objects(gateway: Gateway) -> None:
    gateway.apply(QUOTA)
    assert gateway.delete_if_managed(ObjectRef("v1", "ResourceQuota", "team-a-gpu-quota", "team-a"))
    # team-b's namespace exists in the cluster but the portal did not create it.
    assert not gateway.delete_if_managed(ObjectRef("v1", "Namespace", "team-b"))
    assert gateway.get(ObjectRef("v1", "Namespace", "team-b"))


def test_labels_cordon_and_the_mig_manager(gateway: Gateway) -> None:
    gateway.evict("team-b", "dev-test-1g")
    wait_for(
        lambda: (
            not gateway.list(
                "v1", "Pod", field_selector="spec.nodeName=gpu-a100-03", namespace="team-b"
            )
        )
    )
    gateway.cordon("gpu-a100-03")
    gateway.patch_node_labels(
        "gpu-a100-03", {"nvidia.com/mig.config": "all-3g.40gb", "nvidia.com/mig.config.state": None}
    )

    def configured() -> bool:
        node = gateway.get(ObjectRef("v1", "Node", "gpu-a100-03"))
        return node["metadata"]["labels"].get("nvidia.com/mig.config.state") == "success"

    wait_for(configured)
    node = gateway.get(ObjectRef("v1", "Node", "gpu-a100-03"))
    assert node["spec"]["unschedulable"] is True
    assert node["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "16"
    assert node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "0"  # lingers at 0
    gateway.cordon("gpu-a100-03", False)
    # The pending team-a pod now fits.
    wait_for(
        lambda: (
            gateway.get(ObjectRef("v1", "Pod", "train-3g", "team-a"))["spec"].get("nodeName")
            == "gpu-a100-03"
        )
    )


def test_eviction_respects_disruption_budgets(gateway: Gateway) -> None:
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "filler", "namespace": "team-b"},
        "spec": {"minAvailable": 4, "selector": {"matchLabels": {"app": "filler"}}},
    }
    gateway.apply(pdb)
    with pytest.raises(EvictionBlocked, match="disruption budget"):
        gateway.evict("team-b", "filler-3g-0")
    gateway.evict("team-b", "no-such-pod")  # already gone is fine


@pytest.mark.demo_cluster(users={"viewer-token": ("alice", frozenset({"get", "list"}))})
def test_rbac_refusal_is_permanent_with_the_servers_words(
    demo_cluster: devcluster.DemoCluster,
) -> None:
    viewer = connect(url=demo_cluster.url, token="viewer-token")
    assert viewer.list("v1", "Node")
    with pytest.raises(PermanentKubeError) as caught:
        viewer.apply(QUOTA)
    assert caught.value.status == 403
    assert caught.value.message == (
        'resourcequotas "team-a-gpu-quota" is forbidden: User "alice" cannot patch resource '
        '"resourcequotas" in API group "" in the namespace "team-a"'
    )
    with pytest.raises(PermanentKubeError, match="Unauthorized"):
        connect(url=demo_cluster.url, token="wrong").list("v1", "Node")


def test_the_operator_check_says_how_to_fix_unreachable_dcgm_metrics(
    gateway: Gateway, settings: Any
) -> None:
    from diagnostics.operator_check import check_gpu_operator

    settings.QM_DCGM_PORT = 9500
    items = {i.name: i for i in check_gpu_operator(gateway, namespace="gpu-operator")}
    dcgm = items["DCGM metrics are reachable"]
    assert not dcgm.ok
    assert dcgm.detail.startswith(
        "nvidia-dcgm-exporter-a100-01: error trying to reach service: dial tcp 10.244."
    )
    assert dcgm.fix.startswith(
        "kubectl get --raw /api/v1/namespaces/gpu-operator/pods/<exporter pod>:9500/proxy/metrics"
    )
    settings.QM_DCGM_SOURCE = "prometheus"
    settings.QM_PROMETHEUS_URL = "http://127.0.0.1:1"
    items = {i.name: i for i in check_gpu_operator(gateway, namespace="gpu-operator")}
    dcgm = items["DCGM metrics are reachable"]
    assert not dcgm.ok and dcgm.detail.startswith("Prometheus at http://127.0.0.1:1 did not answer")


def test_gpu_operator_check_on_the_demo_fleet(gateway: Gateway) -> None:
    from diagnostics.operator_check import check_gpu_operator

    items = {i.name: i for i in check_gpu_operator(gateway, namespace="gpu-operator")}
    assert items["Nodes report GPU resources"].ok
    assert all(
        items[f"{t} runs on every GPU node"].ok
        for t in ("device plugin", "GPU Feature Discovery", "DCGM exporter", "MIG Manager")
    )
    dcgm = items["DCGM metrics are reachable"]
    assert dcgm.ok and dcgm.detail == (
        "nvidia-dcgm-exporter-a100-01 reports 8 GPUs through the API server's pod proxy."
    )
    # The seed's incident node reports MIG Manager failed.
    mig = items["MIG Manager states are not failed"]
    assert (
        not mig.ok and mig.detail == "failed on: gpu-a100-03." and "nvidia-mig-manager" in mig.fix
    )
    gateway.patch_node_labels("gpu-a100-03", {"nvidia.com/mig.config.state": "success"})
    gateway.delete(ObjectRef("v1", "Pod", "nvidia-dcgm-exporter-a100-02", "gpu-operator"))
    items = {i.name: i for i in check_gpu_operator(gateway, namespace="gpu-operator")}
    assert items["MIG Manager states are not failed"].ok
    dcgm = items["DCGM exporter runs on every GPU node"]
    assert not dcgm.ok
    assert dcgm.detail == "Running on 4 of 5 nodes. Missing on: gpu-a100-02."
    assert "kubectl get pods -n gpu-operator -l app=nvidia-dcgm-exporter -o wide" in dcgm.fix


def test_kueue_visibility_api_orders_pending_workloads(gateway: Gateway) -> None:
    from kube import NotFound

    for name in ("cq-train",):
        gateway.apply(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {"resourceGroups": []},
            }
        )
    for namespace, queue in (("team-a", "team-a-train"), ("team-b", "team-b-train")):
        gateway.apply(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": queue, "namespace": namespace},
                "spec": {"clusterQueue": "cq-train"},
            }
        )
    items = gateway.pending_workloads("cq-train")
    assert [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
        for i in items
    ] == [
        ("job-llm-pretrain", 0, 0),
        ("job-vision-3g", 1, 1),
        ("job-big-train", 2, 0),
    ]
    with pytest.raises(NotFound, match=r'clusterqueues\.kueue\.x-k8s\.io "nope" not found'):
        gateway.pending_workloads("nope")
