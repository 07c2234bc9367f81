"""Queue gauges for /metrics, per cluster and ClusterQueue: what Kueue reports of each queue
by flavor and resource (its nominal quota, what admitted workloads use, what it borrows
from its cohort), its workloads by state (one query whatever the number of queues), and
the waits of the workloads not admitted yet (one query whatever the number of workloads)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Min,
    Q,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric

from cluster.models import ObservedObject, ObservedWorkload
from portal.vocabulary.quantity import QuantityError, parse_quantity
from queues.observed import waiting_cluster_queue
from queues.rules import quota_entries

WORKLOAD_STATES = {
    "pending": "pendingWorkloads",
    "reserving": "reservingWorkloads",
    "admitted": "admittedWorkloads",
}


def _amount(value: Any) -> float | None:
    try:
        return float(parse_quantity(str(value)))
    except (QuantityError, ValueError, TypeError):
        return None


def queue_gauges() -> Iterator[GaugeMetricFamily]:
    labels = ["cluster", "cluster_queue", "flavor", "resource"]
    nominal = GaugeMetricFamily(
        "quartermaster_queue_nominal_quota",
        "A ClusterQueue's nominal quota, by flavor and resource (as the cluster has it).",
        labels=labels,
    )
    used = GaugeMetricFamily(
        "quartermaster_queue_usage",
        "What a ClusterQueue's admitted workloads use, by flavor and resource (Kueue's "
        "flavorsUsage).",
        labels=labels,
    )
    borrowed = GaugeMetricFamily(
        "quartermaster_queue_borrowed",
        "What a ClusterQueue borrows from its cohort beyond its nominal quota, by flavor and "
        "resource.",
        labels=labels,
    )
    workloads = GaugeMetricFamily(
        "quartermaster_queue_workloads",
        "A ClusterQueue's workloads by state (pending, reserving, admitted), as Kueue counts.",
        labels=["cluster", "cluster_queue", "state"],
    )
    rows = (
        ObservedObject.objects.on_every_cluster()
        .filter(kind="ClusterQueue")
        .order_by("cluster__name", "name")
        .values_list("cluster__name", "name", "spec", "status")
    )
    for cluster, name, spec, status in rows:
        groups = ((spec or {}).get("spec") or {}).get("resourceGroups") or []
        for _, flavor, quota in quota_entries(groups):
            amount = _amount(quota.get("nominalQuota", 0))
            if amount is not None:
                nominal.add_metric([cluster, name, flavor, quota.get("name", "")], amount)
        for entry in (status or {}).get("flavorsUsage") or []:
            for resource in entry.get("resources") or []:
                key = [cluster, name, entry.get("name", ""), resource.get("name", "")]
                total = _amount(resource.get("total", 0))
                lent = _amount(resource.get("borrowed", 0))
                if total is not None:
                    used.add_metric(key, total)
                if lent is not None:
                    borrowed.add_metric(key, lent)
        for state, field in WORKLOAD_STATES.items():
            workloads.add_metric([cluster, name, state], int((status or {}).get(field) or 0))
    yield from (nominal, used, borrowed, workloads)


# Upper bounds of the waiting workloads' histogram: a minute to a day.
WAIT_BUCKETS = (60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0)


def waiting_gauges() -> Iterator[Metric]:
    """Workloads Kueue has not admitted yet, per cluster and ClusterQueue: how long each has
    waited (a histogram of the waits so far, taken at scrape time) and the longest wait
    (one query whatever the number of workloads)."""
    now = timezone.now()
    waiting = (
        ObservedWorkload.objects.on_every_cluster()
        .filter(admitted=False, finished=False)
        .annotate(
            since=Coalesce("queued_at", "created_at"),
            queue=waiting_cluster_queue(Value("")),
        )
    )
    buckets = {
        f"le{i}": Count("id", filter=Q(since__gte=now - timedelta(seconds=bound)))
        for i, bound in enumerate(WAIT_BUCKETS)
    }
    rows = (
        waiting.values("cluster__name", "queue")
        .annotate(
            n=Count("id"),
            oldest=Min("since"),
            waited=Sum(ExpressionWrapper(now - F("since"), output_field=DurationField())),
            **buckets,
        )
        .order_by("cluster__name", "queue")
    )
    ages = HistogramMetricFamily(
        "quartermaster_workload_wait_seconds",
        "How long the workloads not admitted yet have waited so far, by ClusterQueue.",
        labels=["cluster", "cluster_queue"],
    )
    oldest = GaugeMetricFamily(
        "quartermaster_workload_oldest_wait_seconds",
        "The longest a workload not admitted yet has waited, by ClusterQueue.",
        labels=["cluster", "cluster_queue"],
    )
    for row in rows:
        labels = [row["cluster__name"], row["queue"]]
        per_bucket: dict[str, Any] = dict(row)
        counts = [(str(bound), per_bucket[f"le{i}"]) for i, bound in enumerate(WAIT_BUCKETS)]
        waited = row["waited"].total_seconds() if row["waited"] else 0.0
        ages.add_metric(labels, [*counts, ("+Inf", row["n"])], max(0.0, waited))
        if row["oldest"] is not None:
            oldest.add_metric(labels, max(0.0, (now - row["oldest"]).total_seconds()))
    yield from (ages, oldest)
