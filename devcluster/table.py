"""``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``: what ``kubectl get`` prints.

The columns and cells follow kube-apiserver's printers (pods, nodes, events, namespaces)
and, for custom resources, their CRD's ``additionalPrinterColumns`` (``Age`` when a CRD
has none); any other kind gets Name and Age. The server fills every column, the wide
(priority 1) ones included; kubectl shows those with ``-o wide``. Rows carry the object
as ``includeObject`` asks: ``Metadata`` (the default, a PartialObjectMetadata), ``Object``
or ``None``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from devcluster import crd, openapi
from devcluster.errors import APIError
from devcluster.resources import Resource

Obj = dict[str, Any]
Cells = list[Any]


def wanted(accept: str) -> bool:
    """Whether the client asked for a Table (meta.k8s.io v1 or v1beta1) first."""
    for media in accept.split(","):
        params = dict(p.strip().partition("=")[::2] for p in media.split(";")[1:] if "=" in p)
        if params.get("as") == "Table":
            return params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1")
        if media.split(";")[0].strip() in ("application/json", "*/*"):
            return False
    return False


def human_duration(seconds: float) -> str:
    """Kubernetes' ``duration.HumanDuration`` (``39s``, ``5m10s``, ``3h``, ``2d4h``)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def age(timestamp: str | None, now: dt.datetime) -> str:
    if not timestamp:
        return "<unknown>"
    when = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return human_duration((now - when).total_seconds())


def _column(name: str, description: str, *, type_: str = "string", priority: int = 0) -> Obj:
    return {
        "name": name,
        "type": type_,
        "format": "name" if name == "Name" else "",
        "description": description,
        "priority": priority,
    }


def _doc(definition: str, field: str) -> str:
    return openapi.field_description(definition, field)


CORE = "io.k8s.api.core.v1."
META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def _name() -> Obj:
    return _column("Name", _doc(META, "name"))


def _age() -> Obj:
    return _column("Age", _doc(META, "creationTimestamp"))


def _pod_columns() -> list[Obj]:
    return [
        _name(),
        _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
        _column("Status", "The aggregate status of the containers in this pod."),
        _column(
            "Restarts",
            "The number of times the containers in this pod have been restarted and when the "
            "last container in this pod has restarted.",
        ),
        _age(),
        _column("IP", _doc(f"{CORE}PodStatus", "podIP"), priority=1),
        _column("Node", _doc(f"{CORE}PodSpec", "nodeName"), priority=1),
        _column("Nominated Node", _doc(f"{CORE}PodStatus", "nominatedNodeName"), priority=1),
        _column("Readiness Gates", _doc(f"{CORE}PodSpec", "readinessGates"), priority=1),
    ]


def _pod_cells(pod: Obj, now: dt.datetime) -> Cells:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    phase = status.get("phase", "")
    reason = status.get("reason") or phase
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    containers = spec.get("containers") or []
    restarts = ready = 0
    running = False
    last_restart = ""
    for container in reversed(status.get("containerStatuses") or []):
        restarts += int(container.get("restartCount") or 0)
        finished = ((container.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        last_restart = max(last_restart, finished or "")
        state = container.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated:
            signal = terminated.get("signal")
            reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode', 0)}"
        elif container.get("ready") and "running" in state:
            running = True
            ready += 1
    if reason == "Completed" and running:
        ready_condition = any(c.get("type") == "Ready" for c in status.get("conditions") or [])
        reason = "Running" if ready_condition else "NotReady"
    if pod["metadata"].get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    passed = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(containers)}",
        reason,
        f"{restarts} ({age(last_restart, now)} ago)"
        if restarts and last_restart
        else str(restarts),
        age(pod["metadata"].get("creationTimestamp"), now),
        (ips[0].get("ip") if ips else "") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"{passed}/{len(gates)}" if gates else "<none>",
    ]


def _pod_conditions(pod: Obj) -> list[Obj]:
    phase = (pod.get("status") or {}).get("phase")
    message = {"Succeeded": "The pod has completed successfully.", "Failed": "The pod failed."}
    if phase not in message:
        return []
    return [{"type": "Completed", "status": "True", "reason": phase, "message": message[phase]}]


def _node_columns() -> list[Obj]:
    addresses = _doc(f"{CORE}NodeStatus", "addresses")
    info = f"{CORE}NodeSystemInfo"
    return [
        _name(),
        _column("Status", "The status of the node"),
        _column("Roles", "The roles of the node"),
        _age(),
        _column("Version", _doc(info, "kubeletVersion")),
        _column("Internal-IP", addresses, priority=1),
        _column("External-IP", addresses, priority=1),
        _column("OS-Image", _doc(info, "osImage"), priority=1),
        _column("Kernel-Version", _doc(info, "kernelVersion"), priority=1),
        _column("Container-Runtime", _doc(info, "containerRuntimeVersion"), priority=1),
    ]


def _node_cells(node: Obj, now: dt.datetime) -> Cells:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    states = [] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    states = states or ["Unknown"]
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    labels = node["metadata"].get("labels") or {}
    roles = sorted(
        {k.partition("/")[2] for k in labels if k.startswith("node-role.kubernetes.io/")}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()) - {""}
    )
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a["address"] for a in addresses if a.get("type") == kind), "<none>")

    kernel = info.get("kernelVersion") or "<unknown>"
    if info.get("kernelVersion") and info.get("architecture"):
        kernel = f"{kernel} ({info['architecture']})"
    return [
        node["metadata"]["name"],
        ",".join(states),
        ",".join(roles) or "<none>",
        age(node["metadata"].get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        kernel,
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _event_columns() -> list[Obj]:
    event = f"{CORE}Event"
    return [
        _column("Last Seen", _doc(event, "lastTimestamp")),
        _column("Type", _doc(event, "type")),
        _column("Reason", _doc(event, "reason")),
        _column("Object", _doc(event, "involvedObject")),
        _column("Subobject", _doc(f"{CORE}ObjectReference", "fieldPath"), priority=1),
        _column("Source", _doc(event, "source"), priority=1),
        _column("Message", _doc(event, "message")),
        _column("First Seen", _doc(event, "firstTimestamp"), priority=1),
        _column("Count", _doc(event, "count"), priority=1),
        {**_name(), "priority": 1},
    ]


def _event_cells(event: Obj, now: dt.datetime) -> Cells:
    first = event.get("firstTimestamp") or event.get("eventTime")
    first_seen = age(first, now)
    last_seen = age(event["lastTimestamp"], now) if event.get("lastTimestamp") else first_seen
    count = event.get("count") or 1
    if event.get("series"):
        last_seen = age(event["series"].get("lastObservedTime"), now)
        count = event["series"].get("count") or count
    involved = event.get("involvedObject") or {}
    target = involved.get("kind", "").lower()
    if involved.get("name"):
        target = f"{target}/{involved['name']}"
    source = event.get("source") or {}
    origin = source.get("component") or event.get("reportingComponent", "")
    host = source.get("host") or event.get("reportingInstance", "")
    return [
        last_seen,
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        f"{origin}, {host}" if host else origin,
        (event.get("message") or "").strip(),
        first_seen,
        count,
        event["metadata"]["name"],
    ]


def _namespace_columns() -> list[Obj]:
    return [_name(), _column("Status", "The status of the namespace"), _age()]


def _namespace_cells(namespace: Obj, now: dt.datetime) -> Cells:
    return [
        namespace["metadata"]["name"],
        (namespace.get("status") or {}).get("phase", ""),
        age(namespace["metadata"].get("creationTimestamp"), now),
    ]


def _default_cells(obj: Obj, now: dt.datetime) -> Cells:
    return [obj["metadata"]["name"], age(obj["metadata"].get("creationTimestamp"), now)]


PRINTERS: dict[str, tuple[Callable[[], list[Obj]], Callable[[Obj, dt.datetime], Cells]]] = {
    "Pod": (_pod_columns, _pod_cells),
    "Node": (_node_columns, _node_cells),
    "Event": (_event_columns, _event_cells),
    "Namespace": (_namespace_columns, _namespace_cells),
}


def _printer_columns(resource: Resource, version: str) -> list[Obj]:
    entry = crd.version(resource.group, resource.kind, version) or {}
    return list(entry.get("additionalPrinterColumns") or []) or [
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": _doc(META, "creationTimestamp"),
        }
    ]


_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\?\(@\.([\w.-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]")


def jsonpath(obj: Any, path: str) -> Any:
    """The value at a CRD printer column's simple JSONPath (``.status.pendingWorkloads``,
    ``.status.conditions[?(@.type=='Admitted')].status``), or None."""
    value = obj
    for key, index, field, wanted_value in _STEP.findall(path):
        if key:
            value = value.get(key) if isinstance(value, Mapping) else None
        elif index:
            value = (
                value[int(index)] if isinstance(value, list) and len(value) > int(index) else None
            )
        else:
            items = value if isinstance(value, list) else []
            value = next(
                (i for i in items if isinstance(i, Mapping) and str(i.get(field)) == wanted_value),
                None,
            )
        if value is None:
            return None
    return value


def _crd_cell(column: Obj, obj: Obj, now: dt.datetime) -> Any:
    value = jsonpath(obj, column["jsonPath"])
    kind = column.get("type", "string")
    if value is None:
        return None
    if kind == "string":
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        return age(value, now)
    return None


def columns(resource: Resource, version: str) -> list[Obj]:
    if resource.kind in PRINTERS and not resource.crd:
        return PRINTERS[resource.kind][0]()
    if resource.crd:
        return [_name()] + [
            {
                "name": c["name"],
                "type": c.get("type", "string"),
                "format": c.get("format", ""),
                "description": c.get("description", ""),
                "priority": c.get("priority", 0),
            }
            for c in _printer_columns(resource, version)
        ]
    return [_name(), _age()]


def cells(resource: Resource, version: str, obj: Obj, now: dt.datetime) -> Cells:
    if resource.kind in PRINTERS and not resource.crd:
        return PRINTERS[resource.kind][1](obj, now)
    if resource.crd:
        printer = _printer_columns(resource, version)
        return [obj["metadata"]["name"]] + [_crd_cell(c, obj, now) for c in printer]
    return _default_cells(obj, now)


def row_object(obj: Obj, include: str, output: Callable[[Obj], Obj]) -> Obj | None:
    if include in ("", "Metadata"):
        return {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        }
    if include == "Object":
        return output(obj)
    if include == "None":
        return None
    raise APIError(400, f'unrecognized includeObject value: "{include}"')


def table(
    resource: Resource,
    version: str,
    objects: Iterable[Obj],
    metadata: Obj,
    *,
    include: str = "",
    output: Callable[[Obj], Obj] = lambda o: o,
    headers: bool = True,
    now: dt.datetime | None = None,
) -> Obj:
    """A meta.k8s.io/v1 Table of ``objects`` (a list's items, or one object)."""
    now = now or dt.datetime.now(dt.UTC)
    if include not in ("", "Metadata", "Object", "None"):
        raise APIError(400, f'unrecognized includeObject value: "{include}"')
    rows = []
    for obj in objects:
        row: Obj = {"cells": cells(resource, version, obj, now)}
        if resource.kind == "Pod" and (conditions := _pod_conditions(obj)):
            row["conditions"] = conditions
        row["object"] = row_object(obj, include, output)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns(resource, version) if headers else None,
        "rows": rows,
    }
