"""The poller: LIST the cluster, write the observed tables in bulk, record drift.

Writes only observed state (nodes, pods, managed objects, drift, the sync record); desired
state is never touched. Rows that did not change since the last poll are not written: each
row carries a hash of its content, compared before anything goes to PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from fleet.models import Drift, NodePool, ObservedNode, ObservedPod
from kube import Gateway, KubeError, NotFound, ObjectRef
from portal.labels import MANAGED_BY_KEY, MANAGED_BY_VALUE
from portal.quantity import QuantityError, parse_quantity
from sync.models import AppliedObject, ObservedObject, SyncRun

log = logging.getLogger(__name__)
GPU_PREFIX = "nvidia.com/"
NODE_COLUMNS = (
    "name",
    "uid",
    "gpu_product",
    "gpu_count",
    "gpu_memory_mib",
    "mig_capable",
    "mig_strategy",
    "mig_config",
    "mig_config_state",
    "mig_config_by",
    "pool_label",
    "capacity",
    "allocatable",
    "allocated",
    "labels",
    "taints",
    "unschedulable",
    "ready",
    "resource_version",
    "row_hash",
    "first_seen",
    "last_changed",
    "gone_since",
)
POD_COLUMNS = (
    "namespace",
    "name",
    "uid",
    "node_name",
    "phase",
    "gpu_requests",
    "priority",
    "queue_name",
    "group_name",
    "pending_reason",
    "pending_message",
    "created_at",
    "row_hash",
    "last_changed",
)
_JSON_COLUMNS = {"capacity", "allocatable", "allocated", "labels", "taints", "gpu_requests"}


def _int(value: Any) -> int:
    if type(value) is int:
        return value
    if type(value) is str and value.isdigit():
        return int(value)
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def _digest(values: Sequence[Any]) -> str:
    return hashlib.blake2b(
        orjson.dumps(values, option=orjson.OPT_SORT_KEYS), digest_size=12
    ).hexdigest()


def pod_gpu_requests(pod: dict[str, Any]) -> dict[str, int]:
    """GPU resources a pod asks for (sum of containers; at least the largest init container).

    On the poller's hot path (once per pod per poll): plain dicts, no Counter.
    """
    total: dict[str, int] = {}
    spec = pod.get("spec") or {}
    for container in spec.get("containers") or ():
        resources = container.get("resources")
        asked = resources and (resources.get("requests") or resources.get("limits"))
        if asked:
            for name, value in asked.items():
                if name.startswith(GPU_PREFIX):
                    total[name] = total.get(name, 0) + _int(value)
    for container in spec.get("initContainers") or ():
        resources = container.get("resources")
        asked = resources and (resources.get("requests") or resources.get("limits"))
        if asked:
            for name, value in asked.items():
                if name.startswith(GPU_PREFIX):
                    total[name] = max(total.get(name, 0), _int(value))
    return {k: v for k, v in total.items() if v} if total else total


def field_owner(meta: dict[str, Any], path: Sequence[str]) -> dict[str, str] | None:
    """The managedFields entry that last wrote a field (``f:``-keyed path), if any (pure)."""
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


def _owner_text(owner: dict[str, str] | None) -> str:
    return f"{owner['manager']} at {owner['time']}" if owner else ""


def other_writers(meta: dict[str, Any], ours: str) -> list[dict[str, str]]:
    """Who else wrote the object (managedFields), latest first (pure)."""
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
    """The observed facts of one node (pure)."""
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
        "gpu_product": labels.get("nvidia.com/gpu.product", ""),
        "gpu_count": _int(labels.get("nvidia.com/gpu.count")),
        "gpu_memory_mib": _int(labels.get("nvidia.com/gpu.memory")),
        "mig_capable": labels.get("nvidia.com/mig.capable") == "true",
        "mig_strategy": labels.get("nvidia.com/mig.strategy", ""),
        "mig_config": labels.get("nvidia.com/mig.config", ""),
        "mig_config_state": labels.get("nvidia.com/mig.config.state", ""),
        "mig_config_by": _owner_text(
            field_owner(meta, ("f:metadata", "f:labels", "f:nvidia.com/mig.config"))
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
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    reason = message = ""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            reason, message = condition.get("reason", ""), condition.get("message", "")
    created = meta.get("creationTimestamp")
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "node_name": spec.get("nodeName") or "",
        "phase": status.get("phase", ""),
        "gpu_requests": gpu,
        "priority": _int(spec.get("priority")),
        "queue_name": (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name", ""),
        "group_name": (meta.get("annotations") or {}).get("scheduling.k8s.io/group-name", ""),
        "pending_reason": reason,
        "pending_message": message,
        "created_at": created,
    }


def _copy_upsert(
    table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], conflict: Sequence[str]
) -> int:
    """COPY rows into a temporary table, then INSERT ... ON CONFLICT DO UPDATE (fast)."""
    count = 0
    cols = ", ".join(columns)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in conflict)
    with connection.cursor() as cursor:
        raw = cursor.cursor
        raw.execute(f"CREATE TEMP TABLE _upsert (LIKE {table} INCLUDING DEFAULTS) ON COMMIT DROP")
        raw.execute("ALTER TABLE _upsert DROP COLUMN id")
        with raw.copy(f"COPY _upsert ({cols}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        raw.execute(
            f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _upsert "
            f"ON CONFLICT ({', '.join(conflict)}) DO UPDATE SET {updates}"
        )
        raw.execute("DROP TABLE _upsert")
    return count


def _row(values: dict[str, Any], columns: Sequence[str]) -> list[Any]:
    return [orjson.dumps(values[c]).decode() if c in _JSON_COLUMNS else values[c] for c in columns]


def poll_cluster(*, gateway: Gateway) -> SyncRun:
    """One poll: 1. LIST nodes, non-terminal pods and the portal's objects; 2. write changed
    node and pod rows; 3. mark vanished nodes; 4. record drift; 5. record the run."""
    started = timezone.now()
    clock = time.monotonic()
    run = SyncRun.objects.create(started_at=started)
    try:
        # A poll holds a few hundred thousand small dicts at once; the cyclic collector
        # would walk them over and over while they are built (a 40 MB list decodes 2.5x
        # slower with it). They hold no cycles, so collection waits until the poll is done.
        collecting = gc.isenabled()
        gc.disable()
        try:
            nodes = gateway.list("v1", "Node", page_size=500)
            pods = gateway.list(
                "v1",
                "Pod",
                page_size=500,
                field_selector="status.phase!=Succeeded,status.phase!=Failed",
            )
            managed = _list_managed(gateway)
            workloads = _list_workloads(gateway)
            positions = _queue_positions(gateway) if workloads else {}
            podgroups = _list_podgroups(gateway)
            failures = gateway.list(
                "v1", "Event", field_selector="reason=FailedCreate", page_size=500
            )
            with transaction.atomic():
                changed = write_fleet(nodes, pods, now=started)
                if workloads is not None:
                    changed += write_workloads(workloads, now=started, positions=positions)
                if podgroups is not None:
                    changed += write_podgroups(podgroups, now=started)
                changed += write_create_failures(failures, now=started)
                write_managed(managed, now=started)
                record_drift(now=started)
        finally:
            if collecting:
                gc.enable()
        run.nodes, run.pods, run.changed = len(nodes), len(pods), changed
    except KubeError as exc:
        run.error = exc.message
        log.warning("poll failed: %s", exc.message)
    run.finished_at = timezone.now()
    run.duration_ms = int((time.monotonic() - clock) * 1000)
    run.save()
    return run


def write_fleet(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], *, now: dt.datetime
) -> int:
    """Write changed node and pod rows; returns how many rows were written or removed."""
    pool_label = settings.QM_POOL_LABEL
    allocated: dict[str, dict[str, int]] = {}
    pod_rows: dict[tuple[str, str], dict[str, Any]] = {}
    for pod in pods:
        gpu = pod_gpu_requests(pod)
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase", "")
        node_name = spec.get("nodeName")
        if gpu and node_name:
            on_node = allocated.setdefault(node_name, {})
            for name, amount in gpu.items():
                on_node[name] = on_node.get(name, 0) + amount
        if gpu or phase == "Pending":
            values = pod_values(pod, gpu)
            pod_rows[(values["namespace"], values["name"])] = values

    existing_nodes: dict[str, str] = {}
    first_seen: dict[str, dt.datetime] = {}
    gone: set[str] = set()
    for name, digest, gone_since, seen_first in ObservedNode.objects.values_list(
        "name", "row_hash", "gone_since", "first_seen"
    ):
        existing_nodes[name], first_seen[name] = digest, seen_first
        if gone_since is not None:
            gone.add(name)
    node_out = []
    seen = set()
    for node in nodes:
        name = (node.get("metadata") or {}).get("name", "")
        seen.add(name)
        values = node_values(node, dict(allocated.get(name, {})), pool_label)
        digest = _digest(
            [values[c] for c in NODE_COLUMNS if c not in ("resource_version",) and c in values]
        )
        if existing_nodes.get(name) == digest and name not in gone:
            continue
        values.update(
            row_hash=digest, first_seen=first_seen.get(name, now), last_changed=now, gone_since=None
        )
        node_out.append(_row(values, NODE_COLUMNS))
    written = (
        _copy_upsert(ObservedNode._meta.db_table, NODE_COLUMNS, node_out, ("name",))
        if node_out
        else 0
    )
    vanished = [n for n in existing_nodes if n not in seen and n not in gone]
    if vanished:
        written += ObservedNode.objects.filter(name__in=vanished).update(
            gone_since=now, last_changed=now
        )

    existing_pods = {
        (ns, n): (pk, h)
        for pk, ns, n, h in ObservedPod.objects.values_list("pk", "namespace", "name", "row_hash")
    }
    pod_out = []
    for key, values in pod_rows.items():
        digest = _digest([values[c] for c in POD_COLUMNS if c in values])
        if existing_pods.get(key, (None, None))[1] == digest:
            continue
        values.update(row_hash=digest, last_changed=now)
        pod_out.append(_row(values, POD_COLUMNS))
    written += (
        _copy_upsert(ObservedPod._meta.db_table, POD_COLUMNS, pod_out, ("namespace", "name"))
        if pod_out
        else 0
    )
    removed = [pk for key, (pk, _) in existing_pods.items() if key not in pod_rows]
    for start in range(0, len(removed), 5000):
        written += ObservedPod.objects.filter(pk__in=removed[start : start + 5000]).delete()[0]
    return written


def _managed_kinds() -> list[tuple[str, str]]:
    kinds = [
        ("v1", "Namespace"),
        ("v1", "ResourceQuota"),
        ("v1", "LimitRange"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
    ]
    if settings.QM_QUEUE_BACKEND == "volcano":
        kinds.append(("scheduling.volcano.sh/v1beta1", "Queue"))
    else:
        version = f"kueue.x-k8s.io/{settings.QM_KUEUE_API_VERSION}"
        kinds += [(version, k) for k in ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")]
    return kinds


def _list_managed(gateway: Gateway) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for api_version, kind in _managed_kinds():
        try:
            out[(api_version, kind)] = gateway.list(
                api_version, kind, label_selector=f"{MANAGED_BY_KEY}={MANAGED_BY_VALUE}"
            )
        except NotFound:
            out[(api_version, kind)] = []  # the CRD is not installed
    return out


def _list_workloads(gateway: Gateway) -> list[dict[str, Any]] | None:
    """Kueue workloads, or None with the Volcano backend or without the Kueue CRDs."""
    if settings.QM_QUEUE_BACKEND != "kueue":
        return None
    try:
        return gateway.list(
            f"kueue.x-k8s.io/{settings.QM_KUEUE_API_VERSION}", "Workload", page_size=500
        )
    except NotFound:
        return None


def _list_podgroups(gateway: Gateway) -> list[dict[str, Any]] | None:
    """Volcano PodGroups (gangs), or None without the Volcano CRDs (read whatever the
    queue backend: a Kueue cluster may run Volcano for gang jobs too)."""
    try:
        return gateway.list("scheduling.volcano.sh/v1beta1", "PodGroup", page_size=500)
    except NotFound:
        return None


def podgroup_values(group: dict[str, Any]) -> dict[str, Any]:
    meta = group.get("metadata") or {}
    spec = group.get("spec") or {}
    status = group.get("status") or {}
    unschedulable = next(
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
        "min_member": _int(spec.get("minMember")),
        "min_resources": dict(spec.get("minResources") or {}),
        "phase": status.get("phase", ""),
        "running": _int(status.get("running")),
        "reason": unschedulable.get("reason", ""),
        "message": unschedulable.get("message", ""),
    }


def _replace_rows(
    model: Any,
    current: dict[tuple[str, ...], dict[str, Any]],
    keys: tuple[str, ...],
    same: Callable[[Any, dict[str, Any]], bool],
    stamp: dict[str, Any],
) -> int:
    """Make ``model``'s rows equal ``current`` (key -> values): write those that differ (with
    ``stamp``), delete those gone; the number of rows written or deleted."""
    existing = {tuple(getattr(r, k) for k in keys): r for r in model.objects.all()}
    written = 0
    for key, values in current.items():
        row = existing.get(key)
        if row is not None and same(row, values):
            continue
        model.objects.update_or_create(
            **dict(zip(keys, key, strict=True)),
            defaults={**{k: v for k, v in values.items() if k not in keys}, **stamp},
        )
        written += 1
    gone = [row.pk for key, row in existing.items() if key not in current]
    if gone:
        written += model.objects.filter(pk__in=gone).delete()[0]
    return written


def write_podgroups(groups: list[dict[str, Any]], *, now: dt.datetime) -> int:
    """Replace the PodGroup rows that changed; drop those gone."""
    from fleet.models import ObservedPodGroup

    current = {}
    for item in groups:
        values = podgroup_values(item)
        current[(values["namespace"], values["name"])] = values
    return _replace_rows(
        ObservedPodGroup,
        current,
        ("namespace", "name"),
        lambda row, values: all(getattr(row, k) == v for k, v in values.items()),
        {"last_changed": now},
    )


def write_create_failures(events: list[dict[str, Any]], *, now: dt.datetime) -> int:
    """The last FailedCreate per involved object (Job, ReplicaSet, ...); older ones go."""
    from django.utils.dateparse import parse_datetime

    from fleet.models import ObservedCreateFailure

    latest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for event in events:
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
        seen = parse_datetime(stamp) if stamp else now
        values = {
            "message": event.get("message", ""),
            "count": _int(event.get("count")) or 1,
            "last_seen": seen or now,
        }
        if key not in latest or values["last_seen"] >= latest[key]["last_seen"]:
            latest[key] = values
    return _replace_rows(
        ObservedCreateFailure,
        latest,
        ("namespace", "kind", "name"),
        lambda row, values: all(getattr(row, k) == v for k, v in values.items()),
        {},
    )


def workload_values(workload: dict[str, Any]) -> dict[str, Any]:
    """Queue, admission and the reason a workload waits (pure)."""
    meta = workload.get("metadata") or {}
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    reserved = conditions.get("QuotaReserved") or {}
    admitted = conditions.get("Admitted") or {}
    finished = conditions.get("Finished") or {}
    requests: dict[str, int] = {}
    for pod_set in spec.get("podSets") or []:
        count = _int(pod_set.get("count", 1))
        for container in ((pod_set.get("template") or {}).get("spec") or {}).get(
            "containers"
        ) or []:
            resources = container.get("resources") or {}
            for name, value in (resources.get("requests") or resources.get("limits") or {}).items():
                try:
                    amount = parse_quantity(value) * count
                except QuantityError:
                    continue
                if amount.denominator == 1:
                    requests[name] = requests.get(name, 0) + int(amount)
    is_admitted = admitted.get("status") == "True"
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "queue_name": spec.get("queueName", ""),
        "cluster_queue": (status.get("admission") or {}).get("clusterQueue", ""),
        "admitted": is_admitted,
        "finished": finished.get("status") == "True",
        "reason": "" if is_admitted else reserved.get("reason", ""),
        "message": "" if is_admitted else reserved.get("message", ""),
        "requests": requests,
        "priority": _int(spec.get("priority") or 0),
        "created_at": meta.get("creationTimestamp"),
        "admitted_at": admitted.get("lastTransitionTime") if is_admitted else None,
    }


def _queue_positions(gateway: Gateway) -> dict[tuple[str, str], tuple[int, int]]:
    """(namespace, workload) -> positions in its ClusterQueue and LocalQueue, from Kueue's
    visibility API; empty where the API is not served or not allowed (one refusal ends it)."""
    from queues.models import ClusterQueue

    out: dict[tuple[str, str], tuple[int, int]] = {}
    for name in ClusterQueue.objects.values_list("name", flat=True):
        try:
            items = gateway.pending_workloads(name)
        except NotFound as exc:
            if "clusterqueues" in exc.message and name in exc.message:
                continue  # that queue is not in the cluster (yet)
            return out  # the API is not served
        except KubeError as exc:
            log.info("no queue positions: %s", exc.message)
            return out
        for item in items:
            meta = item.get("metadata") or {}
            out[(meta.get("namespace", ""), meta.get("name", ""))] = (
                _int(item.get("positionInClusterQueue")),
                _int(item.get("positionInLocalQueue")),
            )
    return out


def write_workloads(
    workloads: list[dict[str, Any]],
    *,
    now: dt.datetime,
    positions: dict[tuple[str, str], tuple[int, int]] | None = None,
) -> int:
    """Replace changed workload rows and drop those gone (a few thousand at most)."""
    from fleet.models import ObservedWorkload

    current = {}
    for item in workloads:
        values = workload_values(item)
        where = (positions or {}).get((values["namespace"], values["name"]))
        values["position"], values["position_in_local_queue"] = where or (None, None)
        current[(values["namespace"], values["name"])] = values

    def same(row: Any, values: dict[str, Any]) -> bool:
        return bool(
            all(
                str(getattr(row, k) or "") == str(v or "")
                for k, v in values.items()
                if k not in ("created_at", "admitted_at", "requests")
            )
            and row.requests == values["requests"]
        )

    return _replace_rows(
        ObservedWorkload, current, ("namespace", "name"), same, {"last_changed": now}
    )


def write_managed(
    managed: dict[tuple[str, str], list[dict[str, Any]]], *, now: dt.datetime
) -> None:
    """Replace the observed copies of the portal's objects (a few per team: small)."""
    ObservedObject.objects.all().delete()
    rows = []
    for (api_version, kind), items in managed.items():
        for item in items:
            meta = item.get("metadata") or {}
            body = {
                k: v
                for k, v in item.items()
                if k not in ("metadata", "status", "apiVersion", "kind")
            }
            body["metadata"] = {"labels": meta.get("labels") or {}}
            rows.append(
                ObservedObject(
                    api_version=api_version,
                    kind=kind,
                    namespace=meta.get("namespace", ""),
                    name=meta.get("name", ""),
                    spec=body,
                    status=item.get("status") or {},
                    resource_version=meta.get("resourceVersion", ""),
                    changed_by=other_writers(meta, settings.QM_FIELD_MANAGER),
                    last_seen=now,
                )
            )
    ObservedObject.objects.bulk_create(rows, batch_size=1000)


def _same(desired: Any, observed: Any) -> bool:
    if desired == observed:
        return True
    if (
        isinstance(desired, str | int)
        and isinstance(observed, str | int)
        and not isinstance(desired, bool)
    ):
        try:
            return parse_quantity(desired) == parse_quantity(observed)
        except QuantityError:
            return False
    return False


def _differences(desired: Any, observed: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Fields the portal sets whose live value differs (extra live fields are not drift)."""
    if isinstance(desired, dict):
        if not isinstance(observed, dict):
            return [(path, desired, observed)]
        out = []
        for key, value in desired.items():
            out += _differences(value, observed.get(key), f"{path}.{key}" if path else key)
        return out
    if isinstance(desired, list) and isinstance(observed, list) and len(desired) == len(observed):
        out = []
        for i, (d, o) in enumerate(zip(desired, observed, strict=True)):
            out += _differences(d, o, f"{path}[{i}]")
        return out
    return [] if _same(desired, observed) else [(path, desired, observed)]


def _text(value: Any) -> str:
    if value is None:
        return "(absent)"
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _who(owner: str) -> str:
    """``manager at time`` as a reader wants it (the portal's own writes say so)."""
    manager, _, stamp = owner.partition(" at ")
    if manager == settings.QM_FIELD_MANAGER:
        manager = "the portal"
    return f"{manager} at {stamp}" if stamp else manager


def record_drift(*, now: dt.datetime) -> None:
    """Open drift rows for what differs now, close those that no longer do."""
    found: dict[tuple[str, str, str], tuple[str, str, str]] = {}
    checked: set[str] = set()
    for pool in NodePool.objects.exclude(mig_config="").exclude(node_selector={}):
        # Only the pool's nodes are loaded (jsonb containment), not the whole fleet.
        nodes = ObservedNode.objects.filter(
            gone_since__isnull=True, labels__contains=pool.node_selector
        ).only("name", "mig_config", "mig_config_state", "mig_config_by", "allocatable")
        for node in nodes:
            if node.name in checked:
                continue  # a node that two pools select belongs to the first
            checked.add(node.name)
            if node.mig_config == pool.mig_config and node.mig_config_state != "failed":
                continue
            offers = ", ".join(
                f"{r.removeprefix('nvidia.com/')} x {a}" for r, a, _ in node.gpu_resources()
            )
            found[(Drift.Kind.MIG_LAYOUT, node.name, "nvidia.com/mig.config")] = (
                pool.mig_config,
                f"{node.mig_config or '(none)'} ({node.mig_config_state or 'no state'})",
                f"Pool {pool.name} intends {pool.mig_config}; "
                f"the node offers {offers or 'no GPU resources'}."
                + (f" Set by {_who(node.mig_config_by)}." if node.mig_config_by else ""),
            )
    from portal.manifests import collect_manifests  # desired state, rendered (pure)

    observed = {(o.kind, o.namespace, o.name): o for o in ObservedObject.objects.all()}
    applied = {
        (a.kind, a.namespace, a.name)
        for a in AppliedObject.objects.filter(outcome=AppliedObject.Outcome.APPLIED)
    }
    for manifest in collect_manifests():
        ref = ObjectRef.of(manifest)
        key = (ref.kind, ref.namespace, ref.name)
        if key not in applied:
            continue  # not applied yet (or refused): the apply record says why
        live = observed.get(key)
        subject = str(ref)
        if live is None:
            found[(Drift.Kind.MISSING, subject, "")] = (
                "present",
                "(absent)",
                "Deleted in the cluster after the portal applied it.",
            )
            continue
        wanted = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata")}
        wanted["metadata"] = {"labels": manifest["metadata"].get("labels", {})}
        writers = live.changed_by or []
        by = (
            " by "
            + ", ".join(f"{w['manager']} ({w['operation']}, {w['time']})" for w in writers[:2])
            if writers
            else ""
        )
        for path, desired, actual in _differences(wanted, live.spec):
            found[(Drift.Kind.OBJECT, subject, path)] = (
                _text(desired),
                _text(actual),
                f"Changed in the cluster outside the portal{by}.",
            )
    open_rows = {
        (d.kind, d.subject, d.field): d for d in Drift.objects.filter(resolved_at__isnull=True)
    }
    for key, (desired, actual, detail) in found.items():
        row = open_rows.get(key)
        if row is None:
            Drift.objects.create(
                kind=key[0],
                subject=key[1],
                field=key[2],
                desired=desired,
                observed=actual,
                detail=detail,
                first_seen=now,
                last_seen=now,
            )
        elif (row.desired, row.observed, row.detail) != (
            desired,
            actual,
            detail,
        ) or row.last_seen < now:
            Drift.objects.filter(pk=row.pk).update(
                desired=desired, observed=actual, detail=detail, last_seen=now
            )
    resolved = [row.pk for key, row in open_rows.items() if key not in found]
    if resolved:
        Drift.objects.filter(pk__in=resolved).update(resolved_at=now)


__all__ = ["poll_cluster", "record_drift", "write_fleet"]
