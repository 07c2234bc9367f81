"""The Job controller, as far as a GPU portal sees it: a Job that is not suspended gets its
``parallelism`` pods (``<job>-<5 letters>``, owned by the Job); a pod the API refuses (an
exceeded ResourceQuota) becomes a ``FailedCreate`` Warning event on the Job, written by the
legacy event recorder (``source.component: job-controller``, ``count`` growing on repeats),
and is tried again later.

Failures are tracked as the real controller tracks them: its pods carry the
``batch.kubernetes.io/job-tracking`` finalizer, so a pod that is evicted (or deleted)
stays until its kubelet has stopped it (phase Failed) and the controller has counted it in
``status.failed`` and removed the finalizer; a replacement starts as soon as the old pod is
terminating. Once ``failed`` exceeds ``backoffLimit`` (default 6) the Job gets
``FailureTarget`` and ``Failed`` (reason ``BackoffLimitExceeded``), its other pods are
stopped and no new one is created."""

from __future__ import annotations

import copy
import random
import string
import uuid
from typing import Any

from devcluster.cluster import Cluster, Obj, now
from devcluster.errors import APIError
from devcluster.resources import find

JOBS = find("batch", "v1", "jobs")
PODS = find("", "v1", "pods")
EVENTS = find("", "v1", "events")
TERMINAL = ("Succeeded", "Failed")
TRACKING = "batch.kubernetes.io/job-tracking"
BACKOFF_EXCEEDED = "Job has reached the specified backoff limit"


def _suffix() -> str:
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=5))


def reconcile(cluster: Cluster) -> None:
    """One pass over every Job (called with the cluster's lock held)."""
    everything = cluster.all(PODS)
    for job in cluster.all(JOBS):  # type: ignore[arg-type]
        if _count_failures(cluster, job, everything):
            continue  # failed: nothing more to run
    pods = [p for p in cluster.all(PODS) if "deletionTimestamp" not in p["metadata"]]
    for job in cluster.all(JOBS):  # type: ignore[arg-type]
        spec = job.get("spec") or {}
        if spec.get("suspend") or _failed(job):
            continue
        meta = job["metadata"]
        uid = meta.get("uid", "")
        mine = [
            p
            for p in pods
            if p["metadata"]["namespace"] == meta["namespace"]
            and any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
        ]
        active = [p for p in mine if p.get("status", {}).get("phase") not in TERMINAL]
        succeeded = sum(1 for p in mine if p.get("status", {}).get("phase") == "Succeeded")
        completions = int(spec.get("completions") or spec.get("parallelism") or 1)
        wanted = min(int(spec.get("parallelism") or 1), completions - succeeded) - len(active)
        for _ in range(max(0, wanted)):
            pod = _pod_for(job)
            try:
                cluster.create(PODS, meta["namespace"], pod, manager="kube-controller-manager")  # type: ignore[arg-type]
            except APIError as error:
                _failed_create(cluster, job, f"Error creating: {error.message}")
                break
            active.append(pod)
        status = dict(job.get("status") or {})
        if status.get("active", 0) != len(active):
            new = copy.deepcopy(job)
            new["status"] = {
                **status,
                "active": len(active),
                "startTime": status.get("startTime") or now(),
            }
            cluster._store(JOBS, new, job)  # type: ignore[arg-type]


def _failed(job: Obj) -> bool:
    return any(
        c.get("type") == "Failed" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _count_failures(cluster: Cluster, job: Obj, pods: list[Obj]) -> bool:
    """Count the Job's stopped pods that failed (removing their tracking finalizer, which
    lets a deleted one go), and fail the Job past its backoffLimit; whether it has failed."""
    uid = job["metadata"].get("uid", "")
    mine = [
        p
        for p in pods
        if p["metadata"]["namespace"] == job["metadata"]["namespace"]
        and any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
    ]
    counted = 0
    for pod in mine:
        if TRACKING in (pod["metadata"].get("finalizers") or []) and (
            pod.get("status", {}).get("phase") == "Failed"
        ):
            counted += 1
            _untrack(cluster, pod)
    status = dict(job.get("status") or {})
    if counted:
        status["failed"] = int(status.get("failed") or 0) + counted
    limit = (job.get("spec") or {}).get("backoffLimit")
    limit = 6 if limit is None else int(limit)
    if _failed(job) or status.get("failed", 0) <= limit:
        if counted:
            cluster._store(JOBS, {**copy.deepcopy(job), "status": status}, job)  # type: ignore[arg-type]
        return _failed(job)
    for pod in mine:  # the rest stop; the Job is done with them
        if (
            "deletionTimestamp" not in pod["metadata"]
            and pod.get("status", {}).get("phase") not in TERMINAL
        ):
            _untrack(cluster, cluster.mark_terminating(pod, None))
    stamp = now()
    status.update(active=0, ready=0, terminating=0)
    status["conditions"] = [
        *(status.get("conditions") or []),
        *(
            {
                "type": kind,
                "status": "True",
                "lastProbeTime": stamp,
                "lastTransitionTime": stamp,
                "reason": "BackoffLimitExceeded",
                "message": BACKOFF_EXCEEDED,
            }
            for kind in ("FailureTarget", "Failed")
        ),
    ]
    cluster._store(JOBS, {**copy.deepcopy(job), "status": status}, job)  # type: ignore[arg-type]
    return True


def _untrack(cluster: Cluster, pod: Obj) -> None:
    """Remove the tracking finalizer; a pod being deleted then goes."""
    current = cluster.get(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])  # type: ignore[arg-type]
    if current is None:
        return
    if (
        "deletionTimestamp" in current["metadata"]
        and current.get("status", {}).get("phase") in TERMINAL
    ):
        cluster._remove(PODS, current)  # type: ignore[arg-type]
        return
    new = copy.deepcopy(current)
    new["metadata"]["finalizers"] = [
        f for f in new["metadata"].get("finalizers") or [] if f != TRACKING
    ]
    if not new["metadata"]["finalizers"]:
        del new["metadata"]["finalizers"]
    cluster._store(PODS, new, current)  # type: ignore[arg-type]


def _pod_for(job: Obj) -> Obj:
    meta = job["metadata"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    labels.update(
        {
            "batch.kubernetes.io/controller-uid": meta.get("uid", ""),
            "batch.kubernetes.io/job-name": meta["name"],
            "controller-uid": meta.get("uid", ""),
            "job-name": meta["name"],
        }
    )
    return {
        "metadata": {
            "name": f"{meta['name']}-{_suffix()}",
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": [TRACKING],
        },
        "spec": template.get("spec") or {},
    }


def _failed_create(cluster: Cluster, job: Obj, message: str) -> None:
    """The legacy recorder's event: one per Job and reason, its count growing."""
    meta = job["metadata"]
    stamp = now()
    for event in cluster.all(EVENTS):  # type: ignore[arg-type]
        involved = event.get("involvedObject") or {}
        if event.get("reason") == "FailedCreate" and involved.get("uid") == meta.get("uid"):
            new: dict[str, Any] = copy.deepcopy(event)
            new.update(
                {
                    "message": message,
                    "count": int(event.get("count") or 1) + 1,
                    "lastTimestamp": stamp,
                }
            )
            cluster._store(EVENTS, new, event)  # type: ignore[arg-type]
            return
    cluster._store(
        EVENTS,  # type: ignore[arg-type]
        {
            "metadata": {
                "name": f"{meta['name']}.{random.getrandbits(64):x}",
                "namespace": meta["namespace"],
                "uid": str(uuid.uuid4()),
                "creationTimestamp": stamp,
            },
            "involvedObject": {
                "kind": "Job",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta.get("uid", ""),
                "apiVersion": "batch/v1",
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": "FailedCreate",
            "message": message,
            "source": {"component": "job-controller"},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": "Warning",
            "eventTime": None,
            "reportingComponent": "job-controller",
            "reportingInstance": "",
        },
        None,
    )
