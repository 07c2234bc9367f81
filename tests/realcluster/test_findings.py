"""What trying the portal on a real control plane found (the issue's numbers), each held here
against real Kubernetes and real Kueue."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from kubernetes import client as kube_client

from changes.mig import preview
from cluster.models import AppliedObject, Cluster
from cluster.scope import settings_cluster_id
from diagnostics.operator_check import check_gpu_operator
from kube import Gateway, ObjectRef
from loop import poll
from loop.apply import apply_desired_state
from loop.desired import collect_manifests
from loop.poll import poll_cluster
from loop.services import take_back_fields
from loop.tasks import poll_cluster_task
from portal.audit.events import Event
from portal.models import AuditEvent
from queues.models import ClusterQueue
from queues.selectors import cluster_queue_what_if, with_nominal
from queues.services import save_cluster_queue
from tenants.models import Namespace
from tenants.services import set_namespace_quota
from tests.realcluster import scenarios
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.player import Kubelet
from tests.realcluster.scenarios import GPU, MIG_3G, gpus, wait_pending, wait_reserved
from tests.realcluster.test_loop import hands as admin
from tests.realcluster.test_loop import job
from tests.support import explained, wait_for
from usage.models import WorkloadRecord
from usage.sampling import record_workloads

need_kit()
pytestmark = pytest.mark.django_db


def test_13_a_poll_under_way_is_not_a_failed_sync(
    real_portal: Gateway, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A poll commits its SyncRun when it starts; the home page read meanwhile said "the last
    sync failed"."""
    client.force_login(User.objects.get(username="lead-a"))
    pages: list[str] = []
    fetch = poll.fetch

    def read_the_home_page_meanwhile(gateway: Gateway, cluster: Any) -> Any:
        pages.append(client.get("/").content.decode())
        return fetch(gateway, cluster)

    monkeypatch.setattr(poll, "fetch", read_the_home_page_meanwhile)
    assert poll_cluster(gateway=real_portal).ok
    (during,) = pages
    assert "the last sync failed" not in during
    assert "a sync is running" in during
    after = client.get("/").content.decode()
    assert "a sync is running" not in after and "the last sync failed" not in after


def test_15_a_refused_jobs_waiting_entry_names_its_queue(
    real_portal: Gateway, real_cluster: RealCluster, client: Client
) -> None:
    """A Job whose pods a ResourceQuota refuses is listed by /api/v1/waiting/ with the
    LocalQueue its kueue.x-k8s.io/queue-name label names (it was "")."""
    hands = admin(real_cluster)
    no_pods = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "rc-no-pods", "namespace": "team-a"},
        "spec": {"hard": {"pods": "0"}},
    }
    hands.apply(no_pods)
    hands.apply(job("rc-refused", "team-a", "team-a-train", 1))
    try:
        wait_for(
            lambda: any(
                e["involvedObject"].get("name") == "rc-refused"
                for e in hands.list(
                    "v1", "Event", namespace="team-a", field_selector="reason=FailedCreate"
                )
            ),
            timeout=30,
            what="the Job controller's FailedCreate event",
        )
        poll_cluster(gateway=real_portal)
        client.force_login(User.objects.get(username="lead-a"))
        rows = client.get("/api/v1/waiting/").json()
        (entry,) = [r for r in rows if r["name"] == "rc-refused"]
        assert (entry["kind"], entry["queue"]) == ("Job", "team-a-train"), entry
    finally:
        real_cluster.remove_job("team-a", "rc-refused")
        hands.delete(ObjectRef("v1", "ResourceQuota", "rc-no-pods", "team-a"))


def test_4_a_run_time_is_kueues_finished_time_not_the_samples(
    real_portal: Gateway, real_cluster: RealCluster, kubelet: Kubelet
) -> None:
    """The usage sample records a workload's end at Kueue's Finished time (it recorded the
    sample's time: runs of about a minute were stored as up to seven)."""
    hands = admin(real_cluster)
    hands.apply(job("rc-short", "team-a", "team-a-train", 1))
    try:
        (pod,) = kubelet.pods_of_job("team-a", "rc-short")
        kubelet.run("team-a", pod.metadata.name)
        kubelet.finish("team-a", pod.metadata.name)

        def finished() -> dict[str, Any] | None:
            for w in hands.list("kueue.x-k8s.io/v1beta2", "Workload", namespace="team-a"):
                if w["metadata"]["name"].startswith("job-rc-short-"):
                    for c in (w.get("status") or {}).get("conditions") or []:
                        if c["type"] == "Finished" and c["status"] == "True":
                            return w
            return None

        wait_for(lambda: finished() is not None, timeout=30, what="Kueue to mark it Finished")
        workload = finished()
        assert workload is not None
        (ended,) = [
            c["lastTransitionTime"]
            for c in workload["status"]["conditions"]
            if c["type"] == "Finished"
        ]
        poll_cluster(gateway=real_portal)
        sample = timezone.now() + dt.timedelta(minutes=5)  # the next sample, minutes later
        record_workloads(sample, settings_cluster_id())
        record = WorkloadRecord.objects.on_every_cluster().get(name=workload["metadata"]["name"])
        assert record.finished_at == dt.datetime.fromisoformat(ended)
    finally:
        real_cluster.remove_job("team-a", "rc-short")


def test_12_a_deleted_managed_object_is_back_after_the_next_poll(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    """The poll that finds a managed object deleted puts it back (it waited for the next
    full re-apply, minutes later)."""
    hands = admin(real_cluster, "kubectl")
    lq = ObjectRef("kueue.x-k8s.io/v1beta2", "LocalQueue", "dev-test", "team-dev")
    hands.delete(lq)
    poll_cluster_task(settings_cluster_id())  # as beat queues it, run here in the test
    assert hands.get(lq)["spec"]["clusterQueue"] == "cq-dev"
    assert AppliedObject.objects.on_every_cluster().get(name="dev-test").outcome == "applied"


def test_14_the_clusters_page_and_the_gpu_operator_check_agree(
    real_portal: Gateway, real_cluster: RealCluster, kubelet: Kubelet, settings: Any
) -> None:
    """The nodes carry the GPU Operator's deploy labels but none of its pods runs: the
    Clusters page said "its operands on 5 node(s)" while the check said 0 of 5."""

    def device_plugin_count() -> str:
        (item,) = [
            i
            for i in check_gpu_operator(real_portal, namespace=settings.QM_GPU_OPERATOR_NAMESPACE)
            if i.name == "device plugin runs on every GPU node"
        ]
        return item.detail

    cluster = Cluster.objects.get(pk=settings_cluster_id())
    assert device_plugin_count().startswith("Running on 0 of 5 nodes.")
    assert not cluster.gpu_operator
    assert "runs on none" in cluster.gpu_operator_detail
    hands = admin(real_cluster)
    namespace = settings.QM_GPU_OPERATOR_NAMESPACE
    hands.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "nvidia-device-plugin-daemonset-rc",
            "namespace": namespace,
            "labels": {"app": "nvidia-device-plugin-daemonset"},
        },
        "spec": {
            "nodeName": "gpu-h100-01",  # as a DaemonSet's pod: placed, not scheduled
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17"}],
        },
    }
    hands.apply(pod)
    try:
        kubelet.run(namespace, pod["metadata"]["name"])
        poll_cluster(gateway=real_portal)
        cluster.refresh_from_db()
        assert device_plugin_count().startswith("Running on 1 of 5 nodes.")
        assert cluster.gpu_operator
        assert "its device plugin runs on 1 of 5 labelled node(s)" in cluster.gpu_operator_detail
    finally:
        real_cluster.kube("delete", "pod", "-n", namespace, "--all", "--grace-period=0", "--force")


def test_2_after_a_hand_edit_the_home_shows_the_enforced_limit_and_an_admin_takes_it_back(
    real_portal: Gateway, real_cluster: RealCluster, client: Client
) -> None:
    """kubectl patch team-a's quota to 20, the portal sets 18: every apply conflicts and the
    cluster keeps 20. The lead's home said "Hard limit 18"; it shows the 20 the cluster
    enforces and that the portal's 18 is not applied; a platform admin takes the field
    back (a forced apply, audited)."""
    quota = ObjectRef("v1", "ResourceQuota", "team-a-gpu-quota", "team-a")
    gpu = "requests.nvidia.com/gpu"
    hands = admin(real_cluster, "kubectl-patch")
    hands.merge_patch(quota, {"spec": {"hard": {gpu: "20"}}})
    platform_admin = User.objects.get(username="admin")
    namespace = Namespace.objects.get(name="team-a")
    hard = {i.resource: i.hard for i in namespace.quota_items.all()}
    set_namespace_quota(
        actor=platform_admin, namespace=namespace, hard={**hard, gpu: "18"}, source="api"
    )
    try:
        report = apply_desired_state(gateway=real_portal)
        assert report.conflicts == ["ResourceQuota team-a/team-a-gpu-quota"], report
        wait_for(
            lambda: (hands.get(quota).get("status") or {}).get("hard", {}).get(gpu) == "20",
            timeout=20,
            what="the quota controller to enforce 20",
        )
        poll_cluster(gateway=real_portal)
        client.force_login(User.objects.get(username="lead-a"))
        home = client.get("/").content.decode()
        assert "the portal's 18 is not applied" in home
        assert "of 20" in home and "of 18" not in home

        take_back_fields(
            actor=platform_admin,
            cluster=Cluster.objects.get(pk=settings_cluster_id()),
            kind="ResourceQuota",
            namespace="team-a",
            name="team-a-gpu-quota",
            source="command",
        )
        assert hands.get(quota)["spec"]["hard"][gpu] == "18"
        audit = AuditEvent.objects.get(event=Event.MANAGED_FIELDS_TAKEN_BACK)
        assert audit.actor_name == "admin"
        assert audit.old["outcome"] == "conflict"
        assert apply_desired_state(gateway=real_portal, full=True).conflicts == []
    finally:
        (manifest,) = [m for m in collect_manifests() if ObjectRef.of(m) == quota]
        real_portal.apply(manifest, force=True)


def test_1_team_infer_runs_a_kueue_job_and_a_cpu_quota_beside_gpu_only_queues_is_warned(
    real_portal: Gateway, real_cluster: RealCluster, kubelet: Kubelet
) -> None:
    """The demo's team-infer quota tracked requests.cpu/memory while cq-infer covers GPUs
    only: the API server refused every pod without them, Kueue every Job with them. The
    demo's quota tracks GPUs and pods; setting CPU on it is warned about."""
    hands = admin(real_cluster)
    hands.apply(job("rc-infer", "team-infer", "online-infer", 1))
    try:
        (pod,) = kubelet.pods_of_job("team-infer", "rc-infer")
        assert pod.spec.node_name.startswith("gpu-h100-")
    finally:
        real_cluster.remove_job("team-infer", "rc-infer")
    namespace = Namespace.objects.get(name="team-infer")
    hard = {i.resource: i.hard for i in namespace.quota_items.all()}
    warnings = set_namespace_quota(
        actor=User.objects.get(username="admin"),
        namespace=namespace,
        hard={**hard, "requests.cpu": "256"},
        source="api",
    )
    assert any("cq-infer does not cover cpu" in w for w in warnings), warnings


def test_9_a_disruption_budget_does_not_hold_a_pending_pod(
    real_portal: Gateway, real_cluster: RealCluster, kubelet: Kubelet
) -> None:
    """The MIG impact said a PodDisruptionBudget would block evicting a pod still Pending;
    the real Eviction API ignores budgets for Pending pods (a dryRun eviction: 201)."""
    hands = admin(real_cluster)
    mig_job = job("rc-pending", "team-dev", "dev-test", 0)
    container = mig_job["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {
        "requests": {"nvidia.com/mig-1g.10gb": "1"},
        "limits": {"nvidia.com/mig-1g.10gb": "1"},
    }
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "rc-pending-pdb", "namespace": "team-dev"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"job-name": "rc-pending"}}},
    }
    hands.apply(budget)
    hands.apply(mig_job)
    try:
        (pod,) = kubelet.pods_of_job("team-dev", "rc-pending")
        assert pod.spec.node_name == "gpu-a100-03"
        wait_for(
            lambda: "disruptionsAllowed" in (hands.get(ObjectRef.of(budget)).get("status") or {}),
            timeout=20,
            what="the disruption controller to count the budget",
        )
        assert hands.get(ObjectRef.of(budget))["status"]["disruptionsAllowed"] == 0
        eviction = kube_client.V1Eviction(
            metadata=kube_client.V1ObjectMeta(name=pod.metadata.name, namespace="team-dev"),
            delete_options=kube_client.V1DeleteOptions(dry_run=["All"]),
        )
        kubelet.api.create_namespaced_pod_eviction(pod.metadata.name, "team-dev", eviction)
        poll_cluster(gateway=real_portal)
        assessed = preview(
            viewer=User.objects.get(username="admin"),
            nodes=["gpu-a100-03"],
            config="all-1g.10gb",
            cluster=Cluster.objects.get(pk=settings_cluster_id()),
        )
        # evicted, as the change needs, and held by no budget
        (evicted,) = [e for e in assessed["evictions"] if e["pod"] == pod.metadata.name]
        assert (evicted["budget"], evicted["budget_allows"]) == ("", None), evicted
        assert not any("will be blocked" in r for r in assessed["reasons"]), assessed["reasons"]
    finally:
        real_cluster.remove_job("team-dev", "rc-pending")
        hands.delete(ObjectRef.of(budget))


def test_3_a_sidecars_limit_range_gpu_is_advised_about_the_sidecar_alone(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    """A pod whose main container asks for 2 GPUs and whose sidecar for none: the API
    server's LimitRanger names the sidecar alone. The portal said the LimitRange gave "the
    pod 3 gpu it did not ask for (it asks for no GPU itself)" and to set nvidia.com/gpu: 0,
    which would take the main container's 2 away."""
    hands = admin(real_cluster)
    hands.apply(scenarios.sidecar_pod("team-a", "rc-sidecar"))
    try:
        scenarios.wait_unschedulable(hands, "team-a", name="rc-sidecar")
        pod = hands.get(ObjectRef("v1", "Pod", "rc-sidecar", "team-a"))
        assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
            scenarios.SIDECAR_ANNOTATION
        )
        poll_cluster(gateway=real_portal)
        _, pods, _ = explained(["team-a"], settings_cluster_id())
        (row,) = [p for p in pods if p.name == "rc-sidecar"]
        assert (row.why.cause, row.why.next_step) == scenarios.SIDECAR_ADVICE, row.why
    finally:
        real_cluster.kube(
            "delete", "pod", "rc-sidecar", "-n", "team-a", "--grace-period=0", "--force"
        )


def test_5_an_estimate_agrees_with_kueues_cause(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    """cq-dev borrows 4 of the cohort's 16 H100 GPUs, team-a runs 8: Kueue keeps team-a's
    5-GPU Job waiting, "1 more needed". The estimate said "now, once Kueue looks at it":
    it counted the cohort's spare quota without what another member borrows."""
    hands = admin(real_cluster)
    jobs = [("team-dev", "rc-dev-4"), ("team-a", "rc-est-8"), ("team-a", "rc-est-5")]
    scenarios.run_history(settings_cluster_id(), "cq-train")
    try:
        hands.apply(job("rc-dev-4", "team-dev", "dev-test", 4))
        wait_reserved(hands, "team-dev", "rc-dev-4")
        hands.apply(job("rc-est-8", "team-a", "team-a-train", 8))
        wait_reserved(hands, "team-a", "rc-est-8")
        hands.apply(job("rc-est-5", "team-a", "team-a-train", 5))
        assert wait_pending(hands, "team-a", "rc-est-5") == scenarios.SHORT_BY_ONE
        poll_cluster(gateway=real_portal)
        workloads, _, _ = explained(["team-a"], settings_cluster_id())
        (row,) = [w for w in workloads if w.name.startswith("job-rc-est-5-")]
        assert "1 more needed" in row.why.cause
        # it starts when team-a's 8-GPU Job ends: in about a typical run (an hour)
        assert row.estimate.summary != "now, once Kueue looks at it", row.estimate
        assert row.estimate.low_s and row.estimate.low_s > 0, row.estimate
    finally:
        for namespace, name in jobs:
            real_cluster.remove_job(namespace, name)


def test_7_kueue_names_one_resource_it_cannot_assign(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    """A Job asking for CPU, which cq-train does not cover, and GPUs: Kueue stops at the
    first resource it cannot assign and says that one alone (in the order of a Go map, so
    either), never the CPU and the GPU shortage together as the demo's Kueue did; when the
    GPUs fit, the CPU alone."""
    hands = admin(real_cluster)
    names = ["rc-fill-8", "rc-fill-7", "rc-cpu-2", "rc-cpu-1"]
    try:
        hands.apply(job("rc-fill-8", "team-a", "team-a-train", 8))
        wait_reserved(hands, "team-a", "rc-fill-8")
        hands.apply(job("rc-fill-7", "team-a", "team-a-train", 7))
        wait_reserved(hands, "team-a", "rc-fill-7")
        hands.apply(scenarios.job("rc-cpu-2", "team-b", "team-b-train", gpus(2, cpu="1")))
        assert wait_pending(hands, "team-b", "rc-cpu-2") in {
            scenarios.CPU_ALONE,
            scenarios.SHORT_BY_ONE,
        }
        hands.apply(scenarios.job("rc-cpu-1", "team-b", "team-b-train", gpus(1, cpu="1")))
        assert wait_pending(hands, "team-b", "rc-cpu-1") == scenarios.CPU_ALONE
    finally:
        for name in names:
            real_cluster.remove_job("team-a" if "fill" in name else "team-b", name)


def test_8_a_zero_mig_request_pins_a_job_where_it_can_never_run(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    """A Job asking for 1 GPU that also lists nvidia.com/mig-3g.40gb: "0": Kueue assigns
    both flavors (the zero request too) and the Job's pods get both flavors' node labels,
    which no node carries with a whole GPU. The portal said it "starts when running work
    finishes"; it can never run there, because of the zero-valued MIG request."""
    hands = admin(real_cluster)
    hands.apply(
        scenarios.job("rc-zero-mig", "team-infer", "online-infer", gpus(1, **{MIG_3G: "0"}))
    )
    try:
        workload = wait_reserved(hands, "team-infer", "rc-zero-mig")
        (assigned,) = workload["status"]["admission"]["podSetAssignments"]
        assert assigned["flavors"] == {GPU: "h100-80gb", MIG_3G: "a100-80gb-3g"}, assigned
        scenarios.wait_unschedulable(hands, "team-infer", job_name="rc-zero-mig")
        poll_cluster(gateway=real_portal)
        _, pods, _ = explained(["team-infer"], settings_cluster_id())
        (row,) = [p for p in pods if p.name.startswith("rc-zero-mig-")]
        assert row.why.cause.startswith(scenarios.ZERO_MIG_CAUSE), row.why
        assert row.why.never and row.estimate.summary == "no estimate", row.estimate
    finally:
        real_cluster.remove_job("team-infer", "rc-zero-mig")


def test_10_what_kueue_charges_below_what_pods_ask_is_told_without_names(
    real_portal: Gateway, real_cluster: RealCluster, client: Client
) -> None:
    """team-a's LimitRange defaults gpu requests to 1: Kueue charges 1 GPU for each of its
    Jobs whose pods ask for 8 (limits alone), the H100 GPUs fill up while cq-train reads 2 of
    12 used, and team-b's admitted 2-GPU Job waits for nodes. Its lead was told only that
    "all 16 gpu in the fleet are in use"; now why, and never whose."""
    hands = admin(real_cluster)
    over = ["rc-over-a", "rc-over-b"]
    try:
        for name in over:
            hands.apply(scenarios.job(name, "team-a", "team-a-train", {"limits": {GPU: "8"}}))
            charged = wait_reserved(hands, "team-a", name)["status"]["admission"]
            assert charged["podSetAssignments"][0]["resourceUsage"] == {GPU: "1"}, charged
        scenarios.wait_bound(hands, "team-a", over)
        hands.apply(job("rc-b-2", "team-b", "team-b-train", 2))
        wait_reserved(hands, "team-b", "rc-b-2")
        scenarios.wait_unschedulable(hands, "team-b", job_name="rc-b-2")
        poll_cluster(gateway=real_portal)
        client.force_login(User.objects.get(username="lead-b"))
        rows = client.get("/api/v1/waiting/").json()
        (entry,) = [r for r in rows if r["kind"] == "Pod" and r["name"].startswith("rc-b-2-")]
        assert entry["cause"].startswith(scenarios.UNDERCHARGED_CAUSE), entry
        assert "rc-over" not in str(rows) and "team-a" not in str(rows), rows
        client.force_login(User.objects.get(username="lead-a"))
        rows = client.get("/api/v1/waiting/").json()
        mine = [r for r in rows if r["kind"] == "Workload" and "rc-over-" in r["name"]]
        assert len(mine) == 2, rows
        assert all(r["cause"].startswith(scenarios.CHARGED_NOTE) for r in mine), mine
    finally:
        for name in over:
            real_cluster.remove_job("team-a", name)
        real_cluster.remove_job("team-b", "rc-b-2")


def test_11_a_preemptor_is_admitted_after_what_fits_now(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    """The what-if of cq-train at 18 GPUs: team-a's 8-GPU Job must preempt team-b's
    best-effort one (withinClusterQueue: LowerPriority), team-dev's 2-GPU Job fits now by
    borrowing. Real Kueue admits team-dev's first and team-a's once its victim is gone; the
    what-if listed them the other way round."""
    hands = admin(real_cluster)
    platform_admin = User.objects.get(username="admin")
    train = ClusterQueue.objects.select_related("cohort").get(name="cq-train")
    saved = (train.preemption_within_cluster_queue, copy.deepcopy(train.resource_groups))
    train.preemption_within_cluster_queue = "LowerPriority"
    save_cluster_queue(actor=platform_admin, cluster_queue=train, source="api")
    apply_desired_state(gateway=real_portal)
    jobs = [
        ("team-b", "rc-victim-4", "team-b-train", 4, "dev-best-effort"),
        ("team-a", "rc-first-8", "team-a-train", 8, "training-critical"),
        ("team-infer", "rc-infer-4", "online-infer", 4, "inference-serving"),
        ("team-a", "rc-high-8", "team-a-train", 8, "training-critical"),
        ("team-dev", "rc-dev-2", "dev-test", 2, "dev-best-effort"),
    ]
    try:
        for namespace, name, queue, count, priority in jobs:
            hands.apply(scenarios.job(name, namespace, queue, gpus(count), priority_class=priority))
            if name in ("rc-high-8", "rc-dev-2"):
                wait_pending(hands, namespace, name)
            else:
                wait_reserved(hands, namespace, name)
        poll_cluster(gateway=real_portal)
        train = ClusterQueue.objects.select_related("cohort").get(name="cq-train")
        raised = with_nominal(train, "h100-80gb", GPU, "18")
        shown = cluster_queue_what_if(platform_admin, raised)
        predicted = [a["workload"].split("/")[1].rsplit("-", 1)[0] for a in shown["admitted"]]
        save_cluster_queue(
            actor=platform_admin,
            cluster_queue=raised,
            source="api",
            promise_more_than_exists=True,
            override_reason="the what-if held against Kueue",
        )
        apply_desired_state(gateway=real_portal)
        order: list[str] = []

        def both() -> bool:
            for namespace, name in (("team-a", "rc-high-8"), ("team-dev", "rc-dev-2")):
                if name not in order and scenarios.reserved(hands, namespace, name):
                    order.append(name)
            if order == ["rc-dev-2"]:  # the victim's pods end as a kubelet would end them
                real_cluster.remove_job("team-b", "rc-victim-4")
            return len(order) == 2

        wait_for(both, timeout=60, what="Kueue to admit both")
        assert predicted == [f"job-{name}" for name in order], (predicted, order)
        assert [p["workload"].split("/")[1].rsplit("-", 1)[0] for p in shown["preempted"]] == [
            "job-rc-victim-4"
        ]
    finally:
        for namespace, name, *_ in jobs:
            real_cluster.remove_job(namespace, name)
        train = ClusterQueue.objects.get(name="cq-train")
        train.preemption_within_cluster_queue, train.resource_groups = saved
        save_cluster_queue(actor=platform_admin, cluster_queue=train, source="api")
        apply_desired_state(gateway=real_portal)


def test_6_kueue_preempts_only_a_workload_it_admitted_before(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    """cq-train (withinClusterQueue: LowerPriority) runs team-a's 1 GPU; its 12-GPU head
    waits while team-infer uses cq-infer's 4; one of team-infer's Jobs goes as team-b's
    best-effort 2-GPU Job arrives. Kueue never marks the newcomer Evicted or Preempted: it
    preempts only what it admitted before a cycle. The demo's Kueue admitted the newcomer and
    preempted it in the same pass, then at every pass
    (``tests/devcluster/test_preemption.py``)."""
    hands = admin(real_cluster)
    platform_admin = User.objects.get(username="admin")
    train = ClusterQueue.objects.get(name="cq-train")
    saved = train.preemption_within_cluster_queue
    train.preemption_within_cluster_queue = "LowerPriority"
    save_cluster_queue(actor=platform_admin, cluster_queue=train, source="api")
    apply_desired_state(gateway=real_portal)
    jobs = [
        ("team-a", "rc-run-1", "team-a-train", 1, "training-critical"),
        ("team-infer", "rc-lend-1", "online-infer", 1, "inference-serving"),
        ("team-infer", "rc-lend-3", "online-infer", 3, "inference-serving"),
        ("team-a", "rc-head-12", "team-a-train", 12, "training-critical"),
    ]
    try:
        for namespace, name, queue, count, priority in jobs:
            hands.apply(scenarios.job(name, namespace, queue, gpus(count), priority_class=priority))
            if name == "rc-head-12":
                wait_pending(hands, namespace, name)
            else:
                wait_reserved(hands, namespace, name)
        real_cluster.remove_job("team-infer", "rc-lend-1")
        newcomer = scenarios.job(
            "rc-new-2", "team-b", "team-b-train", gpus(2), priority_class="dev-best-effort"
        )
        hands.apply(newcomer)
        # Kueue looked at both: one holds the quota, the other waits with Kueue's words
        wait_for(
            lambda: (
                {
                    scenarios.condition(
                        scenarios.workload_of(hands, ns, name), "QuotaReserved"
                    ).get("status")
                    for ns, name in (("team-a", "rc-head-12"), ("team-b", "rc-new-2"))
                }
                == {"True", "False"}
            ),
            timeout=30,
            what="Kueue to admit one of them and keep the other waiting",
        )
        workload = scenarios.workload_of(hands, "team-b", "rc-new-2")
        assert workload is not None
        status = workload["status"]
        evictions = (status.get("schedulingStats") or {}).get("evictions") or []
        if scenarios.condition(workload, "Evicted") or evictions:
            # Kueue may admit the newcomer in a cycle before the head's quota comes back,
            # then preempt it at the next: only what it had admitted, and once.
            assert status.get("admission"), status
            assert sum(int(e.get("count", 0)) for e in evictions) <= 1, status
        else:
            assert not scenarios.condition(workload, "Preempted"), status
    finally:
        for namespace, name, *_ in [*jobs, ("team-b", "rc-new-2")]:
            real_cluster.remove_job(namespace, name)
        train = ClusterQueue.objects.get(name="cq-train")
        train.preemption_within_cluster_queue = saved
        save_cluster_queue(actor=platform_admin, cluster_queue=train, source="api")
        apply_desired_state(gateway=real_portal)
