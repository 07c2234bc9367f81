"""Gauges of reviewed changes for /metrics: requests waiting for an approver, MIG changes
approved and not finished."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from changes.models import MigChangeRequest, QuotaChangeRequest

IN_PROGRESS = ("approved", "scheduled", "running", "rolling_back")


def change_gauges() -> Iterator[GaugeMetricFamily]:
    pending = GaugeMetricFamily(
        "quartermaster_pending_approvals",
        "Requests waiting for an approver, by kind.",
        labels=["kind"],
    )
    pending.add_metric(
        ["mig_change"],
        MigChangeRequest.objects.filter(state=MigChangeRequest.State.PENDING).count(),
    )
    pending.add_metric(
        ["quota"],
        QuotaChangeRequest.objects.filter(state=QuotaChangeRequest.State.PENDING).count(),
    )
    yield pending
    running = GaugeMetricFamily(
        "quartermaster_mig_changes_in_progress",
        "MIG changes approved and not finished, by state.",
        labels=["state"],
    )
    counts = dict(
        MigChangeRequest.objects.filter(state__in=IN_PROGRESS)
        .values_list("state")
        .annotate(n=Count("id"))
    )
    for state in IN_PROGRESS:
        running.add_metric([state], counts.get(state, 0))
    yield running


def mig_change_totals() -> Iterator[GaugeMetricFamily]:
    """Every MIG change and drain the portal keeps, by cluster, kind and state (its outcome
    once finished: succeeded, failed, rolled_back, rejected, cancelled); one query. The
    rise of a state over a time range (``delta``) is how many changes ended so."""
    total = GaugeMetricFamily(
        "quartermaster_mig_changes",
        "MIG changes and drains of GPU nodes, by cluster, kind (mig, drain) and state.",
        labels=["cluster", "kind", "state"],
    )
    counts = {
        (cluster, kind, state): n
        for cluster, kind, state, n in MigChangeRequest.objects.on_every_cluster()
        .values_list("cluster__name", "kind", "state")
        .annotate(n=Count("id"))
        .order_by()
    }
    clusters = sorted({cluster for cluster, _, _ in counts})
    for cluster in clusters:
        for kind in MigChangeRequest.Kind.values:
            for state in MigChangeRequest.State.values:
                total.add_metric([cluster, kind, state], counts.get((cluster, kind, state), 0))
    yield total
