"""Events as controllers write them through the events.k8s.io/v1 recorder (Kueue, the
scheduler): no ``source``, no first/last timestamps, an ``eventTime`` and an ``action``."""

from __future__ import annotations

import time
import uuid

from devcluster.cluster import Cluster, Obj, now, now_micro
from devcluster.resources import find

EVENTS = find("", "v1", "events")
INSTANCE = "devcluster"


def record(
    cluster: Cluster,
    obj: Obj,
    *,
    kind: str,
    api_version: str,
    type_: str,
    reason: str,
    message: str,
    component: str,
    action: str = "",
) -> str:
    """Store one Event about ``obj`` and return its name."""
    meta = obj["metadata"]
    name = f"{meta['name']}.{time.time_ns():x}"
    cluster._store(
        EVENTS,  # type: ignore[arg-type]
        {
            "metadata": {
                "name": name,
                "namespace": meta.get("namespace") or "default",
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
            },
            "involvedObject": {
                "kind": kind,
                "namespace": meta.get("namespace", ""),
                "name": meta["name"],
                "uid": meta.get("uid", ""),
                "apiVersion": api_version,
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "source": {},
            "firstTimestamp": None,
            "lastTimestamp": None,
            "type": type_,
            "eventTime": now_micro(),
            "action": action or reason,
            "reportingComponent": component,
            "reportingInstance": f"{component}-{INSTANCE}",
        },
        None,
    )
    return name
