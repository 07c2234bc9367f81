"""The loop's gauges for /metrics: the last poll (duration, age, outcome) and open drift."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from cluster.models import Drift, SyncRun


def loop_gauges() -> Iterator[GaugeMetricFamily]:
    now = timezone.now()
    last = SyncRun.objects.filter(finished_at__isnull=False).order_by("-started_at").first()
    good = (
        SyncRun.objects.filter(finished_at__isnull=False, error="")
        .order_by("-started_at")
        .values_list("finished_at", flat=True)
        .first()
    )
    duration = GaugeMetricFamily(
        "quartermaster_sync_duration_seconds", "How long the last poll of the cluster took."
    )
    age = GaugeMetricFamily(
        "quartermaster_sync_age_seconds",
        "Seconds since the last successful poll of the cluster (alert when it grows).",
    )
    ok = GaugeMetricFamily(
        "quartermaster_sync_last_ok", "1 when the last poll of the cluster succeeded."
    )
    if last is not None:
        duration.add_metric([], (last.duration_ms or 0) / 1000)
        ok.add_metric([], 1 if last.ok else 0)
    if good is not None:
        age.add_metric([], (now - good).total_seconds())
    yield from (duration, age, ok)
    drift = GaugeMetricFamily(
        "quartermaster_drift_open",
        "Differences between intent and cluster, by kind.",
        labels=["kind"],
    )
    open_drift = dict(
        Drift.objects.filter(resolved_at__isnull=True).values_list("kind").annotate(n=Count("id"))
    )
    for kind in Drift.Kind.values:
        drift.add_metric([kind], open_drift.get(kind, 0))
    yield drift
