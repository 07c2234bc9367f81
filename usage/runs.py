"""How long finished Kueue workloads ran (admitted to finished), per ClusterQueue and per
namespace: what the estimated wait of a workload in line learns from."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable

from django.db.models import DurationField, ExpressionWrapper, F, Q, Window
from django.db.models.functions import RowNumber

from usage.models import WorkloadRecord

HISTORY_DAYS = 30  # older runs say little about today's queue
LATEST = 200  # per queue or namespace: the latest runs are the ones that count


def _latest(
    key: str, values: Iterable[str], since: dt.datetime, cluster_id: int
) -> dict[str, list[float]]:
    """``key`` ("cluster_queue" or "namespace") of cluster ``cluster_id`` -> the run times in
    seconds of its latest ``LATEST`` finished workloads since ``since`` (one query, whatever
    the history's size)."""
    names = sorted(set(values) - {""})
    if not names:
        return {}
    rows = (
        WorkloadRecord.objects.on(cluster_id)
        .filter(
            Q(**{f"{key}__in": names}),
            admitted_at__isnull=False,
            finished_at__gte=since,
            finished_at__gt=F("admitted_at"),
        )
        .annotate(
            ran=ExpressionWrapper(
                F("finished_at") - F("admitted_at"), output_field=DurationField()
            ),
            rank=Window(RowNumber(), partition_by=[F(key)], order_by=F("finished_at").desc()),
        )
        .filter(rank__lte=LATEST)
        .values_list(key, "ran")
    )
    out: dict[str, list[float]] = defaultdict(list)
    for name, ran in rows:
        out[name].append(ran.total_seconds())
    return dict(out)


def run_times(
    *,
    cluster_id: int,
    cluster_queues: Iterable[str],
    namespaces: Iterable[str],
    now: dt.datetime,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """The run times of the latest finished workloads of these ClusterQueues and of these
    namespaces of cluster ``cluster_id`` (another cluster's queue of the same name is
    another queue), from the last ``HISTORY_DAYS`` days (two queries)."""
    since = now - dt.timedelta(days=HISTORY_DAYS)
    return (
        _latest("cluster_queue", cluster_queues, since, cluster_id),
        _latest("namespace", namespaces, since, cluster_id),
    )


def gpu_hours(
    *, cluster_id: int, namespace: str, name: str, created_at: dt.datetime | None, now: dt.datetime
) -> float | None:
    """The GPU-hours one workload has used, from its record (its GPUs in whole GPUs, a MIG
    slice as its share, times the time from its latest admission to its end, or to ``now``
    while it runs); None when usage has no record of it or it was never admitted. A run
    before an eviction is not in it: the record keeps the latest admission only."""
    if created_at is None:
        return None
    record = (
        WorkloadRecord.objects.on(cluster_id)
        .filter(namespace=namespace, name=name, created_at=created_at)
        .only("admitted_at", "finished_at", "gpu_share")
        .first()
    )
    if record is None or record.admitted_at is None:
        return None
    end = record.finished_at or now
    return max(0.0, (end - record.admitted_at).total_seconds()) / 3600 * record.gpu_share
