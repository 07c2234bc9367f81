"""Taking a sample of what the portal observes (after a poll), and rolling samples up into
hours and days, with retention."""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter, defaultdict
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Sum
from django.utils import timezone

from cluster import dra
from cluster.dra_held import DraHeld
from cluster.models import (
    Cluster,
    ObservedNode,
    ObservedObject,
    ObservedPod,
    ObservedResourceClaim,
    ObservedResourceSlice,
    ObservedWorkload,
    SyncRun,
)
from fleet.membership import pool_of
from fleet.models import NodePool
from gpus.catalog import model_for_product
from portal.vocabulary.quantity import QuantityError, parse_quantity
from queues.models import ClusterQueue, LocalQueue
from queues.rules import quota_entries
from tenants.models import Namespace, QuotaItem
from usage.compute import integrate, mig_weight
from usage.models import DRA_GPUS, Rollup, Sample, SamplingState, WorkloadRecord

log = logging.getLogger(__name__)
SERIES = ("cluster_id", "kind", "owner", "scope", "flavor", "resource")
MEASURES = ("used", "requested", "borrowed", "lent", "capacity", "pending", "gpu_share")


def _state() -> SamplingState:
    state = SamplingState.objects.select_for_update().first()
    return state or SamplingState.objects.create()


def _number(text: Any) -> float:
    try:
        return float(parse_quantity(str(text)))
    except (QuantityError, ValueError):
        return 0.0


def team_rows(now: dt.datetime, cluster_id: int) -> list[Sample]:
    """Per team namespace of the cluster and GPU resource: requested, running, pending pods,
    quota."""
    nodes = ObservedNode.objects.on(cluster_id).filter(gone_since__isnull=True)
    model_of = {
        n.name: model_for_product(n.gpu_product) if n.gpu_product else None
        for n in nodes.only("name", "gpu_product")
    }
    team_of = dict(
        Namespace.objects.filter(cluster_id=cluster_id).values_list("name", "team__slug")
    )
    rows: dict[tuple[str, str, str], dict[str, float]] = defaultdict(
        lambda: {"used": 0.0, "requested": 0.0, "pending": 0.0, "gpu_share": 0.0, "capacity": -1.0}
    )
    by_dra = DraHeld(cluster_id)
    for pod in (
        ObservedPod.objects.on(cluster_id)
        .filter(namespace__in=team_of)
        .only("namespace", "node_name", "phase", "gpu_requests", "resource_claims")
    ):
        asked = {(resource, ""): count for resource, count in (pod.gpu_requests or {}).items()}
        for key, count in by_dra.of_pod(pod).items():
            asked[key] = asked.get(key, 0) + count
        for (resource, device_class), count in asked.items():
            row = rows[(pod.namespace, resource, device_class)]
            row["requested"] += count
            if pod.phase == "Running" and pod.node_name:
                row["used"] += count
                model = model_of.get(pod.node_name) or by_dra.model_of(pod.node_name)
                row["gpu_share"] += count * mig_weight(model, resource)
            elif pod.phase == "Pending":
                row["pending"] += 1
    for item in QuotaItem.objects.filter(
        namespace__cluster_id=cluster_id, resource__startswith="requests.nvidia.com/"
    ).select_related("namespace"):
        quota = (item.namespace.name, item.resource.removeprefix("requests."), "")
        rows[quota]["capacity"] = _number(item.hard)
    return [
        Sample(
            cluster_id=cluster_id,
            time=now,
            kind=Sample.Kind.TEAM,
            owner=team_of.get(namespace, ""),
            scope=namespace,
            flavor=device_class,
            resource=resource,
            **values,
        )
        for (namespace, resource, device_class), values in rows.items()
    ]


def fleet_models(cluster_id: int | None = None) -> list[str]:
    """The GPU models of a cluster's fleet (every cluster's: None), most nodes first."""
    counts: Counter[str] = Counter()
    nodes = (
        ObservedNode.objects.on_every_cluster()
        if cluster_id is None
        else ObservedNode.objects.on(cluster_id)
    ).filter(gone_since__isnull=True)
    for product in nodes.values_list("gpu_product", flat=True):
        model = model_for_product(product) if product else None
        if model:
            counts[model] += 1
    return [m for m, _ in counts.most_common()]


def queue_rows(now: dt.datetime, cluster_id: int) -> list[Sample]:
    """Per ClusterQueue of the cluster, flavor and GPU resource: in use, borrowed, lent
    (estimated), nominal."""
    models = fleet_models(cluster_id)
    observed = ObservedObject.objects.on(cluster_id).filter(kind="ClusterQueue")
    status = {o.name: o.status for o in observed.only("name", "status")}
    rows = []
    for cq in ClusterQueue.objects.filter(cluster_id=cluster_id).select_related("cohort"):
        usage = {}
        for flavor in (status.get(cq.name) or {}).get("flavorsUsage") or []:
            for resource in flavor.get("resources") or []:
                usage[(flavor.get("name"), resource.get("name"))] = (
                    _number(resource.get("total", 0)),
                    _number(resource.get("borrowed", 0)),
                )
        for _, flavor, quota in quota_entries(cq.resource_groups):
            if not str(quota.get("name", "")).startswith("nvidia.com/"):
                continue
            used, borrowed = usage.get((flavor, quota["name"]), (0.0, 0.0))
            nominal = _number(quota.get("nominalQuota", 0))
            lendable = nominal
            if quota.get("lendingLimit") not in (None, ""):
                lendable = min(nominal, _number(quota["lendingLimit"]))
            rows.append(
                Sample(
                    cluster_id=cluster_id,
                    time=now,
                    kind=Sample.Kind.QUEUE,
                    owner=cq.name,
                    scope=cq.cohort.name if cq.cohort is not None else "",
                    flavor=flavor,
                    resource=quota["name"],
                    used=used,
                    borrowed=borrowed,
                    capacity=nominal,
                    lent=max(0.0, min(lendable, nominal - (used - borrowed))),
                    gpu_share=used * mig_weight(None, quota["name"], models),
                )
            )
    return _share_lending(rows)


def _share_lending(rows: list[Sample]) -> list[Sample]:
    """Kueue reports what a queue borrows, not who lent it: a cohort's borrowing is shared
    out over its queues in proportion to what each could lend (an estimate)."""
    borrowed: dict[tuple[str, str, str], float] = defaultdict(float)
    lendable: dict[tuple[str, str, str], float] = defaultdict(float)
    for row in rows:
        if row.scope:
            key = (row.scope, row.flavor, row.resource)
            borrowed[key] += row.borrowed
            lendable[key] += row.lent
    for row in rows:
        key = (row.scope, row.flavor, row.resource)
        if not row.scope or not lendable[key]:
            row.lent = 0.0
            continue
        others = borrowed[key] - row.borrowed
        row.lent = min(row.lent, others * row.lent / lendable[key]) if others > 0 else 0.0
    return rows


def pool_rows(now: dt.datetime, cluster_id: int) -> list[Sample]:
    """Per node pool of the cluster and GPU resource: allocated and allocatable (idle = the
    difference)."""
    pools = list(NodePool.objects.on(cluster_id))
    pool_of_node: dict[str, str] = {}
    rows: dict[tuple[str, str, str], dict[str, float]] = defaultdict(
        lambda: {"used": 0.0, "capacity": 0.0, "gpu_share": 0.0}
    )
    for node in (
        ObservedNode.objects.on(cluster_id)
        .filter(gone_since__isnull=True)
        .only("name", "labels", "allocatable", "allocated", "gpu_product")
    ):
        pool = getattr(pool_of(node.labels, pools), "name", "(no pool)")
        pool_of_node[node.name] = pool
        model = model_for_product(node.gpu_product) if node.gpu_product else None
        for resource, value in (node.allocatable or {}).items():
            if not resource.startswith("nvidia.com/") or not str(value).isdigit() or not int(value):
                continue
            row = rows[(pool, resource, "")]
            used = int((node.allocated or {}).get(resource, 0))
            row["capacity"] += int(value)
            row["used"] += used
            row["gpu_share"] += used * mig_weight(model, resource)
    _dra_pool_rows(rows, cluster_id, pool_of_node)
    return [
        Sample(
            cluster_id=cluster_id,
            time=now,
            kind=Sample.Kind.POOL,
            owner=pool,
            flavor=flavor,
            resource=resource,
            **values,
        )
        for (pool, resource, flavor), values in rows.items()
    ]


def _dra_pool_rows(
    rows: dict[tuple[str, str, str], dict[str, float]],
    cluster_id: int,
    pool_of_node: dict[str, str],
) -> None:
    """Per pool, the GPUs published through DRA (capacity, as whole GPUs, flavor
    ``DRA_GPUS``) and the devices its claims hold (used, in the device plugin's names, with
    their GPU share, per DeviceClass they were allocated through)."""
    slices = list(
        ObservedResourceSlice.objects.on(cluster_id).values(
            "node_name", "driver", "pool", "devices", "shared_counters"
        )
    )
    if not slices:
        return
    claims = list(
        ObservedResourceClaim.objects.on(cluster_id)
        .filter(state=ObservedResourceClaim.State.ALLOCATED)
        .values_list("allocated", "requests")
    )
    taken = dra.taken_devices(allocated for allocated, _ in claims)
    class_of = dra.device_classes(claims)
    for gpu in dra.gpus_of(slices, taken):
        if gpu.node not in pool_of_node:
            continue  # a node gone, or a slice for no one node
        pool = pool_of_node[gpu.node]
        rows[(pool, "nvidia.com/gpu", DRA_GPUS)]["capacity"] += 1
        model = gpu.model()
        for device in gpu.taken:
            if device.resource:
                row = rows[(pool, device.resource, class_of.get(device.key, ""))]
                row["used"] += 1
                row["gpu_share"] += mig_weight(model, device.resource)


def record_workloads(now: dt.datetime, cluster_id: int) -> int:
    """Keep each Kueue workload's created / admitted / finished times beyond its life."""
    models = fleet_models(cluster_id)
    cq_of = {
        (namespace, name): cq
        for namespace, name, cq in LocalQueue.objects.filter(
            namespace__cluster_id=cluster_id
        ).values_list("namespace__name", "name", "cluster_queue__name")
    }
    known = {
        (r.namespace, r.name, r.created_at): r
        for r in WorkloadRecord.objects.filter(cluster_id=cluster_id, finished_at__isnull=True)
    }
    changed = 0
    seen = set()
    observed = ObservedWorkload.objects.on(cluster_id).filter()
    for w in observed.exclude(created_at__isnull=True):
        assert w.created_at is not None
        seen.add((w.namespace, w.name, w.created_at))
        record = known.get((w.namespace, w.name, w.created_at))
        share = sum(
            _number(count) * mig_weight(None, resource, models)
            for resource, count in (w.requests or {}).items()
        )
        # After an eviction and requeue, the wait starts again at the requeue.
        queued = w.queued_at if w.queued_at and w.queued_at != w.created_at else None
        if record is None:
            record, created = WorkloadRecord.objects.get_or_create(
                cluster_id=cluster_id,
                namespace=w.namespace,
                name=w.name,
                created_at=w.created_at,
                defaults={
                    "local_queue": w.queue_name,
                    "cluster_queue": w.cluster_queue or cq_of.get((w.namespace, w.queue_name), ""),
                    "queued_at": queued,
                    "admitted_at": w.admitted_at,
                    "finished_at": (w.finished_at or now) if w.finished else None,
                    "gpu_share": share,
                },
            )
            changed += created
            if created:
                continue
        updates: dict[str, Any] = {}
        if queued is not None and record.queued_at != queued:
            updates["queued_at"] = queued
            if not w.admitted:  # waiting again: its earlier admission ended with the eviction
                updates["admitted_at"] = None
        if w.admitted_at and record.admitted_at != w.admitted_at:
            updates["admitted_at"] = w.admitted_at
        if w.finished and record.finished_at is None:
            updates["finished_at"] = w.finished_at or now  # Kueue's time, not the sample's
        if updates:
            WorkloadRecord.objects.filter(pk=record.pk).update(**updates)
            changed += 1
    # A workload deleted before Kueue marked it finished has ended all the same: closing its
    # record keeps the open ones (read above at every sample) to those still in the cluster.
    gone = [r.pk for key, r in known.items() if key not in seen]
    if gone:
        changed += WorkloadRecord.objects.filter(pk__in=gone).update(finished_at=now)
    return changed


@transaction.atomic
def take_sample(*, now: dt.datetime | None = None, force: bool = False) -> int:
    """One sample of every series, at most every QM_SAMPLE_SECONDS; the number of rows."""
    now = now or timezone.now()
    state = _state()
    if (
        not force
        and state.last_sample
        and (now - state.last_sample).total_seconds() < settings.QM_SAMPLE_SECONDS
    ):
        return 0
    rows = []
    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        rows += team_rows(now, cluster_id) + queue_rows(now, cluster_id)
        rows += pool_rows(now, cluster_id)
        record_workloads(now, cluster_id)
    Sample.objects.bulk_create(rows, batch_size=2000)
    state.last_sample = now
    state.save(update_fields=["last_sample"])
    return len(rows)


def take_sample_after_poll(*, now: dt.datetime | None = None) -> int:
    """A sample when a poll succeeded since the last one (a poller that is down leaves a
    gap in the history, never stale numbers); at most every QM_SAMPLE_SECONDS."""
    run = (  # the newest poll of any cluster
        SyncRun.objects.on_every_cluster()
        .filter(finished_at__isnull=False)
        .order_by("-started_at")
        .first()
    )
    if run is None or not run.ok:
        return 0
    # A read, not the sample's lock: the sample takes it (outside a transaction a locking
    # read is refused, and the task runs outside one).
    last = SamplingState.objects.values_list("last_sample", flat=True).first()
    if last is not None and run.finished_at is not None and run.finished_at <= last:
        return 0
    return take_sample(now=now)


def _hour(time: dt.datetime) -> dt.datetime:
    return time.replace(minute=0, second=0, microsecond=0)


def roll_up(*, now: dt.datetime | None = None) -> int:
    """Hours that ended at least one sample gap ago become hourly rollups; whole days of
    hourly rollups become daily ones; raw samples and hourly rollups past their retention go."""
    now = now or timezone.now()
    gap = settings.QM_SAMPLE_MAX_GAP_SECONDS
    with transaction.atomic():
        state = _state()
        first = Sample.objects.order_by("time").values_list("time", flat=True).first()
        if first is None:
            return 0
        start = state.rolled_up_to or _hour(first)
        written = 0
        while start + dt.timedelta(hours=1, seconds=gap) <= now:
            end = start + dt.timedelta(hours=1)
            written += _roll_hour(start, end, gap)
            if end.hour == 0 or end.time() == dt.time(0, 0):
                written += _roll_day(end - dt.timedelta(days=1))
            start = end
        state.rolled_up_to = start
        state.save(update_fields=["rolled_up_to"])
    raw_cut = now - dt.timedelta(days=settings.QM_SAMPLE_RETENTION_DAYS)
    Sample.objects.filter(time__lt=min(raw_cut, start - dt.timedelta(seconds=gap))).delete()
    Rollup.objects.filter(
        period=Rollup.Period.HOUR,
        start__lt=now - dt.timedelta(days=settings.QM_HOURLY_RETENTION_DAYS),
    ).delete()
    Rollup.objects.filter(
        period=Rollup.Period.DAY,
        start__lt=now - dt.timedelta(days=settings.QM_DAILY_RETENTION_DAYS),
    ).delete()
    return written


def _roll_hour(start: dt.datetime, end: dt.datetime, gap: float) -> int:
    margin = dt.timedelta(seconds=gap)
    series: dict[tuple[str, ...], list[Sample]] = defaultdict(list)
    for sample in Sample.objects.filter(time__gte=start - margin, time__lt=end + margin).order_by(
        "time"
    ):
        series[tuple(getattr(sample, f) for f in SERIES)].append(sample)
    rows = []
    for key, samples in series.items():
        values: dict[str, float] = {}
        covered = 0.0
        for measure in MEASURES:
            points = [(s.time, max(getattr(s, measure), 0.0)) for s in samples]
            total, covered = integrate(points, start, end, gap)
            values[measure] = total
        if not covered:
            continue
        inside = [s.used for s in samples if start <= s.time < end]
        rows.append(
            Rollup(
                period=Rollup.Period.HOUR,
                start=start,
                **dict(zip(SERIES, key, strict=True)),
                covered_seconds=covered,
                used_seconds=values["used"],
                requested_seconds=values["requested"],
                borrowed_seconds=values["borrowed"],
                lent_seconds=values["lent"],
                capacity_seconds=values["capacity"],
                pending_seconds=values["pending"],
                gpu_seconds=values["gpu_share"],
                peak_used=max(inside, default=0.0),
            )
        )
    Rollup.objects.filter(period=Rollup.Period.HOUR, start=start).delete()
    Rollup.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def _roll_day(start: dt.datetime) -> int:
    fields = [
        f
        for f in (
            "covered_seconds",
            "used_seconds",
            "requested_seconds",
            "borrowed_seconds",
            "lent_seconds",
            "capacity_seconds",
            "pending_seconds",
            "gpu_seconds",
        )
    ]
    grouped = (
        Rollup.objects.filter(
            period=Rollup.Period.HOUR, start__gte=start, start__lt=start + dt.timedelta(days=1)
        )
        .values(*SERIES)
        .annotate(**{f: Sum(f) for f in fields}, peak=Max("peak_used"))
    )
    rows = [
        Rollup(
            period=Rollup.Period.DAY,
            start=start,
            **{k: g[k] for k in SERIES},
            **{f: g[f] for f in fields},
            peak_used=g["peak"],
        )
        for g in grouped
    ]
    Rollup.objects.filter(period=Rollup.Period.DAY, start=start).delete()
    Rollup.objects.bulk_create(rows, batch_size=2000)
    return len(rows)
