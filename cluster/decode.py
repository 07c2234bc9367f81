"""Pure decoding of what a poll lists: Kubernetes objects (plain dicts, as the gateway
decodes them with orjson) into the values of the observed rows. No I/O, no Django models.

On the poller's hot path (once per pod per poll): plain dicts and loops, no Counter.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpus import labels as gpu_labels
from portal.vocabulary.quantity import QuantityError, parse_quantity

GPU_PREFIX = gpu_labels.GPU_RESOURCE_PREFIX
Allocations = dict[str, dict[str, int]]  # node -> GPU resource -> amount requested by its pods
Key = tuple[str, str]  # (namespace, name)
# Kueue names the Workload on the pods of a Job it admitted (kueue.x-k8s.io/workload).
KUEUE_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"


def as_int(value: Any) -> int:
    """A count from a label, a status field or an annotation (0 when it is not one)."""
    if type(value) is int:
        return value
    if type(value) is str and value.isdigit():
        return int(value)
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def asked(container: Mapping[str, Any]) -> dict[str, Any]:
    """What a container asks for, resource by resource: its request, or its limit where it
    sets no request (the API server copies limits into unset requests; Kueue counts a
    limit as the request when only the limit is set)."""
    resources = container.get("resources") or {}
    return {**(resources.get("limits") or {}), **(resources.get("requests") or {})}


def pod_gpu_requests(pod: dict[str, Any]) -> dict[str, int]:
    """GPU resources a pod asks for (sum of containers; at least the largest init container).
    Each container as :func:`asked` reads it, without building its merged dict: this runs
    for every pod of every poll."""
    total: dict[str, int] = {}
    spec = pod.get("spec") or {}
    for container in spec.get("containers") or ():
        for name, value in _gpu_asked(container):
            total[name] = total.get(name, 0) + as_int(value)
    for container in spec.get("initContainers") or ():
        for name, value in _gpu_asked(container):
            total[name] = max(total.get(name, 0), as_int(value))
    return {k: v for k, v in total.items() if v} if total else total


def _gpu_asked(container: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The GPU resources of :func:`asked`: each request, and each limit with no request."""
    resources = container.get("resources")
    if not resources:
        return []
    requests = resources.get("requests") or {}
    out = [(n, v) for n, v in requests.items() if n.startswith(GPU_PREFIX)]
    for name, value in (resources.get("limits") or {}).items():
        if name.startswith(GPU_PREFIX) and name not in requests:
            out.append((name, value))
    return out


def gpu_offer(allocatable: Mapping[str, Any]) -> dict[str, int]:
    """The GPU resources of a node's allocatable (0 is absent: old MIG names linger at 0)."""
    return {
        name: int(value)
        for name, value in allocatable.items()
        if name.startswith(GPU_PREFIX) and str(value).isdigit() and int(value) > 0
    }


# What a stored pod row says of its pod: its source (:func:`pod_source`), its node and its
# GPU requests.
Stored = tuple[str, str, dict[str, int]]


@dataclass
class DecodedPods:
    """What a poll's pods come to: what they hold on each node, the rows of the pods the
    portal keeps (those asking for GPU resources, and every Pending pod: the explainer
    reads why it waits), and the kept pods listed at the version their row was decoded
    from (not decoded again)."""

    allocated: Allocations
    rows: dict[Key, dict[str, Any]]
    unchanged: set[Key]


def decode_pods(
    pods: Sequence[dict[str, Any]], stored: Mapping[Key, Stored] | None = None
) -> DecodedPods:
    """``stored``: what each stored row says of its pod. A pod listed at its row's source
    counts with the row's node and GPU requests; every other pod is decoded."""
    known = stored or {}
    allocated: Allocations = {}
    rows: dict[Key, dict[str, Any]] = {}
    unchanged: set[Key] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        source = pod_source(meta)
        row = known.get(key)
        if row is not None and source and row[0] == source:
            unchanged.add(key)
            _, node_name, gpu = row
        else:
            gpu = pod_gpu_requests(pod)
            node_name = (pod.get("spec") or {}).get("nodeName") or ""
            if (
                gpu
                or (pod.get("status") or {}).get("phase") == "Pending"
                or (pod.get("spec") or {}).get("resourceClaims")
            ):
                values = pod_values(pod, gpu)
                values["decoded_from"] = source
                rows[key] = values
        if gpu and node_name:
            on_node = allocated.setdefault(node_name, {})
            for name, amount in gpu.items():
                on_node[name] = on_node.get(name, 0) + amount
    return DecodedPods(allocated, rows, unchanged)


def pod_source(meta: Mapping[str, Any]) -> str:
    """What a pod row is decoded from: the decoder's fingerprint, the pod's uid and its
    resourceVersion (which the API server changes on every write). "" when the pod has no
    resourceVersion (it is then always decoded)."""
    version = meta.get("resourceVersion")
    return f"{POD_DECODER}:{meta.get('uid', '')}:{version}" if version else ""


def field_owner(meta: dict[str, Any], path: Sequence[str]) -> dict[str, str] | None:
    """The managedFields entry that last wrote a field (``f:``-keyed path), if any."""
    owners = []
    for entry in meta.get("managedFields") or []:
        node: Any = entry.get("fieldsV1") or {}
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
            if node is None:
                break
        else:
            owners.append(entry)
    if not owners:
        return None
    last = max(owners, key=lambda e: e.get("time") or "")
    return {
        "manager": last.get("manager", ""),
        "operation": last.get("operation", ""),
        "time": last.get("time") or "",
    }


def owner_text(owner: dict[str, str] | None) -> str:
    return f"{owner['manager']} at {owner['time']}" if owner else ""


def other_writers(meta: dict[str, Any], ours: str) -> list[dict[str, str]]:
    """Who else wrote the object (managedFields), latest first."""
    writers = [
        {
            "manager": e.get("manager", ""),
            "operation": e.get("operation", ""),
            "time": e.get("time") or "",
        }
        for e in meta.get("managedFields") or []
        if e.get("manager") != ours and not e.get("subresource")
    ]
    return sorted(writers, key=lambda w: w["time"], reverse=True)


def node_values(node: dict[str, Any], allocated: dict[str, int], pool_label: str) -> dict[str, Any]:
    """The observed facts of one node."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = node.get("status") or {}
    spec = node.get("spec") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return {
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "gpu_product": labels.get(gpu_labels.GPU_PRODUCT, ""),
        "gpu_count": as_int(labels.get(gpu_labels.GPU_COUNT)),
        "gpu_memory_mib": as_int(labels.get(gpu_labels.GPU_MEMORY)),
        "mig_capable": labels.get(gpu_labels.MIG_CAPABLE) == "true",
        "mig_strategy": labels.get(gpu_labels.MIG_STRATEGY, ""),
        "mig_config": labels.get(gpu_labels.MIG_CONFIG, ""),
        "mig_config_state": labels.get(gpu_labels.MIG_CONFIG_STATE, ""),
        "mig_config_by": owner_text(
            field_owner(meta, ("f:metadata", "f:labels", f"f:{gpu_labels.MIG_CONFIG}"))
        ),
        "pool_label": labels.get(pool_label, ""),
        "capacity": status.get("capacity") or {},
        "allocatable": status.get("allocatable") or {},
        "allocated": allocated,
        "labels": labels,
        "taints": spec.get("taints") or [],
        "unschedulable": bool(spec.get("unschedulable")),
        "ready": ready,
        "resource_version": meta.get("resourceVersion", ""),
    }


def pod_values(pod: dict[str, Any], gpu: dict[str, int]) -> dict[str, Any]:
    """The observed facts of one pod, with why it is not scheduled (if it is not)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    reason = message = ""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            reason, message = condition.get("reason", ""), condition.get("message", "")
    created = meta.get("creationTimestamp")
    owners = meta.get("ownerReferences") or []
    owner: dict[str, Any] = next((o for o in owners if o.get("controller")), {})
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "node_name": spec.get("nodeName") or "",
        "phase": status.get("phase", ""),
        "gpu_requests": gpu,
        "limit_defaulted": limit_defaulted(meta.get("annotations") or {}, spec),
        "priority": as_int(spec.get("priority")),
        "queue_name": pod_queue(meta.get("labels") or {}),
        "group_name": annotations.get("scheduling.k8s.io/group-name", ""),
        "workload_name": annotations.get(KUEUE_WORKLOAD_ANNOTATION, ""),
        "pending_reason": reason,
        "pending_message": message,
        "created_at": created,
        "started_at": status.get("startTime"),
        "owner_kind": owner.get("kind", ""),
        "owner_name": owner.get("name", ""),
        "resource_claims": pod_claims(spec, status),
    }


def pod_claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[dict[str, str]]:
    """A pod's DRA claims (``spec.resourceClaims``), each as the pod names it with the
    ResourceClaim it uses: the one it names, or the one made for it from its template (named
    in ``status.resourceClaimStatuses`` once made; "" until then), and that template."""
    asked = spec.get("resourceClaims")
    if not asked:
        return []
    made = {
        made.get("name", ""): made.get("resourceClaimName") or ""
        for made in status.get("resourceClaimStatuses") or ()
    }
    return [
        {
            "name": claim.get("name", ""),
            "claim": claim.get("resourceClaimName") or made.get(claim.get("name", ""), ""),
            "template": claim.get("resourceClaimTemplateName") or "",
        }
        for claim in asked
    ]


_LIMIT_RANGER = "kubernetes.io/limit-ranger"
_LIMIT_RANGER_PART = re.compile(
    r"^(?P<names>.+) (?:request|limit) for (?P<kind>init container|container) (?P<container>\S+)$"
)


def limit_defaulted(
    annotations: Mapping[str, str], spec: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The GPU resources the namespace's LimitRange set on a pod's containers that did not
    ask for them, per container, as the API server's LimitRanger records it (``LimitRanger
    plugin set: nvidia.com/gpu request for container sidecar; nvidia.com/gpu limit for
    container sidecar``: only the containers it defaulted are named), each with the amount
    that container now asks for (from ``spec``, the pod's)."""
    text = annotations.get(_LIMIT_RANGER, "")
    if not text.startswith("LimitRanger plugin set: "):
        return []
    found: dict[tuple[str, str], bool] = {}
    for part in text.removeprefix("LimitRanger plugin set: ").split("; "):
        match = _LIMIT_RANGER_PART.match(part.strip())
        if match:
            for name in (n.strip() for n in match["names"].split(",")):
                if name.startswith(GPU_PREFIX):
                    found[(match["container"], name)] = match["kind"] == "init container"
    amounts: dict[str, dict[str, int]] = {}
    for key in ("containers", "initContainers"):
        for container in (spec or {}).get(key) or ():
            asked = dict(_gpu_asked(container))
            amounts[str(container.get("name", ""))] = {n: as_int(v) for n, v in asked.items()}
    return [
        {
            "container": container,
            "init": init,
            "resource": resource,
            "amount": amounts.get(container, {}).get(resource, 0),
            "only": len(amounts) == 1,  # the pod's one container: said of the pod
        }
        for (container, resource), init in sorted(found.items())
    ]


def pod_queue(labels: dict[str, str]) -> str:
    """The LocalQueue a pod is in: the label its workload was given, or, on the pods of a
    Job that Kueue admitted, the one Kueue sets (it does not copy queue-name to them)."""
    return labels.get("kueue.x-k8s.io/queue-name") or labels.get(
        "kueue.x-k8s.io/local-queue-name", ""
    )


def podgroup_values(group: dict[str, Any]) -> dict[str, Any]:
    """A Volcano PodGroup: its gang size, phase, running members and why it waits."""
    meta = group.get("metadata") or {}
    spec = group.get("spec") or {}
    status = group.get("status") or {}
    unschedulable: dict[str, Any] = next(
        (
            c
            for c in status.get("conditions") or []
            if c.get("type") == "Unschedulable" and c.get("status") == "True"
        ),
        {},
    )
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "queue": spec.get("queue", ""),
        "min_member": as_int(spec.get("minMember")),
        "min_resources": dict(spec.get("minResources") or {}),
        "phase": status.get("phase", ""),
        "running": as_int(status.get("running")),
        "reason": unschedulable.get("reason", ""),
        "message": unschedulable.get("message", ""),
    }


def waiting_in(workload: Mapping[str, Any]) -> Key | None:
    """The (namespace, LocalQueue) a Workload may wait in a line of: one that holds no
    quota (no ``status.admission``) and has not finished; None for any other (Kueue's
    visibility API lists only the workloads waiting in a ClusterQueue's line)."""
    status = workload.get("status") or {}
    finished = any(
        c.get("type") == "Finished" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    if status.get("admission") or finished:
        return None
    return (
        (workload.get("metadata") or {}).get("namespace", ""),
        (workload.get("spec") or {}).get("queueName", ""),
    )


def workload_values(workload: dict[str, Any]) -> dict[str, Any]:
    """Queue, admission, the reason a workload waits, and its evictions.

    Kueue keeps one condition per type: after an eviction ``Evicted`` is True (reason
    ``PodsReadyTimeout``, ``Preempted`` …) until the workload is admitted again, when it turns
    False with a "Previously: …" message; ``Requeued`` turns True when it is back in line.
    The wait that counts is the current one: from the latest requeue (or the creation) to
    the latest admission, never the time it ran before it was evicted."""
    meta = workload.get("metadata") or {}
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    reserved = conditions.get("QuotaReserved") or {}
    admitted = conditions.get("Admitted") or {}
    finished = conditions.get("Finished") or {}
    is_admitted = admitted.get("status") == "True"
    created = parse_time(meta.get("creationTimestamp"))
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "queue_name": spec.get("queueName", ""),
        "cluster_queue": (status.get("admission") or {}).get("clusterQueue", ""),
        "admitted": is_admitted,
        "finished": finished.get("status") == "True",
        # Kueue's own time: a sample minutes later is not when the work ended.
        "finished_at": (
            parse_time(finished.get("lastTransitionTime"))
            if finished.get("status") == "True"
            else None
        ),
        "reason": "" if is_admitted else reserved.get("reason", ""),
        "message": "" if is_admitted else reserved.get("message", ""),
        "requests": charged_requests(status) or workload_requests(spec),
        "flavors": admitted_flavors(status),
        "priority": as_int(spec.get("priority") or 0),
        "created_at": created,
        "admitted_at": parse_time(admitted.get("lastTransitionTime")) if is_admitted else None,
        # False only when Kueue says so (a Kueue without waitForPodsReady writes nothing).
        "pods_ready": (conditions.get("PodsReady") or {}).get("status", "True") == "True",
        "conditions": kept_conditions(status),
        **eviction_values(status, conditions, created),
    }


CONDITION_KEYS = ("type", "status", "reason", "message", "lastTransitionTime")


def kept_conditions(status: dict[str, Any]) -> list[dict[str, str]]:
    """A workload's conditions as the poll keeps them (its story on the workload's page):
    Kueue's five keys of each, nothing else (``observedGeneration`` changes with no news)."""
    return [
        {key: str(c[key]) for key in CONDITION_KEYS if c.get(key) not in (None, "")}
        for c in status.get("conditions") or []
        if isinstance(c, dict) and c.get("type")
    ]


def admitted_flavors(status: dict[str, Any]) -> dict[str, str]:
    """The flavor Kueue assigned each resource (``status.admission.podSetAssignments[]
    .flavors``, the pod sets merged); empty while the workload holds no quota."""
    flavors: dict[str, str] = {}
    for assignment in (status.get("admission") or {}).get("podSetAssignments") or []:
        flavors.update({str(k): str(v) for k, v in (assignment.get("flavors") or {}).items()})
    return flavors


def quantity(value: Any) -> Fraction | None:
    """A Kubernetes quantity's exact value, None when it is not one (``parse_quantity``).
    A poll meets the same few amounts in 50,000 workloads: each text is parsed once."""
    kind = type(value)
    return _quantity(value) if kind is str or kind is int else None


@functools.lru_cache(maxsize=4096, typed=True)
def _quantity(value: str | int) -> Fraction | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def charged_requests(status: dict[str, Any]) -> dict[str, int]:
    """What Kueue charges a workload, in all: its admission's ``resourceUsage`` per pod set,
    or, while it waits, ``status.resourceRequests`` (both totals of the pod set, with the
    LimitRange defaults applied: a Job with only ``limits: {gpu: 20}`` in a namespace whose
    LimitRange defaults gpu to 1 is charged 1). Empty when Kueue wrote neither."""
    sets = [
        a.get("resourceUsage") or {}
        for a in (status.get("admission") or {}).get("podSetAssignments") or []
    ] or [r.get("resources") or {} for r in status.get("resourceRequests") or []]
    total: dict[str, int] = {}
    for resources in sets:
        for name, value in resources.items():
            amount = quantity(value)
            if amount is not None and amount.denominator == 1:
                total[name] = total.get(name, 0) + int(amount)
    return total


def workload_requests(spec: dict[str, Any]) -> dict[str, int]:
    """What the pod sets ask for in all (requests, else limits), whole amounts only."""
    requests: dict[str, int] = {}
    for pod_set in spec.get("podSets") or []:
        count = as_int(pod_set.get("count", 1))
        for container in ((pod_set.get("template") or {}).get("spec") or {}).get(
            "containers"
        ) or []:
            for name, value in asked(container).items():
                amount = quantity(value)
                if amount is None:
                    continue
                amount *= count
                if amount.denominator == 1:
                    requests[name] = requests.get(name, 0) + int(amount)
    return requests


def eviction_values(
    status: dict[str, Any], conditions: dict[Any, dict[str, Any]], created: dt.datetime | None
) -> dict[str, Any]:
    """How often Kueue evicted the workload, why (the last time), when (while it is still
    evicted), when it goes back in line after its back-off, and since when it waits now."""
    evicted = conditions.get("Evicted") or {}
    requeued = conditions.get("Requeued") or {}
    stats = (status.get("schedulingStats") or {}).get("evictions") or []
    count = sum(as_int(e.get("count")) for e in stats)
    count = (
        count or as_int((status.get("requeueState") or {}).get("count")) or (1 if evicted else 0)
    )
    reason = ""
    if evicted.get("status") == "True":
        reason = evicted.get("reason", "")
    elif len({e.get("reason") for e in stats}) == 1:
        reason = stats[0].get("reason", "")
    elif (evicted.get("message") or "").startswith("Previously: Exceeded the PodsReady timeout"):
        reason = "PodsReadyTimeout"
    return {
        "evictions": count,
        "evicted_reason": reason,
        "evicted_at": (
            parse_time(evicted.get("lastTransitionTime"))
            if evicted.get("status") == "True"
            else None
        ),
        "requeue_at": parse_time((status.get("requeueState") or {}).get("requeueAt")),
        "queued_at": parse_time(requeued.get("lastTransitionTime")) or created,
    }


# The LocalQueue of the Job an event names, which the poll adds to the event (it reads the Job).
QUEUE_OF_INVOLVED = "quartermaster.io/queue-of-involved-object"


def create_failure_values(
    events: Sequence[dict[str, Any]], *, now: dt.datetime
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The last FailedCreate event per involved object (namespace, kind, name); other
    events (the poll asks for FailedCreate only) are not refusals."""
    latest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for event in events:
        if event.get("reason", "FailedCreate") != "FailedCreate":
            continue
        involved = event.get("involvedObject") or {}
        key = (
            involved.get("namespace") or (event.get("metadata") or {}).get("namespace", ""),
            involved.get("kind", ""),
            involved.get("name", ""),
        )
        stamp = (
            event.get("lastTimestamp")
            or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp")
        )
        values = {
            "queue_name": event.get(QUEUE_OF_INVOLVED, ""),
            "message": event.get("message", ""),
            "count": as_int(event.get("count")) or 1,
            "last_seen": parse_time(stamp) or now,
        }
        if key not in latest or values["last_seen"] >= latest[key]["last_seen"]:
            latest[key] = values
    return latest


# Kueue names the workload that preempted another by its UID, in the victim's Preempted
# event and conditions: "Preempted to accommodate a workload (UID: <uid>, JobUID: <uid>) due
# to ..." (recorded in tests/data/kueue-samples/events-workload-story.json).
PREEMPTOR_UID = re.compile(r"\(UID: ([0-9a-f-]{8,}|UNKNOWN), JobUID: [^)]*\)")


def workload_event_values(event: dict[str, Any]) -> dict[str, Any] | None:
    """What the poll keeps of an Event about a Kueue Workload (a core/v1 Event as the API
    serves it, whichever recorder wrote it: the events.k8s.io recorder Kueue uses leaves
    ``count`` and the first and last timestamps empty and counts repeats in ``series``),
    or None for an Event about anything else. ``preemptor_uid`` is the UID its message
    names (a Preempted event's preemptor), for the writer to turn into a name."""
    involved = event.get("involvedObject") or event.get("regarding") or {}
    if involved.get("kind") != "Workload" or not involved.get("name"):
        return None
    meta = event.get("metadata") or {}
    series = event.get("series") or {}
    created = meta.get("creationTimestamp")
    first = parse_time(event.get("firstTimestamp") or event.get("eventTime") or created)
    last = parse_time(
        series.get("lastObservedTime")
        or event.get("lastTimestamp")
        or event.get("eventTime")
        or created
    )
    message = str(event.get("message") or event.get("note") or "")
    uid = PREEMPTOR_UID.search(message)
    return {
        "namespace": involved.get("namespace") or meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "workload_name": involved["name"],
        "type": str(event.get("type") or "")[:16],
        "reason": str(event.get("reason") or "")[:128],
        "message": message,
        "count": max(as_int(series.get("count")), as_int(event.get("count")), 1),
        "first_seen": first or last,
        "last_seen": last or first,
        "preemptor_uid": uid.group(1) if uid else "",
    }


def parse_time(stamp: str | None) -> dt.datetime | None:
    """An RFC 3339 time of the API server (``2026-11-30T10:42:00Z``, or with fractions)."""
    if not stamp:
        return None
    try:
        return dt.datetime.fromisoformat(stamp)
    except ValueError:
        return None


def observed_object_values(item: dict[str, Any], *, field_manager: str) -> dict[str, Any]:
    """One of the portal's objects as the cluster has it: the fields that can drift (its
    spec and labels), its status, and who else wrote it."""
    meta = item.get("metadata") or {}
    body = {k: v for k, v in item.items() if k not in ("metadata", "status", "apiVersion", "kind")}
    body["metadata"] = {"labels": meta.get("labels") or {}}
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "spec": body,
        "status": item.get("status") or {},
        "resource_version": meta.get("resourceVersion", ""),
        "changed_by": other_writers(meta, field_manager),
    }


_QUOTA_REFUSAL = re.compile(
    r'pods "(?P<pod>[^"]*)" is forbidden: exceeded quota: (?P<quota>[^,]+), '
    r"requested: (?P<requested>.+?), used: (?P<used>.+?), limited: (?P<limited>.+)$"
)


@dataclass(frozen=True)
class QuotaRefusal:
    """The API server refusing a pod over a ResourceQuota: per quota item, what the pod asks,
    what is in use and the hard limit (quantities as written)."""

    quota: str
    requested: dict[str, str]
    used: dict[str, str]
    limited: dict[str, str]


def _pairs(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def quota_refusal(message: str) -> QuotaRefusal | None:
    """The refusal in a FailedCreate message ("Error creating: pods … is forbidden: exceeded
    quota: …"), or None for any other."""
    found = _QUOTA_REFUSAL.search(message.removeprefix("Error creating: "))
    if found is None:
        return None
    return QuotaRefusal(
        found["quota"], _pairs(found["requested"]), _pairs(found["used"]), _pairs(found["limited"])
    )


def _fingerprint(*parts: Any) -> str:
    """A short hash of the code that turns a pod into its row: a release that decodes pods
    differently decodes every pod again at its first poll."""
    text = "".join(inspect.getsource(p) if callable(p) else str(p) for p in parts)
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


POD_DECODER = _fingerprint(
    pod_values,
    pod_claims,
    pod_gpu_requests,
    _gpu_asked,
    as_int,
    limit_defaulted,
    pod_queue,
    _LIMIT_RANGER_PART.pattern,
)

WORKLOAD_DECODER = _fingerprint(
    workload_values,
    kept_conditions,
    CONDITION_KEYS,
    admitted_flavors,
    charged_requests,
    workload_requests,
    asked,
    eviction_values,
    parse_time,
    as_int,
    parse_quantity,
)


def workload_source(item: Mapping[str, Any]) -> str:
    """What a Workload row is decoded from: the decoder's fingerprint, the API version it
    was listed at, the Workload's uid and its resourceVersion, as :func:`pod_source` ("" when
    it has no resourceVersion: it is then always decoded). Its place in line is not in it:
    the visibility API says that apart."""
    meta = item.get("metadata") or {}
    version = meta.get("resourceVersion")
    if not version:
        return ""
    return f"{WORKLOAD_DECODER}:{item.get('apiVersion', '')}:{meta.get('uid', '')}:{version}"


# ---------------------------------------------------------------- Dynamic Resource Allocation
# resource.k8s.io/v1 as the API server returns it: a device attribute is one of
# {"string": …}, {"int": …}, {"bool": …}, {"version": …}; a capacity or a counter is
# {"value": <quantity>} (a capacity may add a requestPolicy). The rows keep the plain values.

_DRIVER_IN_CEL = re.compile(r"""device\.driver\s*==\s*(?:'([^']*)'|"([^"]*)")""")
_ATTRIBUTE_KINDS = ("string", "int", "bool", "version")
_KINDS = frozenset(_ATTRIBUTE_KINDS)


def dra_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """A device's attributes as name -> value (a version as its text)."""
    out: dict[str, Any] = {}
    kinds = _KINDS
    for name, typed in (attributes or {}).items():
        if typed.__class__ is not dict:
            continue
        if len(typed) == 1:  # the API's one value of its one kind: the usual case, fast
            for kind, value in typed.items():
                if kind in kinds:
                    out[name] = value
            continue
        for kind in _ATTRIBUTE_KINDS:
            if kind in typed:
                out[name] = typed[kind]
                break
    return out


def dra_amounts(amounts: Mapping[str, Any] | None) -> dict[str, str]:
    """A device's capacity, or a counter set's counters, as name -> quantity text."""
    return {
        str(name): str(amount.get("value", "")) if isinstance(amount, dict) else str(amount)
        for name, amount in (amounts or {}).items()
    }


def _cel_expressions(selectors: Sequence[Any] | None) -> list[str]:
    return [
        str((s.get("cel") or {}).get("expression", ""))
        for s in selectors or ()
        if isinstance(s, dict) and s.get("cel")
    ]


def device_class_values(item: dict[str, Any]) -> dict[str, Any]:
    """A DeviceClass: its CEL selectors, the driver they name (``device.driver == '…'``,
    "" when none does) and the extended resource name it answers for, if any."""
    spec = item.get("spec") or {}
    selectors = _cel_expressions(spec.get("selectors"))
    drivers = [m[0] or m[1] for text in selectors for m in _DRIVER_IN_CEL.findall(text)]
    return {
        "name": (item.get("metadata") or {}).get("name", ""),
        "driver": drivers[0] if drivers else "",
        "selectors": selectors,
        "extended_resource": spec.get("extendedResourceName") or "",
    }


def _device_taints(taints: Sequence[Any] | None) -> dict[str, Any]:
    """A device's taints (KEP-5055: the driver's health check sets them, e.g.
    ``gpu.nvidia.com/xid``), as ``{"taints": [...]}``, or nothing for the usual untainted
    device (the rows stay as small as they were)."""
    kept = [
        {
            "key": str(t.get("key", "")),
            "value": str(t.get("value") or ""),
            "effect": str(t.get("effect", "")),
            "timeAdded": str(t.get("timeAdded") or ""),
        }
        for t in taints or ()
        if isinstance(t, dict)
    ]
    return {"taints": kept} if kept else {}


def _tolerations(tolerations: Sequence[Any] | None) -> dict[str, Any]:
    """A request's device tolerations as ``{"tolerations": [...]}`` (nothing when none)."""
    kept = [
        {
            "key": str(t.get("key") or ""),
            "operator": str(t.get("operator") or "Equal"),
            "value": str(t.get("value") or ""),
            "effect": str(t.get("effect") or ""),
        }
        for t in tolerations or ()
        if isinstance(t, dict)
    ]
    return {"tolerations": kept} if kept else {}


def resource_slice_values(item: dict[str, Any]) -> dict[str, Any]:
    """A ResourceSlice: the node, driver and pool it publishes for, its devices (name,
    attributes, capacity, the counters each consumes, the taints a tainted one carries) and
    the counter sets it shares (KEP-4815 partitionable devices: a MIG-capable GPU's slices
    count against them)."""
    spec = item.get("spec") or {}
    pool = spec.get("pool") or {}
    devices = [
        {
            "name": device.get("name", ""),
            "attributes": dra_attributes(device.get("attributes")),
            "capacity": dra_amounts(device.get("capacity")),
            "consumesCounters": [
                {
                    "counterSet": use.get("counterSet", ""),
                    "counters": dra_amounts(use.get("counters")),
                }
                for use in device.get("consumesCounters") or ()
            ],
            **_device_taints(device.get("taints")),
        }
        for device in spec.get("devices") or ()
    ]
    return {
        "name": (item.get("metadata") or {}).get("name", ""),
        "node_name": spec.get("nodeName") or "",
        "driver": spec.get("driver", ""),
        "pool": pool.get("name", ""),
        "pool_generation": as_int(pool.get("generation")),
        "slice_count": as_int(pool.get("resourceSliceCount")),
        "devices": devices,
        "shared_counters": [
            {"name": counters.get("name", ""), "counters": dra_amounts(counters.get("counters"))}
            for counters in spec.get("sharedCounters") or ()
        ],
    }


def _device_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """One request (``exactly``) or sub-request of a claim: class, mode, count, selectors
    and the device taints it tolerates."""
    mode = request.get("allocationMode") or "ExactCount"
    return {
        "device_class": request.get("deviceClassName", ""),
        "mode": mode,
        "count": as_int(request.get("count") or 1) if mode == "ExactCount" else None,
        "selectors": _cel_expressions(request.get("selectors")),
        **_tolerations(request.get("tolerations")),
    }


def claim_requests(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What a ResourceClaim (or a template's claim spec) asks for, request by request: the
    exact one, or the alternatives of ``firstAvailable`` in their order."""
    out = []
    for request in (spec.get("devices") or {}).get("requests") or ():
        name = request.get("name", "")
        if request.get("firstAvailable"):
            out.append(
                {
                    "name": name,
                    "first_available": [
                        {"name": sub.get("name", ""), **_device_request(sub)}
                        for sub in request["firstAvailable"]
                    ],
                }
            )
        else:
            out.append({"name": name, **_device_request(request.get("exactly") or request)})
    return out


def _allocated_node(allocation: Mapping[str, Any]) -> str:
    """The node an allocation is bound to, where its node selector names one by name (the
    scheduler's ``metadata.name In [node]`` for node-local devices)."""
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or ():
        for match in term.get("matchFields") or ():
            values = match.get("values") or []
            if match.get("key") == "metadata.name" and match.get("operator") == "In" and values:
                return str(values[0])
    return ""


def resource_claim_values(item: dict[str, Any]) -> dict[str, Any]:
    """A ResourceClaim: what it asks for, the devices allocated to it (driver, pool,
    device: a slice's device), on which node, who it is reserved for, and its state."""
    meta = item.get("metadata") or {}
    status = item.get("status") or {}
    allocation = status.get("allocation") or {}
    owner: dict[str, Any] = next(
        (o for o in meta.get("ownerReferences") or () if o.get("controller")), {}
    )
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "state": "allocated" if allocation else "pending",
        "requests": claim_requests(item.get("spec") or {}),
        "allocated": [
            {
                "request": result.get("request", ""),
                "driver": result.get("driver", ""),
                "pool": result.get("pool", ""),
                "device": result.get("device", ""),
            }
            for result in (allocation.get("devices") or {}).get("results") or ()
        ],
        "node_name": _allocated_node(allocation),
        "reserved_for": [
            {"resource": r.get("resource", ""), "name": r.get("name", "")}
            for r in status.get("reservedFor") or ()
        ],
        "owner_kind": owner.get("kind", ""),
        "owner_name": owner.get("name", ""),
        "created_at": parse_time(meta.get("creationTimestamp")),
    }


DRA_DECODER = _fingerprint(
    resource_slice_values,
    resource_claim_values,
    dra_attributes,
    dra_amounts,
    claim_requests,
    _device_request,
    _allocated_node,
    _cel_expressions,
)


def dra_source(meta: Mapping[str, Any]) -> str:
    """What a ResourceSlice's or ResourceClaim's row is decoded from: the decoder's
    fingerprint, the object's uid and its resourceVersion ("" without one: then it is always
    decoded), as ``pod_source``."""
    version = meta.get("resourceVersion")
    return f"{DRA_DECODER}:{meta.get('uid', '')}:{version}" if version else ""
