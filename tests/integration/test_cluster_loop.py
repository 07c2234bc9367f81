"""Desired state reaches the demo cluster, and the fleet comes back (services, real HTTP)."""

from __future__ import annotations

from typing import Any

import pytest

import devcluster
from cluster.models import AppliedObject, Drift, ObservedNode, ObservedPod, SyncRun
from kube import Gateway, NotFound, ObjectRef, connect
from loop.apply import apply_desired_state
from loop.desired import collect_manifests
from loop.poll import poll_cluster
from portal.audit.record import SYSTEM
from tenants.models import Namespace
from tenants.services import delete_namespace, set_namespace_quota
from tests.support import wait_for

pytestmark = pytest.mark.django_db

QUOTA = ObjectRef("v1", "ResourceQuota", "team-a-gpu-quota", "team-a")


@pytest.fixture
def portal_cluster(
    settings: Any, demo: None, demo_cluster: devcluster.DemoCluster, gateway: Gateway
) -> Gateway:
    """The demo scenario in the portal, pointed at a demo cluster nothing was applied to."""
    settings.KUBE_URL = demo_cluster.url
    return gateway


def test_demo_state_is_applied_and_a_second_apply_changes_nothing(portal_cluster: Gateway) -> None:
    report = apply_desired_state(gateway=portal_cluster)
    assert not report.failed and not report.conflicts
    assert len(report.applied) == AppliedObject.objects.count() > 20
    quota = portal_cluster.get(QUOTA)
    assert quota["spec"]["hard"] == {
        "limits.nvidia.com/gpu": "16",
        "pods": "50",
        "requests.nvidia.com/gpu": "16",
    }
    queue = portal_cluster.get(
        ObjectRef("kueue.x-k8s.io/v1beta2", "LocalQueue", "team-a-train", "team-a")
    )
    assert queue["spec"]["clusterQueue"] == "cq-train"
    cq = portal_cluster.get(ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", "cq-dev"))
    assert cq["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0]["borrowingLimit"] == "10"
    ns = portal_cluster.get(ObjectRef("v1", "Namespace", "team-dev"))
    assert ns["metadata"]["labels"]["quartermaster.io/team"] == "team-dev"
    again = apply_desired_state(gateway=portal_cluster)
    assert (again.applied, again.removed, again.unchanged) == ([], [], len(report.applied))


def test_a_quota_change_reaches_the_cluster(portal_cluster: Gateway) -> None:
    apply_desired_state(gateway=portal_cluster)
    namespace = Namespace.objects.get(name="team-a")
    set_namespace_quota(
        actor=SYSTEM,
        namespace=namespace,
        source="cli",
        hard={"requests.nvidia.com/gpu": "24", "pods": "60"},
    )
    report = apply_desired_state(gateway=portal_cluster)
    assert report.applied == ["ResourceQuota team-a/team-a-gpu-quota"]
    assert portal_cluster.get(QUOTA)["spec"]["hard"] == {
        "pods": "60",
        "requests.nvidia.com/gpu": "24",
    }


def test_deleting_a_namespace_removes_the_portals_objects_and_nothing_else(
    portal_cluster: Gateway,
) -> None:
    apply_desired_state(gateway=portal_cluster)
    delete_namespace(actor=SYSTEM, namespace=Namespace.objects.get(name="team-dev"), source="cli")
    delete_namespace(actor=SYSTEM, namespace=Namespace.objects.get(name="team-b"), source="cli")
    report = apply_desired_state(gateway=portal_cluster)
    assert "Namespace team-dev" in report.removed
    with pytest.raises(NotFound):
        portal_cluster.get(ObjectRef("v1", "Namespace", "team-dev"))
    # team-b existed before the portal (with running pods): only the portal's fields go.
    team_b = portal_cluster.get(ObjectRef("v1", "Namespace", "team-b"))
    assert "quartermaster.io/team" not in team_b["metadata"].get("labels", {})
    assert portal_cluster.list("v1", "Pod", namespace="team-b")
    with pytest.raises(NotFound):
        portal_cluster.get(ObjectRef("v1", "ResourceQuota", "team-b-gpu-quota", "team-b"))
    # Unrelated objects stay.
    assert portal_cluster.get(QUOTA)
    assert portal_cluster.get(ObjectRef("v1", "Namespace", "gpu-operator"))


def test_a_refused_object_is_recorded_with_the_servers_message(
    portal_cluster: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    # Someone else owns the quota's pods field with another value: the apply reports it.
    other = connect(url=demo_cluster.url, field_manager="kubectl-edit")
    apply_desired_state(gateway=portal_cluster)
    other.merge_patch(QUOTA, {"spec": {"hard": {"pods": "7"}}})
    namespace = Namespace.objects.get(name="team-a")
    set_namespace_quota(
        actor=SYSTEM,
        namespace=namespace,
        source="cli",
        hard={"requests.nvidia.com/gpu": "16", "pods": "51"},
    )
    report = apply_desired_state(gateway=portal_cluster)
    assert report.conflicts == ["ResourceQuota team-a/team-a-gpu-quota"]
    record = AppliedObject.objects.get(kind="ResourceQuota", name="team-a-gpu-quota")
    assert record.outcome == "conflict"
    # An Update manager is named as the API server names it: with the version it wrote.
    assert (
        "Fields are owned by kubectl-edit: Apply failed with 1 conflict: "
        'conflict with "kubectl-edit" using v1: .spec.hard.pods' in record.message
    )


def test_poll_reads_the_fleet_and_flags_the_incident_node(portal_cluster: Gateway) -> None:
    apply_desired_state(gateway=portal_cluster)
    run = poll_cluster(gateway=portal_cluster)
    assert run.ok and run.nodes == 5
    node = ObservedNode.objects.get(name="gpu-a100-03")
    assert (node.gpu_product, node.gpu_count, node.mig_config, node.mig_config_state) == (
        "NVIDIA-A100-SXM4-80GB",
        8,
        "all-balanced",
        "failed",
    )
    assert node.gpu_resources() == [
        ("nvidia.com/mig-1g.10gb", 16, 4),
        ("nvidia.com/mig-2g.20gb", 8, 0),
    ]
    assert ObservedNode.objects.get(name="gpu-a100-01").allocated == {"nvidia.com/mig-3g.40gb": 16}
    pending = ObservedPod.objects.get(namespace="team-a", name="train-3g")
    assert pending.phase == "Pending"
    assert pending.pending_message.startswith(
        "0/5 nodes are available: 2 node(s) had untolerated taint(s), "
        "3 Insufficient nvidia.com/mig-3g.40gb."
    )
    drift = Drift.objects.get(resolved_at__isnull=True, kind="mig_layout")
    assert (drift.subject, drift.desired, drift.observed) == (
        "gpu-a100-03",
        "all-3g.40gb",
        "all-balanced (failed)",
    )
    assert "mig-2g.20gb x 8" in drift.detail
    # Who set the layout, from the node's managedFields.
    assert node.mig_config_by.startswith("kubectl-label at ")
    assert f"Set by {node.mig_config_by}." in drift.detail


def test_an_allocatable_change_shows_after_one_poll_and_resolves_the_drift(
    portal_cluster: Gateway,
) -> None:
    apply_desired_state(gateway=portal_cluster)
    poll_cluster(gateway=portal_cluster)
    portal_cluster.evict("team-b", "dev-test-1g")
    wait_for(
        lambda: (
            not portal_cluster.list(
                "v1", "Pod", namespace="team-b", field_selector="spec.nodeName=gpu-a100-03"
            )
        )
    )
    portal_cluster.patch_node_labels(
        "gpu-a100-03", {"nvidia.com/mig.config": "all-3g.40gb", "nvidia.com/mig.config.state": None}
    )
    wait_for(
        lambda: (
            portal_cluster.get(ObjectRef("v1", "Node", "gpu-a100-03"))["metadata"]["labels"].get(
                "nvidia.com/mig.config.state"
            )
            == "success"
        )
    )
    poll_cluster(gateway=portal_cluster)
    node = ObservedNode.objects.get(name="gpu-a100-03")
    assert node.allocatable["nvidia.com/mig-3g.40gb"] == "16"
    assert [r for r, _, _ in node.gpu_resources()] == ["nvidia.com/mig-3g.40gb"]
    assert not Drift.objects.filter(resolved_at__isnull=True, kind="mig_layout").exists()
    assert Drift.objects.get(kind="mig_layout").resolved_at is not None


def test_out_of_band_changes_to_managed_objects_are_drift(
    portal_cluster: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    apply_desired_state(gateway=portal_cluster)
    other = connect(url=demo_cluster.url, field_manager="kubectl-edit")
    other.merge_patch(QUOTA, {"spec": {"hard": {"pods": "500"}}})
    other.delete(ObjectRef("kueue.x-k8s.io/v1beta2", "LocalQueue", "dev-test", "team-dev"))
    poll_cluster(gateway=portal_cluster)
    open_drift = {
        (d.kind, d.subject, d.field): (d.desired, d.observed)
        for d in Drift.objects.filter(resolved_at__isnull=True).exclude(kind="mig_layout")
    }
    assert open_drift == {
        ("object", "ResourceQuota team-a/team-a-gpu-quota", "spec.hard.pods"): ("50", "500"),
        ("missing", "LocalQueue team-dev/dev-test", ""): ("present", "(absent)"),
    }
    # Who changed it, from managedFields.
    quota_drift = Drift.objects.get(resolved_at__isnull=True, field="spec.hard.pods")
    assert quota_drift.detail.startswith(
        "Changed in the cluster outside the portal by kubectl-edit (Update, "
    )
    # The desired state is untouched by the poller.
    assert Namespace.objects.get(name="team-a").quota_items.get(resource="pods").hard == "50"


def test_vanished_nodes_are_marked_not_deleted(
    portal_cluster: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    poll_cluster(gateway=portal_cluster)
    with demo_cluster.cluster.lock:
        from devcluster.resources import find

        nodes = find("", "v1", "nodes")
        demo_cluster.cluster._remove(nodes, demo_cluster.cluster.get(nodes, "", "gpu-h100-02"))
    run = poll_cluster(gateway=portal_cluster)
    assert run.nodes == 4
    assert ObservedNode.objects.get(name="gpu-h100-02").gone_since is not None


def test_a_poll_of_an_unreachable_cluster_is_recorded(settings: Any) -> None:
    run = poll_cluster(gateway=connect(url="http://127.0.0.1:9"))
    assert not run.ok
    assert "cannot reach the Kubernetes API" in run.error
    assert SyncRun.objects.count() == 1


def test_kueue_admission_and_why_a_workload_waits(
    portal_cluster: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    from cluster.models import ObservedWorkload

    apply_desired_state(gateway=portal_cluster)

    def settled() -> bool:
        # Kueue looks again whenever a queue appears: wait for the last verdict.
        items = portal_cluster.list("kueue.x-k8s.io/v1beta2", "Workload")
        messages = [
            c.get("message", "")
            for w in items
            for c in (w.get("status") or {}).get("conditions", [])
        ]
        admitted = sum(1 for w in items if (w.get("status") or {}).get("admission"))
        return admitted == 2 and any("more needed" in m for m in messages)

    wait_for(settled)
    poll_cluster(gateway=portal_cluster)
    rows = {w.name: w for w in ObservedWorkload.objects.all()}
    assert (
        rows["job-llm-pretrain"].admitted and rows["job-llm-pretrain"].cluster_queue == "cq-train"
    )
    assert rows["job-vision-3g"].admitted
    waiting = rows["job-big-train"]
    assert not waiting.admitted
    # As real Kueue does: team-a's LimitRange (nvidia.com/gpu default 1) is charged for each of
    # job-vision-3g's 4 pods too, so 8 + 4 of cq-train's 16 GPUs are taken.
    assert (waiting.reason, waiting.message) == (
        "Pending",
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor h100-80gb, 8 more needed",
    )
    assert waiting.requests == {"nvidia.com/gpu": 12}
    cq = portal_cluster.get(ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", "cq-train"))
    assert (cq["status"]["pendingWorkloads"], cq["status"]["admittedWorkloads"]) == (1, 2)
    usage = {
        (f["name"], r["name"]): r for f in cq["status"]["flavorsUsage"] for r in f["resources"]
    }
    assert usage[("h100-80gb", "nvidia.com/gpu")] == {
        "name": "nvidia.com/gpu",
        "total": "12",
        "borrowed": "0",
    }
    assert usage[("a100-80gb-3g", "nvidia.com/mig-3g.40gb")]["total"] == "4"


def test_objects_deleted_in_the_cluster_are_applied_again_after_a_poll(
    portal_cluster: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    apply_desired_state(gateway=portal_cluster)
    other = connect(url=demo_cluster.url, field_manager="kubectl")
    lq = ObjectRef("kueue.x-k8s.io/v1beta2", "LocalQueue", "dev-test", "team-dev")
    other.delete(lq)
    assert apply_desired_state(gateway=portal_cluster).applied == []  # unchanged by hash
    poll_cluster(gateway=portal_cluster)
    assert apply_desired_state(gateway=portal_cluster).applied == ["LocalQueue team-dev/dev-test"]
    assert portal_cluster.get(lq)["spec"]["clusterQueue"] == "cq-dev"
    poll_cluster(gateway=portal_cluster)
    assert not Drift.objects.filter(resolved_at__isnull=True, kind="missing").exists()


def test_priority_classes_are_stored_as_rendered_so_there_is_nothing_to_drift(
    portal_cluster: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    """The API server drops `globalDefault: false` (omitempty): the portal renders none, so a
    poll finds no difference and a second applier of the same manifests has no conflict."""
    apply_desired_state(gateway=portal_cluster, full=True)  # priority classes too
    stored = portal_cluster.get(
        ObjectRef("scheduling.k8s.io/v1", "PriorityClass", "training-critical")
    )
    assert "globalDefault" not in stored
    assert stored["preemptionPolicy"] == "PreemptLowerPriority"
    poll_cluster(gateway=portal_cluster)
    assert not Drift.objects.filter(resolved_at__isnull=True, subject__contains="PriorityClass")
    gitops = connect(url=demo_cluster.url, field_manager="gitops")
    for manifest in collect_manifests():
        if manifest["kind"] == "PriorityClass":
            gitops.apply(manifest)  # no conflict on any field


def test_v1beta1_mode_keeps_the_api_servers_deprecation_warnings(
    portal_cluster: Gateway, settings: Any, client: Any
) -> None:
    """Against a Kueue whose v1beta1 is deprecated, every Kueue object applied through it
    carries the server's warning on its record (the fleet page and the sync status show
    it); the core kinds carry none."""
    from django.contrib.auth.models import User

    settings.QM_KUEUE_API_VERSION = "v1beta1"
    report = apply_desired_state(gateway=portal_cluster)
    assert not report.failed
    text = "This version is deprecated. Use v1beta2 instead."
    kueue = AppliedObject.objects.filter(api_version="kueue.x-k8s.io/v1beta1")
    assert kueue.count() >= 10
    assert {tuple(o.warnings) for o in kueue} == {(text,)}
    core = AppliedObject.objects.exclude(api_version="kueue.x-k8s.io/v1beta1")
    assert core.count() >= 10 and all(o.warnings == [] for o in core)
    assert f"ClusterQueue cq-dev: {text}" in report.warnings
    client.force_login(User.objects.get(username="admin"))
    status = client.get("/api/v1/sync-status/").json()
    warned = {
        "cluster": AppliedObject.objects.get(kind="ClusterQueue", name="cq-dev").cluster.name,
        "kind": "ClusterQueue",
        "namespace": "",
        "name": "cq-dev",
        "warnings": [text],
    }
    assert warned in status["warnings"]
    page = client.get("/fleet/").content.decode()
    assert "The cluster warned when these were applied" in page
    assert f"ClusterQueue cq-dev</strong> — {text}" in page
    # Kueue converts the old name the portal writes for v1beta1 (Borrow) to the new one: the
    # poll reads MayStopSearch back, and that is no drift.
    cq = portal_cluster.get(ObjectRef("kueue.x-k8s.io/v1beta1", "ClusterQueue", "cq-dev"))
    assert cq["spec"]["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"
    poll_cluster(gateway=portal_cluster)
    assert not Drift.objects.filter(resolved_at__isnull=True, kind="object").exists()
