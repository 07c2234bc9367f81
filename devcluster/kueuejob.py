"""Kueue's batch/Job integration, as Kueue v0.19 does it (recorded in tests/data/kueue-samples).

* Its webhooks: a Job created with the ``kueue.x-k8s.io/queue-name`` label is suspended; the
  label cannot change while the Job runs (``vjob.kb.io``).
* Its Job reconciler: one Workload per Job (owned by it, finalizer, ``kueue.x-k8s.io/job-uid``
  label, the pod template without the Job's own selector labels); once the Workload is
  admitted the Job is unsuspended with the flavor's node labels and tolerations and Kueue's
  pod labels in its template; once it is evicted the Job is suspended again and the template
  restored. ``PodsReady`` follows the Job's ready pods.
* waitForPodsReady: an admitted Workload whose pods are not all ready after
  ``Options.pods_ready_timeout_seconds`` is evicted (``Evicted`` ``PodsReadyTimeout``), counted
  in ``status.schedulingStats.evictions`` and requeued after a backoff of
  ``requeue_backoff_seconds * 2^(n-1)`` (``Requeued`` ``BackoffFinished``).
* A Job that completed: its Workload is ``Finished`` (``Succeeded``, with the Job's message),
  loses its finalizer and no longer holds quota (held against Kueue v0.19.2 by
  ``tests/realcluster/test_finished.py``).
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
from typing import Any

from devcluster import kueue, recorder
from devcluster.cluster import Cluster, Obj
from devcluster.errors import APIError
from devcluster.resources import Resource, find

JOBS = find("batch", "v1", "jobs")
PODS = find("", "v1", "pods")
PRIORITY = find("scheduling.k8s.io", "v1", "priorityclasses")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
LQ_LABEL = "kueue.x-k8s.io/local-queue-name"
CQ_LABEL = "kueue.x-k8s.io/cluster-queue-name"
PODSET_LABEL = "kueue.x-k8s.io/podset"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
JOB_CONTROLLER = "batch/job-kueue-controller"
PODS_READY = "kueue-job-controller-PodsReady"
NOT_READY = "Not all pods are ready or succeeded"
READY = "All pods reached readiness and the workload is running"
# The Job controller's own labels, which Kueue leaves out of the Workload's pod template.
_SELECTOR_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid", "job-name")


def webhook_create(resource: Resource, job: Obj) -> None:
    """Kueue's mutating Job webhook: a queued Job starts suspended."""
    if resource.kind == "Job" and (job["metadata"].get("labels") or {}).get(QUEUE_LABEL):
        job.setdefault("spec", {})["suspend"] = True


def webhook_update(resource: Resource, old: Obj, new: Obj) -> None:
    """Kueue's validating Job webhook: the queue of a running Job is immutable."""
    if resource.kind != "Job" or (old.get("spec") or {}).get("suspend"):
        return
    before = (old["metadata"].get("labels") or {}).get(QUEUE_LABEL)
    after = (new["metadata"].get("labels") or {}).get(QUEUE_LABEL)
    if before and after != before:
        raise APIError(
            403,
            'admission webhook "vjob.kb.io" denied the request: '
            f'metadata.labels[{QUEUE_LABEL}]: Invalid value: "{after or ""}": field is immutable',
        )


def workload_name(job: Obj) -> str:
    meta = job["metadata"]
    digest = hashlib.sha1(f"Job\n{meta['name']}\n{meta.get('uid', '')}".encode()).hexdigest()
    return f"job-{meta['name'][:246]}-{digest[:5]}"


def _event(cluster: Cluster, job: Obj, reason: str, message: str) -> None:
    recorder.record(
        cluster,
        job,
        kind="Job",
        api_version="batch/v1",
        type_="Normal",
        reason=reason,
        message=message,
        component=JOB_CONTROLLER,
    )


def reconcile(cluster: Cluster, *, timeout: float, backoff: float) -> None:
    """One pass of Kueue's Job and Workload controllers (called with the lock held)."""
    workloads = {
        (w["metadata"]["namespace"], (w["metadata"].get("labels") or {}).get(JOB_UID_LABEL)): w
        for w in cluster.all(kueue.WORKLOADS)
        if (w["metadata"].get("labels") or {}).get(JOB_UID_LABEL)
    }
    uids = set()
    for job in cluster.all(JOBS):  # type: ignore[arg-type]
        if not (job["metadata"].get("labels") or {}).get(QUEUE_LABEL):
            continue
        key = (job["metadata"]["namespace"], job["metadata"].get("uid", ""))
        uids.add(key)
        workload = workloads.get(key)
        if workload is None:
            workload = _create_workload(cluster, job)
        _sync(cluster, job, workload, timeout=timeout, backoff=backoff)
    for key, workload in workloads.items():
        if key not in uids:  # the Job is gone: the garbage collector takes its Workload
            cluster._remove(kueue.WORKLOADS, workload)  # type: ignore[arg-type]


def _create_workload(cluster: Cluster, job: Obj) -> Obj:
    meta, spec = job["metadata"], job.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    labels = {
        k: v
        for k, v in ((template.get("metadata") or {}).get("labels") or {}).items()
        if k not in _SELECTOR_LABELS
    }
    template["metadata"] = {"labels": labels} if labels else {}
    workload = {
        "metadata": {
            "name": workload_name(job),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta.get("uid", "")},
            "finalizers": [FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                }
            ],
        },
        "spec": {
            "active": True,
            "podSets": [
                {
                    "count": int(spec.get("parallelism") or 1),
                    "name": "main",
                    "template": template,
                    "topologyRequest": {
                        "podIndexLabel": "batch.kubernetes.io/job-completion-index"
                    },
                }
            ],
            "priority": 0,
            "queueName": meta["labels"][QUEUE_LABEL],
        },
    }
    # A PriorityClass named in the pod template gives the workload its priority.
    class_name = (template.get("spec") or {}).get("priorityClassName")
    priority_class = cluster.get(PRIORITY, "", class_name) if class_name else None  # type: ignore[arg-type]
    if priority_class is not None:
        workload["spec"]["priority"] = int(priority_class.get("value") or 0)
        workload["spec"]["priorityClassRef"] = {
            "group": "scheduling.k8s.io",
            "kind": "PriorityClass",
            "name": class_name,
        }
    created = cluster.create(kueue.WORKLOADS, meta["namespace"], workload, manager="kueue")  # type: ignore[arg-type]
    _event(
        cluster,
        job,
        "CreatedWorkload",
        f"Created Workload: {meta['namespace']}/{created['metadata']['name']}",
    )
    return created


def _sync(cluster: Cluster, job: Obj, workload: Obj, *, timeout: float, backoff: float) -> None:
    if kueue.is_finished(workload):
        return  # done: its quota is free, nothing more to do for it
    complete = next(
        (
            c
            for c in (job.get("status") or {}).get("conditions") or []
            if c.get("type") == "Complete" and c.get("status") == "True"
        ),
        None,
    )
    if complete is not None:
        _finish(cluster, job, workload, complete.get("message") or "")
        return
    suspended = bool((job.get("spec") or {}).get("suspend"))
    admitted = bool(kueue.admitted_to(workload))
    if admitted and suspended:
        _start(cluster, job, workload)
    elif not admitted and not suspended:
        evicted = kueue.find_condition(workload, "Evicted") or {}
        _stop(cluster, job, workload, evicted.get("message") or "Not admitted by cluster queue")
    workload = _pods_ready(cluster, job, workload)
    if admitted and _timed_out(workload, timeout):
        workload = _evict(cluster, workload, backoff)
    _finish_backoff(cluster, workload)


def _finish(cluster: Cluster, job: Obj, workload: Obj, message: str) -> None:
    """The Job completed: the Workload gets ``Finished`` (reason ``Succeeded``, the Job's
    ``Complete`` message) and loses its finalizer; its admission and conditions stay, and
    the ClusterQueue no longer counts it (``kueue.workloads_now``)."""
    new = copy.deepcopy(workload)
    new["metadata"]["finalizers"] = [
        f for f in new["metadata"].get("finalizers") or [] if f != FINALIZER
    ]
    if not new["metadata"]["finalizers"]:
        del new["metadata"]["finalizers"]
    status = new.setdefault("status", {})
    status["conditions"] = kueue.set_condition(
        status.get("conditions") or [],
        "Finished",
        "True",
        "Succeeded",
        message,
        kueue.generation(workload),
    )
    cluster._store(kueue.WORKLOADS, new, workload)  # type: ignore[arg-type]
    meta = workload["metadata"]
    _event(
        cluster,
        job,
        "FinishedWorkload",
        f"Workload '{meta['namespace']}/{meta['name']}' is declared finished",
    )


def _start(cluster: Cluster, job: Obj, workload: Obj) -> None:
    """Unsuspend the Job with what its admission says (Kueue's podset info)."""
    admission = workload["status"]["admission"]
    flavors = {f["metadata"]["name"]: f for f in cluster.all(kueue.FLAVORS)}
    new = copy.deepcopy(job)
    template = new["spec"].setdefault("template", {})
    tmeta, tspec = template.setdefault("metadata", {}), template.setdefault("spec", {})
    for assignment in admission.get("podSetAssignments") or []:
        cq = admission["clusterQueue"]
        labels = tmeta.setdefault("labels", {})
        labels[LQ_LABEL] = workload["spec"]["queueName"]
        if kueue_label_ok(cq):
            labels[CQ_LABEL] = cq
        labels[PODSET_LABEL] = assignment.get("name", "main")
        tmeta.setdefault("annotations", {})[WORKLOAD_ANNOTATION] = workload["metadata"]["name"]
        for name in dict.fromkeys((assignment.get("flavors") or {}).values()):
            flavor = (flavors.get(name) or {}).get("spec") or {}
            if flavor.get("nodeLabels"):
                tspec["nodeSelector"] = {  # the first one's label wins (MergeKeepFirst)
                    **flavor["nodeLabels"],
                    **(tspec.get("nodeSelector") or {}),
                }
            for toleration in flavor.get("tolerations") or []:
                if toleration not in (tspec.get("tolerations") or []):
                    tspec.setdefault("tolerations", []).append(copy.deepcopy(toleration))
    new["spec"]["suspend"] = False
    cluster.replace(
        JOBS, job["metadata"]["namespace"], job["metadata"]["name"], new, manager="kueue"
    )  # type: ignore[arg-type]
    _event(cluster, job, "Started", f"Admitted by clusterQueue {admission['clusterQueue']}")


def kueue_label_ok(name: str) -> bool:
    """Kueue labels pods with the ClusterQueue's name only if it is a valid label value."""
    return len(name) <= 63 and all(c.isalnum() or c in "-_." for c in name)


def _stop(cluster: Cluster, job: Obj, workload: Obj, message: str) -> None:
    """Suspend the Job and give its template back what Kueue had added."""
    original = ((workload["spec"].get("podSets") or [{}])[0].get("template") or {}).get(
        "spec"
    ) or {}
    new = copy.deepcopy(job)
    template = new["spec"].setdefault("template", {})
    tmeta, tspec = template.setdefault("metadata", {}), template.setdefault("spec", {})
    for key in (LQ_LABEL, CQ_LABEL, PODSET_LABEL):
        (tmeta.get("labels") or {}).pop(key, None)
    (tmeta.get("annotations") or {}).pop(WORKLOAD_ANNOTATION, None)
    if tmeta.get("annotations") == {}:
        tmeta.pop("annotations")
    for key in ("nodeSelector", "tolerations"):
        if key in original:
            tspec[key] = copy.deepcopy(original[key])
        else:
            tspec.pop(key, None)
    new["spec"]["suspend"] = True
    cluster.replace(
        JOBS, job["metadata"]["namespace"], job["metadata"]["name"], new, manager="kueue"
    )  # type: ignore[arg-type]
    _event(cluster, job, "Stopped", message)


def _pods_ready(cluster: Cluster, job: Obj, workload: Obj) -> Obj:
    """``PodsReady``: True once the Job's pods are all ready (or done), else WaitForStart;
    written once Kueue's scheduler has looked at the workload (after ``QuotaReserved``)."""
    if kueue.find_condition(workload, "QuotaReserved") is None:
        return workload
    uid = job["metadata"].get("uid", "")
    pods = [
        p
        for p in cluster.all(PODS)
        if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
        and "deletionTimestamp" not in p["metadata"]
    ]
    ready = sum(
        1
        for p in pods
        if p["status"].get("phase") == "Succeeded"
        or any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in p["status"].get("conditions") or []
        )
    )
    count = sum(int(p.get("count", 1)) for p in workload["spec"].get("podSets") or [])
    started = bool(kueue.admitted_to(workload)) and ready >= count
    status = copy.deepcopy(workload.get("status") or {})
    status["conditions"] = kueue.set_condition(
        status.get("conditions") or [],
        "PodsReady",
        "True" if started else "False",
        "Started" if started else "WaitForStart",
        READY if started else NOT_READY,
        kueue.generation(workload),
    )
    if status == workload.get("status"):
        return workload
    return cluster._store(kueue.WORKLOADS, {**copy.deepcopy(workload), "status": status}, workload)  # type: ignore[arg-type]


def _timed_out(workload: Obj, timeout: float) -> bool:
    ready = kueue.find_condition(workload, "PodsReady") or {}
    admitted = kueue.find_condition(workload, "Admitted") or {}
    if ready.get("status") == "True" or admitted.get("status") != "True":
        return False
    since = kueue.parse_time(admitted["lastTransitionTime"])
    return (dt.datetime.now(dt.UTC) - since).total_seconds() >= timeout


def _evict(cluster: Cluster, workload: Obj, backoff: float) -> Obj:
    """Evict for PodsReadyTimeout, count it and requeue after the backoff."""
    meta = workload["metadata"]
    message = f"Exceeded the PodsReady timeout {meta['namespace']}/{meta['name']}"
    gen = kueue.generation(workload)
    status = copy.deepcopy(workload["status"])
    status.pop("admission", None)
    conditions = status.get("conditions") or []
    for kind, state, reason, text in (
        ("Evicted", "True", "PodsReadyTimeout", message),
        ("QuotaReserved", "False", "Pending", message),
        ("Admitted", "False", "NoReservation", "The workload has no reservation"),
        ("Requeued", "False", "PodsReadyTimeout", message),
    ):
        conditions = kueue.set_condition(conditions, kind, state, reason, text, gen)
    status["conditions"] = conditions
    count = int((status.get("requeueState") or {}).get("count") or 0) + 1
    due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=backoff * 2 ** (count - 1))
    status["requeueState"] = {"count": count, "requeueAt": due.strftime("%Y-%m-%dT%H:%M:%SZ")}
    stats = status.setdefault("schedulingStats", {})
    evictions: list[dict[str, Any]] = stats.setdefault("evictions", [])
    entry = next(
        (
            e
            for e in evictions
            if e["reason"] == "PodsReadyTimeout" and e["underlyingCause"] == "WaitForStart"
        ),
        None,
    )
    if entry is None:
        evictions.append(
            {"count": 1, "reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart"}
        )
    else:
        entry["count"] += 1
    stored = cluster._store(
        kueue.WORKLOADS, {**copy.deepcopy(workload), "status": status}, workload
    )  # type: ignore[arg-type]
    kueue.event(cluster, stored, "Normal", "EvictedDueToPodsReadyTimeout", message)
    return stored


def _finish_backoff(cluster: Cluster, workload: Obj) -> None:
    state = (workload.get("status") or {}).get("requeueState") or {}
    if not state.get("requeueAt") or kueue.in_backoff(workload):
        return
    status = copy.deepcopy(workload["status"])
    status["requeueState"] = {"count": state.get("count", 1)}
    status["conditions"] = kueue.set_condition(
        status.get("conditions") or [],
        "Requeued",
        "True",
        "BackoffFinished",
        "The workload backoff was finished",
        kueue.generation(workload),
    )
    cluster._store(kueue.WORKLOADS, {**copy.deepcopy(workload), "status": status}, workload)  # type: ignore[arg-type]
