"""The Job controller, as far as a GPU portal sees it: a Job that is not suspended gets its
``parallelism`` pods (``<job>-<5 letters>``, owned by the Job); a pod the API refuses (an
exceeded ResourceQuota) becomes a ``FailedCreate`` Warning event on the Job, written by the
legacy event recorder (``source.component: job-controller``, ``count`` growing on repeats),
and is tried again later."""

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


def _suffix() -> str:
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=5))


def reconcile(cluster: Cluster) -> None:
    """One pass over every Job (called with the cluster's lock held)."""
    pods = [p for p in cluster.all(PODS) if "deletionTimestamp" not in p["metadata"]]
    for job in cluster.all(JOBS):  # type: ignore[arg-type]
        spec = job.get("spec") or {}
        if spec.get("suspend"):
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
