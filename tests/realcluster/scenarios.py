"""The scenarios of the real control plane's findings, written once for both clusters: each
builds what a team submits and waits for what Kubernetes or Kueue does with it, through any
gateway (the real cluster's administrator, or the demo cluster). The real tier
(``test_findings.py``) and the demo's (``tests/integration/test_real_findings.py``) hold the
portal to the same answers."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.utils import timezone

from kube import Gateway
from tests.support import wait_for
from usage.models import WorkloadRecord

WORKLOADS = ("kueue.x-k8s.io/v1beta2", "Workload")
GPU = "nvidia.com/gpu"
MIG_3G = "nvidia.com/mig-3g.40gb"
# What the API server's LimitRanger writes on a pod of team-a whose sidecar sets no GPU
# (read from a real kube-apiserver v1.36.2: only the container it defaulted is named).
SIDECAR_ANNOTATION = (
    "LimitRanger plugin set: nvidia.com/gpu request for container sidecar; "
    "nvidia.com/gpu limit for container sidecar"
)


def job(
    name: str,
    namespace: str,
    queue: str,
    resources: dict[str, dict[str, str]],
    *,
    priority_class: str = "",
) -> dict[str, Any]:
    """A Job as a team submits it to Kueue (created suspended; Kueue unsuspends it), its one
    container with ``resources`` as written (``{"limits": {...}}`` alone, say)."""
    template: dict[str, Any] = {
        "restartPolicy": "Never",
        "tolerations": [{"key": GPU, "operator": "Exists"}],
        "containers": [
            {
                "name": "main",
                "image": "registry.example/train:1",
                "resources": copy.deepcopy(resources),
            }
        ],
    }
    if priority_class:
        template["priorityClassName"] = priority_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": queue},
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "suspend": True,
            "template": {"spec": template},
        },
    }


def gpus(count: int, **more: str) -> dict[str, dict[str, str]]:
    """Requests and limits of ``count`` whole GPUs (and ``more``, as written)."""
    wanted = {GPU: str(count), **more}
    return {"requests": dict(wanted), "limits": dict(wanted)}


def sidecar_pod(namespace: str, name: str) -> dict[str, Any]:
    """Finding 3: a pod whose main container asks for 2 whole GPUs and whose sidecar asks for
    none (the namespace's LimitRange gives it one); no toleration of the H100 nodes' taint,
    so it waits."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/train:1",
                    "resources": {"requests": {GPU: "2"}, "limits": {GPU: "2"}},
                },
                {"name": "sidecar", "image": "registry.example/log-shipper:1"},
            ],
        },
    }


def workload_of(gateway: Gateway, namespace: str, job_name: str) -> dict[str, Any] | None:
    for workload in gateway.list(*WORKLOADS, namespace=namespace):
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o.get("name") == job_name for o in owners):
            return workload
    return None


def condition(workload: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for found in ((workload or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return {}


def reserved(gateway: Gateway, namespace: str, job_name: str) -> bool:
    found = condition(workload_of(gateway, namespace, job_name), "QuotaReserved")
    return found.get("status") == "True"


def wait_reserved(gateway: Gateway, namespace: str, job_name: str) -> dict[str, Any]:
    wait_for(
        lambda: reserved(gateway, namespace, job_name),
        timeout=30,
        what=f"Kueue to admit {namespace}/{job_name}",
    )
    found = workload_of(gateway, namespace, job_name)
    assert found is not None
    return found


def wait_pending(gateway: Gateway, namespace: str, job_name: str) -> str:
    """Kueue's message for a workload it looked at and keeps waiting."""

    def message() -> str:
        found = condition(workload_of(gateway, namespace, job_name), "QuotaReserved")
        return str(found.get("message") or "") if found.get("status") == "False" else ""

    return str(wait_for(message, timeout=30, what=f"Kueue to look at {namespace}/{job_name}"))


def wait_unschedulable(
    gateway: Gateway, namespace: str, *, name: str = "", job_name: str = ""
) -> str:
    """The scheduler's message for a pod (by name, or the Job's one pod) it could not place."""

    def message() -> str:
        selector = {"label_selector": f"job-name={job_name}"} if job_name else {}
        for pod in gateway.list("v1", "Pod", namespace=namespace, **selector):
            if name and pod["metadata"]["name"] != name:
                continue
            for found in (pod.get("status") or {}).get("conditions") or []:
                if found.get("type") == "PodScheduled" and found.get("reason") == "Unschedulable":
                    return str(found.get("message") or "")
        return ""

    return str(wait_for(message, timeout=30, what=f"the scheduler to try {name or job_name}"))


def wait_bound(gateway: Gateway, namespace: str, job_names: Iterable[str]) -> None:
    def bound() -> bool:
        for job_name in job_names:
            pods = gateway.list(
                "v1", "Pod", namespace=namespace, label_selector=f"job-name={job_name}"
            )
            if not pods or not all((p.get("spec") or {}).get("nodeName") for p in pods):
                return False
        return True

    wait_for(bound, timeout=30, what="the scheduler to bind the Jobs' pods")


# What the portal says of each, on both clusters.
SIDECAR_ADVICE = (
    "The LimitRange of team-a gave container sidecar 1 gpu it did not ask for (the pod asks "
    "for 2 gpu itself, 3 gpu in all), and no node has that free.",
    "Set nvidia.com/gpu: 0 in the limits of container sidecar, or ask a platform admin to take "
    "the default out of team-a's LimitRange (a max alone becomes the default too).",
)
SHORT_BY_ONE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
    "flavor h100-80gb, 1 more needed"
)
CPU_ALONE = "couldn't assign flavors to pod set main: resource cpu unavailable in ClusterQueue"
ZERO_MIG_CAUSE = "Kueue assigned flavor a100-80gb-3g for its nvidia.com/mig-3g.40gb: 0 request"
UNDERCHARGED_CAUSE = (
    "Kueue admitted it, but 2 admitted workloads are charged 2 gpu by Kueue while their pods "
    "ask for 16: the queues count 14 fewer gpu in use than the nodes hold."
)
CHARGED_NOTE = "Kueue charged it 1 gpu while its pods ask for 8"


def run_history(cluster_id: int, cluster_queue: str, *, runs: int = 6, hours: float = 1) -> None:
    """``runs`` finished runs of ``hours`` each in ``cluster_queue``, ended in the last days,
    for the estimates to learn run times from (the demo's data has none)."""
    now = timezone.now()
    for n in range(runs):
        finished = now - dt.timedelta(hours=2 * n + 1)
        admitted = finished - dt.timedelta(hours=hours)
        WorkloadRecord.objects.create(
            cluster_id=cluster_id,
            namespace="team-a",
            name=f"history-{n}",
            cluster_queue=cluster_queue,
            created_at=admitted,
            admitted_at=admitted,
            finished_at=finished,
        )


# A Job of one pod whose pod Succeeded, as kube-controller-manager v1.36.2 and Kueue v0.19.2
# write it (read on the real control plane by ``test_finished.py``): the Job complete, its
# Workload Finished with the Job's words, its admission kept and its quota given back.
COMPLETIONS_REACHED = "Reached expected number of succeeded pods"
JOB_COMPLETE = {
    "conditions": [
        ("Suspended", "False", "JobResumed", "Job resumed"),
        ("SuccessCriteriaMet", "True", "CompletionsReached", COMPLETIONS_REACHED),
        ("Complete", "True", "CompletionsReached", COMPLETIONS_REACHED),
    ],
    "succeeded": 1,
    "active": None,  # the key is gone
    "ready": 0,
    "terminating": 0,
    "uncountedTerminatedPods": {},
    "completionTime": "between the SuccessCriteriaMet and the Complete conditions' times",
}
WORKLOAD_FINISHED = {
    "Finished": ("True", "Succeeded", COMPLETIONS_REACHED),
    "QuotaReserved": ("True", "QuotaReserved"),  # kept as they were
    "Admitted": ("True", "Admitted"),
    "PodsReady": ("True", "Started"),
    "admission kept": True,
    "finalizers": [],  # kueue.x-k8s.io/resource-in-use removed
}
QUOTA_RELEASED = {"reservingWorkloads": 0, "admittedWorkloads": 0, "in use": set()}
FINISHED_EVENTS = [
    ("Job", "Completed", "Job completed", "job-controller"),
    (
        "Job",
        "FinishedWorkload",
        "Workload '{workload}' is declared finished",
        "batch/job-kueue-controller",
    ),
]


def job_complete(job: dict[str, Any]) -> dict[str, Any]:
    """The facts of ``JOB_COMPLETE`` read from a Job. kube-controller-manager takes
    ``completionTime`` from the Complete condition it prepares, then writes the condition
    itself with the time it is written (after the pods' finalizers are removed, a moment
    later): the two are the same second on a quiet machine, a second apart under load
    (seen). Neither comes before the SuccessCriteriaMet condition."""
    status = job.get("status") or {}
    conditions = status.get("conditions") or []
    times = {c.get("type"): c.get("lastTransitionTime") or "" for c in conditions}
    completed = status.get("completionTime")
    # RFC 3339 times in UTC with whole seconds, as the API server writes them, sort as text
    in_order = bool(completed) and (
        times.get("SuccessCriteriaMet", "") <= completed <= times.get("Complete", "")
    )
    return {
        "conditions": [
            (c["type"], c["status"], c.get("reason"), c.get("message")) for c in conditions
        ],
        "succeeded": status.get("succeeded"),
        "active": status.get("active"),
        "ready": status.get("ready"),
        "terminating": status.get("terminating"),
        "uncountedTerminatedPods": status.get("uncountedTerminatedPods"),
        "completionTime": (
            "between the SuccessCriteriaMet and the Complete conditions' times"
            if in_order
            else (completed, times)
        ),
    }


def workload_finished(workload: dict[str, Any] | None) -> dict[str, Any]:
    """The facts of ``WORKLOAD_FINISHED`` read from a Workload."""
    finished = condition(workload, "Finished")
    facts: dict[str, Any] = {
        "Finished": (finished.get("status"), finished.get("reason"), finished.get("message"))
    }
    for kind in ("QuotaReserved", "Admitted", "PodsReady"):
        found = condition(workload, kind)
        facts[kind] = (found.get("status"), found.get("reason"))
    status = (workload or {}).get("status") or {}
    facts["admission kept"] = bool((status.get("admission") or {}).get("clusterQueue"))
    facts["finalizers"] = ((workload or {}).get("metadata") or {}).get("finalizers") or []
    return facts


def quota_in_use(queue: dict[str, Any]) -> dict[str, Any]:
    """A ClusterQueue's or LocalQueue's counts and the flavors' reserved and used totals
    above zero (a LocalQueue of the demo lists only the flavors in use, the real one each of
    its ClusterQueue's, at 0 when unused)."""
    status = queue.get("status") or {}
    totals = {
        r.get("total")
        for key in ("flavorsReservation", "flavorsUsage")
        for f in status.get(key) or []
        for r in f.get("resources") or []
    } - {"0"}
    return {
        "reservingWorkloads": status.get("reservingWorkloads"),
        "admittedWorkloads": status.get("admittedWorkloads"),
        "in use": totals,
    }


def finished_events(events: Iterable[dict[str, Any]], job_name: str) -> list[tuple[str, ...]]:
    """The events of the Job's end, in ``FINISHED_EVENTS``' form and order (by reason: a
    listing orders events by name)."""
    return sorted(
        (
            e["involvedObject"]["kind"],
            e["reason"],
            e["message"],
            e.get("reportingComponent") or (e.get("source") or {}).get("component", ""),
        )
        for e in events
        if e["involvedObject"].get("name") == job_name
        and e["reason"] in ("Completed", "FinishedWorkload")
    )


def succeed(gateway: Gateway, namespace: str, pod: str) -> None:
    """The kubelet's last word on a running pod: its containers exited 0."""
    gateway.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
        body={"status": {"phase": "Succeeded"}},
        content_type="application/merge-patch+json",
    )
