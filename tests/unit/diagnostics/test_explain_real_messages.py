"""Every scheduler and Kueue message recorded on a real cluster (tests/data, verbatim: a real
kube-apiserver, kube-scheduler and Kueue v0.19.2), through the poller's decoders and the
explainer, with the exact sentences each produces. A last test checks that no recorded
message is left out.

Kueue's PodsReady eviction was not recorded (it takes the PodsReady timeout to happen); its
cases take the recorded admitted Workload and apply the conditions Kueue writes when it
evicts and requeues (Kueue's own integration tests show them: QuotaReserved False "Pending"
and Evicted True "PodsReadyTimeout", both "Exceeded the PodsReady timeout <ns>/<name>",
Requeued False then True "BackoffFinished", requeueState, schedulingStats.evictions)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from cluster.decode import pod_gpu_requests, pod_values, workload_values
from diagnostics.explain import (
    Explanation,
    Waiting,
    explain_admitted,
    explain_create_failure,
    explain_pod,
    explain_workload,
)
from tests.unit.diagnostics.recorded import evicted_by_kueue, k8s, kueue, recorded_fleet

FLEET = recorded_fleet()
CORDONED = recorded_fleet(cordoned=("gpu-a100-03",))  # h2-node-cordon-merge-patch
# The pods the events are about (their requests, from the recorded pods, or the cases'
# descriptions where the pod itself was not recorded).
ASKS = {
    "train-3g": {"nvidia.com/mig-3g.40gb": 1},
    "train-16gpu": {"nvidia.com/gpu": 16},
    "train-no-toleration": {"nvidia.com/gpu": 1},
    "train-h200-selector": {"nvidia.com/gpu": 1},
    "scratch": {"nvidia.com/mig-1g.10gb": 1},
    "rc-no-toleration": {"nvidia.com/gpu": 1},
    "rc-too-big": {"nvidia.com/gpu": 9},
}
DRIFT = (
    "All 32 mig-3g.40gb in the fleet are in use (0 free, the pod needs 1): gpu-a100-03 would "
    "offer 16 more but was changed to all-balanced by kubelet instead of its pool's all-3g.40gb.",
    "Ask for a MIG change that puts gpu-a100-03 back on all-3g.40gb.",
)
TAINT = (
    "2 node(s) with the resources carry taints the pod does not tolerate "
    "(nvidia.com/gpu=present:NoSchedule on gpu-h100-01, gpu-h100-02).",
    "Add the matching toleration to the pod (or submit through a queue whose flavor adds it).",
)
TOO_BIG = "Split the job across pods (one per node) or ask for fewer per pod."
SELECTOR = (
    "No node matches the pod's node selector or affinity.",
    "Check the selector's labels against the Fleet page.",
)
CORDON = (
    "Every node that offers nvidia.com/mig-1g.10gb is cordoned (gpu-a100-03).",
    "It is placed when they are uncordoned: wait for the maintenance or MIG change on them to "
    "finish (the Fleet page shows why they are cordoned).",
)
QUOTA_8GPU = (
    "Queue rc-team-a-queue has no unused quota for nvidia.com/gpu in flavor rc-h100: 4 more "
    "needed.",
    "It is admitted when other workloads finish; ask for more queue quota if this is normal now.",
)
EVICTED_STEP = (
    "Find out why its pods did not start in time (an image that cannot be pulled, a node "
    "selector or toleration no node matches, a resource no node has: kubectl -n rc-team-a get "
    "events); Kueue admits it again when its quota is free."
)


def pod_why(pod: dict[str, Any], fleet: Any = FLEET) -> Explanation:
    """A recorded Pod as the poller decodes it, explained."""
    values = pod_values(pod, pod_gpu_requests(pod))
    return explain_pod(
        namespace=values["namespace"],
        name=values["name"],
        requests=values["gpu_requests"],
        message=values["pending_message"],
        fleet=fleet,
        node_name=values["node_name"],
    )


def event_why(event: dict[str, Any], fleet: Any = FLEET) -> Explanation:
    """A recorded FailedScheduling event (core v1 or events.k8s.io/v1), explained."""
    pod = (event.get("involvedObject") or event.get("regarding") or {})["name"]
    return explain_pod(
        namespace="team-a",
        name=pod,
        requests=ASKS[pod],
        message=event.get("message") or event.get("note", ""),
        fleet=fleet,
    )


def workload_why(workload: dict[str, Any], **extra: Any) -> Explanation:
    """A recorded (or Kueue-evicted) Workload as the poller decodes it, explained."""
    values = workload_values(workload)
    return explain_workload(
        namespace=values["namespace"],
        name=values["name"],
        queue=values["queue_name"],
        reason=values["reason"],
        message=values["message"],
        **extra,
    )


def _evicted_waiting(workload: dict[str, Any], requeue_in_s: int | None) -> Waiting:
    values = workload_values(workload)
    return Waiting(
        waited_s=30,
        evictions=values["evictions"],
        evicted_reason=values["evicted_reason"],
        evicted=values["evicted_at"] is not None,
        requeue_in_s=requeue_in_s,
    )


def _deactivated() -> dict[str, Any]:
    workload = evicted_by_kueue(requeued=True, times=5)
    text = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    for condition in workload["status"]["conditions"]:
        if condition["type"] in ("QuotaReserved", "Evicted", "Requeued"):
            condition.update(message=text)
        if condition["type"] in ("Evicted", "Requeued"):
            condition.update(reason="InactiveWorkloadRequeuingLimitExceeded")
    workload["spec"]["active"] = False
    return workload


def _requeued_then_short() -> dict[str, Any]:
    """Back in line after the eviction, and now the quota is short (Kueue's next word)."""
    workload = evicted_by_kueue(requeued=True, times=2)
    pending = kueue("workload-pending.json")["status"]["conditions"][0]["message"]
    workload["status"]["conditions"][1]["message"] = pending
    return workload


def _silent() -> dict[str, Any]:
    """The recorded pending Workload before Kueue wrote a condition (BestEffortFIFO writes
    none for many workloads it passes over)."""
    workload = copy.deepcopy(kueue("workload-pending.json"))
    workload["status"]["conditions"] = []
    return workload


def _bound_pod_of_admitted() -> Explanation | None:
    pod = kueue("pod-4gpu-bound.json")
    workload = workload_values(kueue("workload-admitted.json"))
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == workload["name"]
    return explain_admitted(
        cluster_queue=workload["cluster_queue"],
        pod=pod["metadata"]["name"],
        pod_why=pod_why(pod),
        pods_ready=workload["pods_ready"],
    )


VISIBILITY = kueue("visibility-clusterqueue-pendingworkloads.json")["items"][0]
PLACED = (
    "The pod is placed on gpu-h100-01 but has not started: its containers are still being "
    "created there (pulling the image, mounting volumes, or waiting for the GPU device plugin)."
)
PLACED_STEP = (
    "Look at the pod's events (kubectl -n rc-team-a describe pod rc-train-4gpu-2mv5v): an image "
    "that cannot be pulled or a volume that cannot be mounted is named there."
)
SILENT_STEP = (
    "Kueue admits it when the workloads ahead of it are admitted or finish and its quota is "
    "free: compare the queue's quota with what is in use on the Queues page."
)

CASES: list[Any] = [
    # The scheduler: every recorded Pod's PodScheduled=False message.
    pytest.param(lambda: pod_why(k8s("e1c-pod-unschedulable-mig-3g")), *DRIFT, id="e1c"),
    pytest.param(
        lambda: pod_why(k8s("e2c-pod-unschedulable-gpu-16")),
        "The pod asks for 16 gpu on one node; the largest node offers 8.",
        TOO_BIG,
        id="e2c",
    ),
    pytest.param(lambda: pod_why(k8s("e3c-pod-unschedulable-untolerated-taint")), *TAINT, id="e3c"),
    pytest.param(lambda: pod_why(k8s("e4c-pod-unschedulable-node-selector")), *SELECTOR, id="e4c"),
    pytest.param(
        lambda: pod_why(k8s("e8c-pod-unschedulable-mig-3g-after-cordon"), CORDONED),
        *DRIFT,
        id="e8c",
    ),
    pytest.param(
        lambda: pod_why(kueue("pod-unschedulable.json")),
        "The pod asks for 9 gpu on one node; the largest node offers 8.",
        TOO_BIG,
        id="kueue-pod-unschedulable",
    ),
    # The scheduler's FailedScheduling events (core v1 and events.k8s.io/v1).
    *[
        pytest.param(
            lambda case=case, i=i, fleet=fleet: event_why(k8s(case)["items"][i], fleet),
            *expected,
            id=f"{case}[{i}]",
        )
        for case, i, fleet, expected in [
            ("e1-events-failedscheduling-mig-3g", 0, FLEET, DRIFT),
            ("e1b-events-k8s-io-v1-failedscheduling-mig-3g", 0, FLEET, DRIFT),
            (
                "e2-events-failedscheduling-gpu-16",
                0,
                FLEET,
                ("The pod asks for 16 gpu on one node; the largest node offers 8.", TOO_BIG),
            ),
            ("e3-events-failedscheduling-untolerated-taint", 0, FLEET, TAINT),
            ("e4-events-failedscheduling-node-selector", 0, FLEET, SELECTOR),
            ("e7-events-failedscheduling-cordoned-node", 0, CORDONED, CORDON),
            ("e8-events-mig-3g-after-cordon", 2, CORDONED, DRIFT),
        ]
    ],
    *[
        pytest.param(
            lambda i=i: event_why(kueue("events-failedscheduling.json")["items"][i]),
            *expected,
            id=f"kueue-events-failedscheduling[{i}]",
        )
        for i, expected in enumerate(
            [TAINT, ("The pod asks for 9 gpu on one node; the largest node offers 8.", TOO_BIG)]
        )
    ],
    # Several resources in one message: every one of them (finding 3's pod: a LimitRange
    # added a whole GPU to a MIG pod).
    pytest.param(
        lambda: explain_pod(
            namespace="team-a",
            name="train-3g",
            requests={"nvidia.com/mig-3g.40gb": 1, "nvidia.com/gpu": 1},
            message="0/3 nodes are available: 3 Insufficient nvidia.com/gpu, 3 Insufficient "
            "nvidia.com/mig-3g.40gb. preemption: 0/3 nodes are available: 3 Preemption is not "
            "helpful for scheduling.",
            fleet=FLEET,
        ),
        "No node offers nvidia.com/gpu and nvidia.com/mig-3g.40gb together: the pod asks for 1 "
        "gpu and 1 mig-3g.40gb on one node, and each node has only some of them.",
        "Ask for one kind only (whole GPUs or one MIG profile); if the pod's spec asks for one "
        "kind, look for a default that adds the other (the namespace's LimitRange).",
        id="two-gpu-resources",
    ),
    # Kueue: the recorded pending Workload (its QuotaReserved=False message), with its place
    # in line from the recorded visibility API answer; the same words from Kueue's event.
    pytest.param(
        lambda: workload_why(
            kueue("workload-pending.json"),
            position=VISIBILITY["positionInClusterQueue"],
            cluster_queue="rc-cq-team-a",
        ),
        QUOTA_8GPU[0] + " It is 1st in line for rc-cq-team-a.",
        QUOTA_8GPU[1],
        id="workload-pending",
    ),
    pytest.param(
        lambda: explain_workload(
            namespace="rc-team-a",
            name="job-rc-train-8gpu-a148b",
            queue="rc-team-a-queue",
            reason="Pending",
            message=next(
                e["message"]
                for e in kueue("events-rc-team-a.json")["items"]
                if e["type"] == "Warning"
            ),
        ),
        *QUOTA_8GPU,
        id="events-rc-team-a[Pending]",
    ),
    # Kueue: admitted ("Quota reserved in ClusterQueue …", "The workload is admitted"), its
    # pod bound but not running (joined through the kueue.x-k8s.io/workload annotation).
    pytest.param(
        _bound_pod_of_admitted,
        "Kueue admitted it into ClusterQueue rc-cq-team-a, but its pod rc-train-4gpu-2mv5v "
        f"does not run: {PLACED}",
        PLACED_STEP,
        id="workload-admitted+pod-4gpu-bound",
    ),
    # Admitted by borrowing, pods not ready ("Not all pods are ready or succeeded") 11
    # minutes on, no pod of it known.
    pytest.param(
        lambda: explain_admitted(
            cluster_queue=workload_values(kueue("workload-borrowing.json"))["cluster_queue"],
            pods_ready=workload_values(kueue("workload-borrowing.json"))["pods_ready"],
            admitted_s=660,
        ),
        "Kueue admitted it into ClusterQueue rc-cq-team-b 11 min ago, and its pods are not all "
        "ready yet.",
        "Look at its pods (kubectl get pods -l kueue.x-k8s.io/podset): Kueue evicts and "
        "requeues the workload if they are not ready within its PodsReady timeout "
        "(waitForPodsReady).",
        id="workload-borrowing",
    ),
    # Kueue wrote nothing (finding 9): after the grace, how long and behind whom.
    pytest.param(
        lambda: workload_why(
            _silent(),
            position=VISIBILITY["positionInClusterQueue"],
            cluster_queue="rc-cq-team-a",
            waiting=Waiting(waited_s=660),
        ),
        "Kueue wrote no reason for it; it has waited 11 min and is first in line in "
        "ClusterQueue rc-cq-team-a.",
        SILENT_STEP,
        id="no-condition-with-place-in-line",
    ),
    pytest.param(
        lambda: workload_why(
            _silent(),
            cluster_queue="rc-cq-team-a",
            waiting=Waiting(
                waited_s=660,
                pending=kueue("clusterqueue-pending.json")["status"]["pendingWorkloads"],
            ),
        ),
        "Kueue wrote no reason for it; it has waited 11 min, the only pending workload in "
        "ClusterQueue rc-cq-team-a.",
        SILENT_STEP,
        id="no-condition-clusterqueue-status",
    ),
    pytest.param(
        lambda: workload_why(_silent(), waiting=Waiting(waited_s=5)),
        "Kueue has not looked at this workload yet.",
        "Wait a few seconds.",
        id="no-condition-just-created",
    ),
    # Kueue's PodsReady timeout (finding 6).
    pytest.param(
        lambda: workload_why(
            evicted_by_kueue(requeued=False, times=2),
            waiting=_evicted_waiting(evicted_by_kueue(requeued=False, times=2), 80),
        ),
        "Kueue evicted it after its pods were not ready within its PodsReady timeout "
        "(waitForPodsReady); it goes back in line in 80 s, when its back-off ends (evicted 2 "
        "times).",
        EVICTED_STEP,
        id="pods-ready-timeout-backing-off",
    ),
    pytest.param(
        lambda: workload_why(
            evicted_by_kueue(requeued=True),
            waiting=_evicted_waiting(evicted_by_kueue(requeued=True), None),
        ),
        "Kueue evicted it after its pods were not ready within its PodsReady timeout "
        "(waitForPodsReady); it is requeued (evicted once).",
        EVICTED_STEP,
        id="pods-ready-timeout-requeued",
    ),
    pytest.param(
        lambda: workload_why(
            _requeued_then_short(), waiting=_evicted_waiting(_requeued_then_short(), None)
        ),
        QUOTA_8GPU[0] + " Kueue evicted it 2 times before: its pods were not ready within its "
        "PodsReady timeout (waitForPodsReady).",
        QUOTA_8GPU[1],
        id="pods-ready-timeout-requeued-then-short",
    ),
    pytest.param(
        lambda: workload_why(_deactivated(), waiting=_evicted_waiting(_deactivated(), None)),
        "Kueue deactivated it after evicting it 5 times: it reached the re-queuing limit "
        "(waitForPodsReady.requeuingStrategy.backoffLimitCount) and is not admitted again.",
        "Find out why its pods do not start (kubectl -n rc-team-a describe workload "
        "job-rc-train-4gpu-b1845 and the pods' events), fix it, then submit the job again.",
        id="pods-ready-timeout-deactivated",
    ),
    # Kueue names several resources or flavors (its flavor assigner joins them with ", ").
    pytest.param(
        lambda: explain_workload(
            namespace="a",
            name="w",
            queue="q",
            reason="Pending",
            message="couldn't assign flavors to pod set main: insufficient unused quota for "
            "nvidia.com/gpu in flavor rc-h100, 4 more needed, insufficient unused quota for cpu "
            "in flavor rc-h100, 2 more needed",
        ),
        "Queue q has no unused quota for nvidia.com/gpu in flavor rc-h100 (4 more needed), nor "
        "for cpu in flavor rc-h100 (2 more needed).",
        QUOTA_8GPU[1],
        id="kueue-two-resources",
    ),
    pytest.param(
        lambda: explain_workload(
            namespace="a",
            name="w",
            queue="q",
            reason="Pending",
            message="couldn't assign flavors to pod set main: insufficient unused quota for cpu "
            "in flavor on-demand, 30 more needed, insufficient unused quota for cpu in flavor "
            "spot, 30 more needed. Pending the preemption of 2 workload(s)",
        ),
        "Queue q has no unused quota for cpu in flavor on-demand (30 more needed), nor for cpu "
        "in flavor spot (30 more needed).",
        "Kueue is preempting 2 workload(s) to make room: it is admitted once they have stopped.",
        id="kueue-two-flavors-preempting",
    ),
    # The API server refusing a Job's pod (the Job controller's FailedCreate event).
    pytest.param(
        lambda: explain_create_failure(
            namespace="team-a",
            kind="Job",
            name="job",
            message="Error creating: " + k8s("f3-create-pod-exceeds-quota-403")["message"],
        ),
        "Job job cannot create its pods: quota gpu-quota allows 2 requests.nvidia.com/gpu in "
        "team-a, 2 are in use and a new pod asks for 1.",
        "Wait for running pods to finish, make the pods smaller, or ask for more quota.",
        id="f3-exceeded-quota",
    ),
    # The same refusal read later: the quota as last polled counts now (more in use, a
    # raised limit), the event's numbers stay in the evidence.
    pytest.param(
        lambda: explain_create_failure(
            namespace="team-a",
            kind="Job",
            name="job",
            message="Error creating: " + k8s("f3-create-pod-exceeds-quota-403")["message"],
            observed={
                "hard": {"requests.nvidia.com/gpu": "4"},
                "used": {"requests.nvidia.com/gpu": "5"},
            },
        ),
        "Job job cannot create its pods: quota gpu-quota allows 4 requests.nvidia.com/gpu in "
        "team-a, 5 are in use and a new pod asks for 1.",
        "Wait for running pods to finish, make the pods smaller, or ask for more quota.",
        id="f3-exceeded-quota-as-last-polled",
    ),
]


@pytest.mark.parametrize(("explain", "cause", "next_step"), CASES)
def test_each_recorded_message_in_exact_words(
    explain: Callable[[], Explanation | None], cause: str, next_step: str
) -> None:
    why = explain()
    assert why is not None
    assert (why.cause, why.next_step) == (cause, next_step)


def recorded_messages() -> set[str]:
    """Every waiting reason the recordings hold: the scheduler's (pods and events), Kueue's
    (Workloads' QuotaReserved=False and its Warning events), refused pod creations."""
    found = set()
    for name in ("pod-unschedulable.json",):
        found |= _pod_messages(kueue(name))
    for case in (
        "e1c-pod-unschedulable-mig-3g",
        "e2c-pod-unschedulable-gpu-16",
        "e3c-pod-unschedulable-untolerated-taint",
        "e4c-pod-unschedulable-node-selector",
        "e8c-pod-unschedulable-mig-3g-after-cordon",
    ):
        found |= _pod_messages(k8s(case))
    for case in (
        "e1-events-failedscheduling-mig-3g",
        "e1b-events-k8s-io-v1-failedscheduling-mig-3g",
        "e2-events-failedscheduling-gpu-16",
        "e3-events-failedscheduling-untolerated-taint",
        "e4-events-failedscheduling-node-selector",
        "e5-events-team-a-all",
        "e6-events-team-a-with-series",
        "e7-events-failedscheduling-cordoned-node",
        "e8-events-mig-3g-after-cordon",
    ):
        found |= {e.get("message") or e.get("note") for e in k8s(case)["items"]}
    for name in ("events-failedscheduling.json", "events-rc-team-a.json"):
        found |= {e["message"] for e in kueue(name)["items"] if e["type"] == "Warning"}
    for name in ("workload-pending.json", "workload-admitted.json", "workload-borrowing.json"):
        found |= {
            c["message"]
            for c in kueue(name)["status"]["conditions"]
            if c["type"] == "QuotaReserved" and c["status"] == "False"
        }
    found.add("Error creating: " + k8s("f3-create-pod-exceeds-quota-403")["message"])
    return found


def _pod_messages(pod: dict[str, Any]) -> set[str]:
    return {
        c["message"]
        for c in pod["status"].get("conditions") or []
        if c["type"] == "PodScheduled" and c["status"] == "False"
    }


def test_no_recorded_message_is_left_out() -> None:
    explained = set()
    for case in CASES:
        why = case.values[0]()
        explained |= set(why.evidence)
    missing = recorded_messages() - explained
    assert not missing, missing
