"""Scenarios the demo cluster plays, played by the real control plane: the seed's MIG incident
explained from the real scheduler's words, Kueue's borrowing, places in line and (with Kueue
started again with fair sharing on) weights and shares as the poll reads them, and the quota
what-if held against what real Kueue then admits and preempts."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from cluster.models import ObservedEvent, ObservedPod, ObservedWorkload
from cluster.scope import settings_cluster_id
from diagnostics.selectors import explain_waiting
from kube import Gateway, ObjectRef
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from queues.models import ClusterQueue, Cohort, LocalQueue
from queues.selectors import cluster_queue_what_if, with_nominal
from queues.services import save_cluster_queue, save_cohort, save_local_queue
from tenants.models import Namespace
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.player import Kubelet
from tests.realcluster.test_loop import hands, job
from tests.support import EVERY_NAME, wait_for

need_kit()
pytestmark = pytest.mark.django_db

FILL = "rc-fill"  # a namespace of the platform team's own, outside the portal's teams
MIG_3G = "nvidia.com/mig-3g.40gb"


def pod(name: str, namespace: str, resources: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/train:1",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
            **spec,
        },
    }


def scheduler_said(admin: Gateway, namespace: str, name: str) -> str:
    """The real scheduler's last FailedScheduling event for the pod ("" before it)."""
    events = [
        e
        for e in admin.list(
            "v1",
            "Event",
            namespace=namespace,
            field_selector=f"reason=FailedScheduling,involvedObject.name={name}",
        )
    ]
    return events[-1]["message"] if events else ""


@pytest.fixture
def fleet_busy(real_portal: Gateway, real_cluster: RealCluster) -> Iterator[Gateway]:
    """Every 3g.40gb slice of gpu-a100-01 and -02 taken by the platform team's own pods
    (bound by the real scheduler): the pool's nodes are full, as in the seed's incident."""
    admin = hands(real_cluster, "kubectl-create")
    admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FILL}})
    try:
        for n in (1, 2):
            admin.apply(pod(f"fill-{n}", FILL, {MIG_3G: "16"}))
        wait_for(
            lambda: all(
                admin.get(ObjectRef("v1", "Pod", f"fill-{n}", FILL))["spec"].get("nodeName")
                for n in (1, 2)
            ),
            timeout=30,
            what="the fill pods bound",
        )
        yield admin
    finally:
        real_cluster.kube(
            "delete",
            "pods",
            "--all",
            "-n",
            FILL,
            "--grace-period=0",
            "--force",
            "--ignore-not-found",
        )
        real_cluster.kube(
            "delete",
            "pods",
            "--all",
            "-n",
            "team-a",
            "--grace-period=0",
            "--force",
            "--ignore-not-found",
        )


def explained(name: str) -> Any:
    """The portal's "why is it waiting" of a team-a pod, as the last poll stored it."""
    _, pods, _ = explain_waiting(["team-a"], cluster_id=settings_cluster_id(), names=EVERY_NAME)
    (why,) = [p.why for p in pods if p.name == name]
    return why


def test_the_seed_incident_is_explained_from_the_real_schedulers_event(
    real_portal: Gateway, fleet_busy: Gateway
) -> None:
    """team-a's pod asks one 3g.40gb slice; the A100 pool's other nodes are full and
    gpu-a100-03 was left on the balanced test layout (its MIG Manager state failed): the real
    scheduler says what the seed's event says, and the portal names the node, its layout
    against its pool's, and the fix, a MIG change back to all-3g.40gb. The pod as the demo
    writes it (no toleration, no word of whole GPUs) meets team-a's LimitRange first."""
    admin = fleet_busy
    # As the seed's pod: tolerating the GPU taint, and no whole GPU from the LimitRange.
    seed = pod("train-3g", "team-a", {MIG_3G: "1", "nvidia.com/gpu": "0"})
    seed["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    # (the kit wrote the node's labels as the field manager "kubelet": the portal names it)
    admin.apply(seed)
    admin.apply(pod("train-3g-demo", "team-a", {MIG_3G: "1"}))
    said = {
        name: wait_for(
            lambda name=name: scheduler_said(admin, "team-a", name),
            timeout=30,
            what=f"the scheduler's FailedScheduling event for {name}",
        )
        for name in ("train-3g", "train-3g-demo")
    }
    assert said["train-3g"].startswith(
        "0/5 nodes are available: 5 Insufficient nvidia.com/mig-3g.40gb."
    ), said
    assert said["train-3g-demo"].startswith(
        "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient "
        "nvidia.com/gpu, 3 Insufficient nvidia.com/mig-3g.40gb."
    ), said
    assert poll_cluster(gateway=real_portal).ok
    for name, words in said.items():
        observed = ObservedPod.objects.on_every_cluster().get(namespace="team-a", name=name)
        assert (observed.pending_reason, observed.pending_message) == ("Unschedulable", words)

    why = explained("train-3g")
    assert why.cause.startswith(
        "All 32 mig-3g.40gb in the fleet are in use (0 free, the pod needs 1): gpu-a100-03 would "
        "offer 16 more but was changed to all-balanced by kubelet instead of its pool's "
        "all-3g.40gb (drift since "
    ), why.cause
    assert why.topic == "mig-mismatch"
    assert why.next_step == "Ask for a MIG change that puts gpu-a100-03 back on all-3g.40gb."
    assert why.action is not None and why.action["label"] == "Ask for a MIG change"
    assert "gpu-a100-03" in why.action["url"] and "all-3g.40gb" in why.action["url"]
    assert why.evidence == [said["train-3g"]]

    demo_shaped = explained("train-3g-demo")
    assert demo_shaped.cause.startswith(
        "The LimitRange of team-a gave the pod 1 gpu it did not ask for"
    ), demo_shaped.cause
    assert demo_shaped.action is None


# ----------------------------------------------------------------- Kueue: borrowing, what-if

GPU = "nvidia.com/gpu"
H100 = "h100-80gb"


def submit(admin: Gateway, name: str, namespace: str, queue: str, gpus: int) -> None:
    """A Job as the team submits it (created suspended), a second after the last one: Kueue
    orders a queue by creation time, in whole seconds."""
    admin.apply(job(name, namespace, queue, gpus))
    time.sleep(1.1)


def workloads(admin: Gateway) -> dict[str, dict[str, Any]]:
    """Kueue's Workloads of the test's Jobs (``rc-…``), by Job name."""
    found = {}
    for namespace in ("team-a", "team-b", "team-infer"):
        for w in admin.list("kueue.x-k8s.io/v1beta2", "Workload", namespace=namespace):
            owner = (w["metadata"].get("ownerReferences") or [{}])[0].get("name", "")
            if owner.startswith("rc-"):
                found[owner] = w
    return found


def condition(workload: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (workload.get("status") or {}).get("conditions") or []:
        if c["type"] == kind and c["status"] == "True":
            return dict(c)
    return {}


def key(workload: dict[str, Any]) -> str:
    return f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"


def settled(admin: Gateway, admitted: set[str], waiting: set[str]) -> dict[str, dict[str, Any]]:
    """The test's Workloads once Kueue admitted exactly ``admitted`` and looked at (and
    left waiting) ``waiting``."""

    def look() -> dict[str, dict[str, Any]] | None:
        found = workloads(admin)
        if set(found) != admitted | waiting:
            return None
        if {n for n, w in found.items() if condition(w, "Admitted")} != admitted:
            return None
        if not all((found[n].get("status") or {}).get("conditions") for n in waiting):
            return None
        return found

    return wait_for(look, timeout=40, what=f"Kueue to admit {sorted(admitted)}")


def save_queue(name: str, quota: str, **policy: str) -> None:
    """A ClusterQueue's H100 nominal quota (and preemption settings) changed through the
    portal's service, as a platform admin."""
    cq = ClusterQueue.objects.get(name=name)
    cq.set_nominal_quota(H100, GPU, quota)
    for field, value in policy.items():
        setattr(cq, field, value)
    save_cluster_queue(actor=User.objects.get(username="admin"), cluster_queue=cq, source="api")


def apply_and_poll(gateway: Gateway) -> None:
    report = apply_desired_state(gateway=gateway, full=True)
    assert not report.failed and not report.conflicts, report
    assert poll_cluster(gateway=gateway).ok


@pytest.fixture
def jobs(real_portal: Gateway, real_cluster: RealCluster, kubelet: Kubelet) -> Iterator[Gateway]:
    """The administrator's hands to submit the test's Jobs (``rc-…``), all removed after."""
    admin = hands(real_cluster, "kubectl-create")
    try:
        yield admin
    finally:
        for name in workloads(admin):
            for namespace in ("team-a", "team-b", "team-infer"):
                real_cluster.remove_job(namespace, name)
        for node in ("gpu-h100-01", "gpu-h100-02"):
            kubelet.end_deleted(node)


def queue_rows(client: Client) -> dict[str, dict[str, Any]]:
    """The Queues page's H100 row of each ClusterQueue, and the queue's counts, as shown."""
    client.force_login(User.objects.get(username="admin"))
    (section,) = client.get("/queues/").context["clusters"]
    out = {}
    for _, entries in section["sections"]:
        for entry in entries:
            (row,) = [r for r in entry["rows"] if (r["flavor"], r["resource"]) == (H100, GPU)]
            out[entry["cq"].name] = {
                **row,
                "pending": entry["pending"],
                "admitted": entry["admitted"],
                "waiting": [w.name for w in entry["waiting"]],
            }
    return out


def kueue_usage(admin: Gateway, name: str) -> dict[str, Any]:
    """Kueue's own status of a ClusterQueue: its H100 usage and its workload counts."""
    status = admin.get(ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", name))["status"]
    (used,) = [
        r
        for f in status["flavorsUsage"]
        if f["name"] == H100
        for r in f["resources"]
        if r["name"] == GPU
    ]
    return {
        "used": used["total"],
        "borrowed": used.get("borrowed", "0"),
        "pending": status.get("pendingWorkloads"),
        "admitted": status.get("admittedWorkloads"),
    }


def test_borrowing_lending_and_places_in_line_read_as_kueue_reports_them(
    jobs: Gateway, real_portal: Gateway, real_cluster: RealCluster, client: Client
) -> None:
    """cq-train (12 H100 GPUs) runs two 8-GPU Jobs: 4 borrowed from its cohort, cq-infer's
    unused 4 lent; three more wait. The Queues page reads what Kueue's ClusterQueue status
    says, and each waiting workload's place is the visibility API's."""
    admin = jobs
    for name in ("rc-run-1", "rc-run-2"):
        submit(admin, name, "team-a", "team-a-train", 8)
    for name, namespace in (
        ("rc-wait-1", "team-b"),
        ("rc-wait-2", "team-a"),
        ("rc-wait-3", "team-b"),
    ):
        submit(admin, name, namespace, f"{namespace}-train", 8)
    settled(admin, {"rc-run-1", "rc-run-2"}, {"rc-wait-1", "rc-wait-2", "rc-wait-3"})
    wait_for(
        lambda: kueue_usage(admin, "cq-train")["pending"] == 3,
        timeout=20,
        what="cq-train's status to count the waiting workloads",
    )
    assert poll_cluster(gateway=real_portal).ok
    real = {name: kueue_usage(admin, name) for name in ("cq-train", "cq-infer", "cq-dev")}
    assert (real["cq-train"]["used"], real["cq-train"]["borrowed"]) == ("16", "4")
    shown = queue_rows(client)
    for name, kueue in real.items():
        assert {k: shown[name][k] for k in kueue} == kueue, (name, shown[name])
    # What each lends is not in Kueue's status: its unused nominal quota. cq-infer lends
    # the 4 cq-train borrows; cq-dev owns no H100 GPU.
    assert (shown["cq-infer"]["lent"], shown["cq-dev"]["lent"]) == (4, 0)
    # Places in line: the visibility API's, on the observed rows and the page.
    raw = real_cluster.kube(
        "get",
        "--raw",
        "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq-train/pendingworkloads",
    )
    visible = {
        item["metadata"]["name"]: (
            item["positionInClusterQueue"],
            item["positionInLocalQueue"],
        )
        for item in json.loads(raw)["items"]
    }
    found = workloads(admin)
    expected = {
        found[n]["metadata"]["name"]: p
        for n, p in zip(
            ("rc-wait-1", "rc-wait-2", "rc-wait-3"), ((0, 0), (1, 0), (2, 1)), strict=True
        )
    }
    assert visible == expected
    observed = {
        w.name: (w.position, w.position_in_local_queue)
        for w in ObservedWorkload.objects.on_every_cluster().filter(name__in=visible)
    }
    assert observed == visible
    assert shown["cq-train"]["waiting"] == sorted(visible, key=lambda n: visible[n][0])


def predicted(queue: str, quota: str) -> dict[str, Any]:
    """The quota what-if of one ClusterQueue's H100 quota, as a platform admin reads it."""
    cq = ClusterQueue.objects.get(name=queue)
    return cluster_queue_what_if(
        User.objects.get(username="admin"), with_nominal(cq, H100, GPU, quota)
    )


def test_the_what_if_of_a_raise_admits_what_real_kueue_admits(
    jobs: Gateway, real_portal: Gateway
) -> None:
    """cq-train cut to 4 H100 GPUs: one 8-GPU Job runs (borrowing cq-infer's 4), two wait.
    The what-if of raising it back to 12 admits the first in line; real Kueue does the
    same."""
    admin = jobs
    save_queue("cq-train", "4")
    apply_and_poll(real_portal)
    submit(admin, "rc-run", "team-a", "team-a-train", 8)
    submit(admin, "rc-first", "team-b", "team-b-train", 8)
    submit(admin, "rc-second", "team-a", "team-a-train", 8)
    before = settled(admin, {"rc-run"}, {"rc-first", "rc-second"})
    assert poll_cluster(gateway=real_portal).ok
    what_if = predicted("cq-train", "12")
    assert [(a["workload"], a["preempts"]) for a in what_if["admitted"]] == [
        (key(before["rc-first"]), [])
    ], what_if
    assert what_if["preempted"] == []
    assert [w["workload"] for w in what_if["waiting"]] == [key(before["rc-second"])]

    save_queue("cq-train", "12")
    apply_and_poll(real_portal)
    after = settled(admin, {"rc-run", "rc-first"}, {"rc-second"})
    newly = [key(w) for n, w in after.items() if condition(w, "Admitted") and n != "rc-run"]
    assert [a["workload"] for a in what_if["admitted"]] == newly
    assert not any(condition(w, "Preempted") for w in after.values())


def test_the_what_if_of_a_raise_preempts_what_real_kueue_preempts(
    jobs: Gateway, real_portal: Gateway, kubelet: Kubelet
) -> None:
    """cq-train cut to 8 H100 GPUs runs an 8-GPU and then a 4-GPU Job (borrowing cq-infer's
    4); cq-infer, which may reclaim its quota from any borrower, has an 8-GPU Job waiting.
    The what-if of raising cq-infer to 8 admits it by preempting the 4-GPU Job (the
    borrower's newest); real Kueue preempts the same one and admits it."""
    admin = jobs
    save_queue("cq-train", "8")
    save_queue("cq-infer", "4", preemption_reclaim_within_cohort="Any")
    apply_and_poll(real_portal)
    submit(admin, "rc-big", "team-a", "team-a-train", 8)
    settled(admin, {"rc-big"}, set())
    submit(admin, "rc-small", "team-a", "team-a-train", 4)
    settled(admin, {"rc-big", "rc-small"}, set())
    submit(admin, "rc-infer", "team-infer", "online-infer", 8)
    before = settled(admin, {"rc-big", "rc-small"}, {"rc-infer"})
    assert poll_cluster(gateway=real_portal).ok
    what_if = predicted("cq-infer", "8")
    assert [(a["workload"], a["preempts"]) for a in what_if["admitted"]] == [
        (key(before["rc-infer"]), [key(before["rc-small"])])
    ], what_if
    assert [(p["workload"], p["by"], p["reason"]) for p in what_if["preempted"]] == [
        (key(before["rc-small"]), key(before["rc-infer"]), "InCohortReclamation")
    ]

    save_queue("cq-infer", "8")
    apply_and_poll(real_portal)

    def preempted_and_admitted() -> dict[str, dict[str, Any]] | None:
        for node in ("gpu-h100-01", "gpu-h100-02"):
            kubelet.end_deleted(node)  # the preempted Job's pods end
        found = workloads(admin)
        return found if condition(found["rc-infer"], "Admitted") else None

    after = wait_for(preempted_and_admitted, timeout=60, what="Kueue to admit rc-infer")
    real_preempted = {
        key(w): condition(w, "Preempted").get("reason")
        for w in after.values()
        if condition(w, "Preempted")
    }
    assert real_preempted == {key(before["rc-small"]): "InCohortReclamation"}
    assert condition(after["rc-big"], "Admitted")
    kueue_events_on_the_workload_page(admin, real_portal, after)


def record_events(
    admin: Gateway, victim: str, preemptor: str, after: dict[str, dict[str, Any]]
) -> None:
    """With ``QM_RECORD_EVENTS=<file>``, every Event about a Workload and the Workloads, as
    the API serves them (tests/data/kueue-samples/events-workload-story.json was made so)."""
    target = os.environ.get("QM_RECORD_EVENTS")
    if not target:
        return
    events = admin.list("v1", "Event", field_selector="involvedObject.kind=Workload")
    body = {"victim": victim, "preemptor": preemptor, "items": events}
    Path(target).write_text(json.dumps({**body, "workloads": list(after.values())}, indent=1))


def kueue_events_on_the_workload_page(
    admin: Gateway, real_portal: Gateway, after: dict[str, dict[str, Any]]
) -> None:
    """The poll keeps real Kueue's events about the preempted workload and its preemptor;
    the API tells them in words, with the preemptor named to who may see it (a platform
    admin) and said as another team's to team-a's lead."""
    victim, preemptor = after["rc-small"]["metadata"], after["rc-infer"]["metadata"]
    real = [
        e
        for e in admin.list("v1", "Event", namespace="team-a")
        if (e.get("involvedObject") or {}).get("name") == victim["name"]
    ]
    record_events(admin, victim["name"], preemptor["name"], after)
    assert {"QuotaReserved", "Admitted", "Preempted", "EvictedDueToPreempted"} <= {
        e["reason"] for e in real
    }, real
    assert poll_cluster(gateway=real_portal).ok
    kept = ObservedEvent.objects.on(settings_cluster_id()).filter(workload_name=victim["name"])
    assert {e.reason for e in kept} >= {"Preempted", "EvictedDueToPreempted"}
    assert {e.preemptor for e in kept if e.reason == "Preempted"} == {
        f"team-infer/{preemptor['name']}"
    }
    path = f"/api/v1/workloads/team-a/{victim['name']}/"
    for username, said in (
        ("admin", f"(Workload team-infer/{preemptor['name']})"),
        ("lead-a", "(another team's workload)"),
    ):
        client = Client()
        client.force_login(User.objects.get(username=username))
        body = client.get(path).json()
        preempted = [e for e in body["events"] if e["reason"] == "Preempted"]
        assert preempted and said in preempted[0]["message"], body["events"]
        assert "Evicted: it was preempted for other work" in [e["title"] for e in body["story"]]
        if username == "lead-a":
            assert preemptor["name"] not in json.dumps(body)


@pytest.fixture
def fair_sharing(real_cluster: RealCluster) -> Iterator[None]:
    """Kueue started again with fair sharing on for the test, and off after it."""
    real_cluster.restart_kueue(fair_sharing=True)
    try:
        yield
    finally:
        real_cluster.restart_kueue(fair_sharing=False)


def test_fair_sharing_weights_and_shares_read_as_kueue_reports_them(
    fair_sharing: None, jobs: Gateway, real_portal: Gateway, client: Client
) -> None:
    """With fair sharing on, cq-train (weight 80) borrows 4 H100 GPUs for two 8-GPU Jobs:
    Kueue reports each queue's and cohort's weightedShare, and the Queues page shows the
    weights and shares Kueue reports."""
    admin = jobs
    for name in ("rc-fair-1", "rc-fair-2"):
        submit(admin, name, "team-a", "team-a-train", 8)
    settled(admin, {"rc-fair-1", "rc-fair-2"}, set())

    def reported(kind: str, name: str) -> dict[str, Any]:
        return admin.get(ObjectRef("kueue.x-k8s.io/v1beta2", kind, name))

    wait_for(
        lambda: (
            (reported("ClusterQueue", "cq-train").get("status") or {})
            .get("fairSharing", {})
            .get("weightedShare")
        ),
        timeout=20,
        what="Kueue to report cq-train's share",
    )
    assert poll_cluster(gateway=real_portal).ok
    client.force_login(User.objects.get(username="admin"))
    page = client.get("/queues/").context
    assert page["fair_sharing"] is True
    (section,) = page["clusters"]
    shown_queues = {e["cq"].name: e["share"] for _, entries in section["sections"] for e in entries}
    shown_cohorts = {node.name: node.share for node, _ in section["sections"]}
    real_queues = {
        name: reported("ClusterQueue", name) for name in ("cq-train", "cq-infer", "cq-dev")
    }
    for name, cq in real_queues.items():
        share = shown_queues[name]
        assert (share.weight, share.value) == (
            str(cq["spec"]["fairSharing"]["weight"]),
            cq["status"]["fairSharing"]["weightedShare"],
        ), name
    assert real_queues["cq-train"]["status"]["fairSharing"]["weightedShare"] > 0
    assert real_queues["cq-infer"]["status"]["fairSharing"]["weightedShare"] == 0
    for name, share in shown_cohorts.items():
        status = reported("Cohort", name).get("status") or {}
        assert share.value == (status.get("fairSharing") or {}).get("weightedShare"), name


def research_cohort() -> None:
    """A second department in the demo's tree: cohort ``research`` beside ``ai-platform``
    under ``gpu-fleet``, its ClusterQueue ``cq-research`` with no H100 GPU of its own and a
    LocalQueue of team-b; ``ai-platform`` (cq-train cut to 8) lends at most 4 H100 GPUs up
    the tree."""
    admin = User.objects.get(username="admin")
    platform = Cohort.objects.get(name="ai-platform")
    platform.resource_groups = [group(nominalQuota="0", lendingLimit="4")]
    save_cohort(actor=admin, cohort=platform, source="api")
    research = Cohort(cluster=platform.cluster, name="research", parent=platform.parent)
    save_cohort(actor=admin, cohort=research, source="api")
    cq = ClusterQueue(
        cluster=platform.cluster,
        name="cq-research",
        cohort=research,
        resource_groups=[group(nominalQuota="0")],
    )
    save_cluster_queue(actor=admin, cluster_queue=cq, source="api")
    team_b = Namespace.objects.on(platform.cluster).get(name="team-b")
    lq = LocalQueue(name="team-b-research", namespace=team_b, cluster_queue=cq)
    save_local_queue(actor=admin, local_queue=lq, source="api")
    save_queue("cq-train", "8")


def group(**quota: str) -> dict[str, Any]:
    resources = [{"name": GPU, **quota}]
    return {"coveredResources": [GPU], "flavors": [{"name": H100, "resources": resources}]}


def test_the_what_if_through_a_cohort_tree_admits_what_real_kueue_admits(
    jobs: Gateway, real_portal: Gateway, real_cluster: RealCluster
) -> None:
    """cq-research (no H100 GPU of its own) borrows through the root what ai-platform lends
    up: 4 GPUs, its lending limit. One 4-GPU Job runs, two wait. The what-if of giving
    cq-research 4 GPUs of its own admits the second and leaves the third waiting (the
    lending limit holds); real Kueue does the same. A what-if of each cohort on its own
    would have admitted nothing: cq-research's cohort alone lends it nothing more."""
    admin = jobs
    research_cohort()
    apply_and_poll(real_portal)
    try:
        for name in ("rc-r1", "rc-r2", "rc-r3"):
            submit(admin, name, "team-b", "team-b-research", 4)
        before = settled(admin, {"rc-r1"}, {"rc-r2", "rc-r3"})
        assert poll_cluster(gateway=real_portal).ok
        what_if = predicted("cq-research", "4")
        assert [(a["workload"], a["borrows"]) for a in what_if["admitted"]] == [
            (key(before["rc-r2"]), True)
        ], what_if
        assert [w["workload"] for w in what_if["waiting"]] == [key(before["rc-r3"])]
        assert what_if["preempted"] == []

        save_queue("cq-research", "4")
        apply_and_poll(real_portal)
        after = settled(admin, {"rc-r1", "rc-r2"}, {"rc-r3"})
        newly = [key(w) for n, w in after.items() if condition(w, "Admitted") and n != "rc-r1"]
        assert [a["workload"] for a in what_if["admitted"]] == newly
    finally:
        for kind, name in (
            ("localqueue", "team-b-research"),
            ("clusterqueue", "cq-research"),
            ("cohort", "research"),
        ):
            namespace = ["-n", "team-b"] if kind == "localqueue" else []
            real_cluster.kube(
                "delete", kind, name, *namespace, "--ignore-not-found", "--wait=false"
            )
