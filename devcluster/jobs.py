"""The Job controller, as far as a GPU portal sees it: a Job that is not suspended gets its
``parallelism`` pods (``<job>-<5 letters>``, owned by the Job, ``SuccessfulCreate`` events); a
suspended Job loses its pods and gets the ``Suspended`` condition (``Resumed`` when it is
unsuspended); a pod the API refuses (an exceeded ResourceQuota) becomes a ``FailedCreate``
Warning event on the Job, written by the legacy event recorder (``source.component:
job-controller``, ``count`` growing on repeats), and is tried again later. ``default_job`` is
the API server's defaulting of a new Job.

Failures are tracked as the real controller tracks them: its pods carry the
``batch.kubernetes.io/job-tracking`` finalizer, so a pod that is evicted (or deleted)
stays until its kubelet has stopped it (phase Failed) and the controller has counted it in
``status.failed`` and removed the finalizer; a replacement starts as soon as the old pod is
terminating. Once ``failed`` exceeds ``backoffLimit`` (default 6) the Job gets
``FailureTarget`` and ``Failed`` (reason ``BackoffLimitExceeded``), its other pods are
stopped and no new one is created. Pods removed because the Job was suspended (Kueue's
preemption) are not failures.

Successes are counted the same way: a pod that Succeeded is counted in ``status.succeeded``
and loses its finalizer; once ``succeeded`` reaches ``completions`` the Job gets
``SuccessCriteriaMet`` and ``Complete`` (reason ``CompletionsReached``), its
``completionTime`` and the ``Completed`` event (as kube-controller-manager v1.36 writes
them)."""

from __future__ import annotations

import copy
import random
import string
import uuid
from typing import Any

from devcluster.cluster import Cluster, Obj, now
from devcluster.errors import APIError
from devcluster.resources import Resource, find

JOBS = find("batch", "v1", "jobs")
PODS = find("", "v1", "pods")
EVENTS = find("", "v1", "events")
TERMINAL = ("Succeeded", "Failed")
TRACKING = "batch.kubernetes.io/job-tracking"
BACKOFF_EXCEEDED = "Job has reached the specified backoff limit"
COMPLETIONS_REACHED = "Reached expected number of succeeded pods"


def _suffix() -> str:
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=5))


def default_job(resource: Resource, job: Obj) -> None:
    """What the API server adds to a Job on create (``SetDefaults_Job``, the Job strategy and
    the pod template's defaults; a template's requests are not copied from its limits)."""
    if resource.kind != "Job":
        return
    meta, spec = job["metadata"], job.setdefault("spec", {})
    job.setdefault("status", {})
    uid = meta.get("uid", "")
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    if not spec.get("podFailurePolicy"):
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    selector_labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": meta.get("name", ""),
        "controller-uid": uid,
        "job-name": meta.get("name", ""),
    }
    if not spec["manualSelector"]:
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template = spec.setdefault("template", {})
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    for key, value in selector_labels.items():
        labels.setdefault(key, value)
    pod_spec = template.setdefault("spec", {})
    for key, value in (
        ("dnsPolicy", "ClusterFirst"),
        ("securityContext", {}),
        ("schedulerName", "default-scheduler"),
        ("terminationGracePeriodSeconds", 30),
    ):
        pod_spec.setdefault(key, value)
    for container in pod_spec.get("containers") or []:
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = container.get("image", "")
        latest = image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")


def reconcile(cluster: Cluster) -> None:
    """One pass over every Job (called with the cluster's lock held)."""
    everything = cluster.all(PODS)
    ended = {
        job["metadata"].get("uid", "")
        for job in cluster.all(JOBS)  # type: ignore[arg-type]
        if _count_failures(cluster, job, everything) or _count_successes(cluster, job, everything)
    }
    pods = [p for p in cluster.all(PODS) if "deletionTimestamp" not in p["metadata"]]
    for job in cluster.all(JOBS):  # type: ignore[arg-type]
        if job["metadata"].get("uid", "") in ended:
            continue  # failed or complete: nothing more to run
        spec = job.get("spec") or {}
        meta = job["metadata"]
        uid = meta.get("uid", "")
        mine = [
            p
            for p in pods
            if p["metadata"]["namespace"] == meta["namespace"]
            and any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
        ]
        active = [p for p in mine if p.get("status", {}).get("phase") not in TERMINAL]
        if spec.get("suspend"):
            for pod in active:
                _untrack(cluster, pod)  # a suspended Job's pods are not its failures
                cluster.delete(PODS, meta["namespace"], pod["metadata"]["name"])  # type: ignore[arg-type]
            _set_status(cluster, job, [], suspended=True)
            continue
        succeeded = sum(1 for p in mine if p.get("status", {}).get("phase") == "Succeeded")
        completions = int(spec.get("completions") or spec.get("parallelism") or 1)
        wanted = min(int(spec.get("parallelism") or 1), completions - succeeded) - len(active)
        for _ in range(max(0, wanted)):
            try:
                pod = cluster.create(
                    PODS, meta["namespace"], _pod_for(job), manager="kube-controller-manager"
                )  # type: ignore[arg-type]
            except APIError as error:
                _failed_create(cluster, job, f"Error creating: {error.message}")
                break
            _normal_event(
                cluster, job, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}"
            )
            active.append(pod)
        _set_status(cluster, job, active, suspended=False)


def _failed(job: Obj) -> bool:
    return _true(job, "Failed")


def _true(job: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _owned(job: Obj, pods: list[Obj]) -> list[Obj]:
    uid = job["metadata"].get("uid", "")
    return [
        p
        for p in pods
        if p["metadata"]["namespace"] == job["metadata"]["namespace"]
        and any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
    ]


def _count_successes(cluster: Cluster, job: Obj, pods: list[Obj]) -> bool:
    """Count the Job's pods that succeeded (removing their tracking finalizer) and complete
    the Job once ``succeeded`` reaches ``completions`` (``parallelism`` when unset), as the
    real controller writes it: ``SuccessCriteriaMet``, then ``Complete``, ``completionTime``,
    no ``active`` left, the ``Completed`` event; whether it is complete."""
    job = cluster.get(JOBS, job["metadata"]["namespace"], job["metadata"]["name"]) or job  # type: ignore[arg-type]
    if _true(job, "Complete"):
        return True
    if _failed(job):
        return False
    mine = _owned(job, pods)
    counted = 0
    for pod in mine:
        if TRACKING in (pod["metadata"].get("finalizers") or []) and (
            pod.get("status", {}).get("phase") == "Succeeded"
        ):
            counted += 1
            _untrack(cluster, pod)
    status = dict(job.get("status") or {})
    if counted:
        status["succeeded"] = int(status.get("succeeded") or 0) + counted
    spec = job.get("spec") or {}
    completions = int(spec.get("completions") or spec.get("parallelism") or 1)
    if int(status.get("succeeded") or 0) < completions:
        if counted:
            cluster._store(JOBS, {**copy.deepcopy(job), "status": status}, job)  # type: ignore[arg-type]
        return False
    for pod in mine:  # what still runs is not needed any more
        if (
            "deletionTimestamp" not in pod["metadata"]
            and pod.get("status", {}).get("phase") not in TERMINAL
        ):
            _untrack(cluster, cluster.mark_terminating(pod, None))
    stamp = now()
    status.pop("active", None)
    status.update(completionTime=stamp, ready=0, terminating=0, uncountedTerminatedPods={})
    status["conditions"] = [
        *(status.get("conditions") or []),
        *(
            {
                "type": kind,
                "status": "True",
                "lastProbeTime": stamp,
                "lastTransitionTime": stamp,
                "reason": "CompletionsReached",
                "message": COMPLETIONS_REACHED,
            }
            for kind in ("SuccessCriteriaMet", "Complete")
        ),
    ]
    cluster._store(JOBS, {**copy.deepcopy(job), "status": status}, job)  # type: ignore[arg-type]
    _normal_event(cluster, job, "Completed", "Job completed")
    return True


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


def _set_status(cluster: Cluster, job: Obj, active: list[Obj], *, suspended: bool) -> None:
    """The Job's status as the Job controller writes it, with the ``Suspended`` condition
    (and its ``Suspended``/``Resumed`` events) once a Job was suspended."""
    job = cluster.get(JOBS, job["metadata"]["namespace"], job["metadata"]["name"]) or job  # type: ignore[arg-type]
    old = job.get("status") or {}
    conditions = [dict(c) for c in old.get("conditions") or []]
    current = next((c for c in conditions if c["type"] == "Suspended"), None)
    stamp = now()
    event = None
    if suspended and (current is None or current["status"] != "True"):
        condition = {
            "type": "Suspended",
            "status": "True",
            "reason": "JobSuspended",
            "message": "Job suspended",
        }
        event = ("Suspended", "Job suspended")
    elif not suspended and current is not None and current["status"] == "True":
        condition = {
            "type": "Suspended",
            "status": "False",
            "reason": "JobResumed",
            "message": "Job resumed",
        }
        event = ("Resumed", "Job resumed")
    else:
        condition = None
    if condition is not None:
        condition = {
            "type": condition["type"],
            "status": condition["status"],
            "lastProbeTime": stamp,
            "lastTransitionTime": stamp,
            "reason": condition["reason"],
            "message": condition["message"],
        }
        conditions = [c for c in conditions if c["type"] != "Suspended"] + [condition]
    ready = sum(
        1
        for p in active
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in p["status"].get("conditions") or []
        )
    )
    status: dict[str, Any] = {
        k: v for k, v in old.items() if k not in ("active", "startTime", "conditions")
    }
    if conditions:
        status["conditions"] = conditions
    if not suspended:
        resumed = condition is not None and condition["status"] == "False"
        status["startTime"] = stamp if resumed or not old.get("startTime") else old["startTime"]
    if active:
        status["active"] = len(active)
    status.update({"terminating": 0, "uncountedTerminatedPods": {}, "ready": ready})
    if status != old:
        new = copy.deepcopy(job)
        new["status"] = status
        cluster._store(JOBS, new, job)  # type: ignore[arg-type]
    if event is not None:
        _normal_event(cluster, job, *event)


def _pod_for(job: Obj) -> Obj:
    meta = job["metadata"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    labels.update(
        {
            "batch.kubernetes.io/controller-uid": meta.get("uid", ""),
            "batch.kubernetes.io/job-name": meta["name"],
            "controller-uid": meta.get("uid", ""),
            "job-name": meta["name"],
        }
    )
    pod_meta: dict[str, Any] = {
        "generateName": f"{meta['name']}-",
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
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {"metadata": pod_meta, "spec": template.get("spec") or {}}


def _normal_event(cluster: Cluster, job: Obj, reason: str, message: str) -> None:
    """The legacy recorder's Normal event (``source.component: job-controller``)."""
    _legacy_event(cluster, job, "Normal", reason, message)


def _legacy_event(cluster: Cluster, job: Obj, type_: str, reason: str, message: str) -> None:
    """A new event of the legacy recorder about the Job (count 1, first = last seen)."""
    meta = job["metadata"]
    stamp = now()
    cluster._store(
        EVENTS,  # type: ignore[arg-type]
        {
            "metadata": {
                "name": f"{meta['name']}.{random.getrandbits(64):x}",
                "namespace": meta["namespace"],
                "uid": str(uuid.uuid4()),
                "creationTimestamp": stamp,
            },
            "involvedObject": _involved(job),
            "reason": reason,
            "message": message,
            "source": {"component": "job-controller"},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": type_,
            "eventTime": None,
            "reportingComponent": "job-controller",
            "reportingInstance": "",
        },
        None,
    )


def _involved(job: Obj) -> dict[str, str]:
    meta = job["metadata"]
    return {
        "kind": "Job",
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "apiVersion": "batch/v1",
        "resourceVersion": meta.get("resourceVersion", ""),
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
    _legacy_event(cluster, job, "Warning", "FailedCreate", message)
