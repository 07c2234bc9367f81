"""Writing GPU health: one row per node from what was collected, and bad GPUs turned into
suggested cordon-and-drain requests that go through the normal approval flow."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cluster.models import Cluster
from cluster.scope import settings_cluster_id
from cluster.services import settings_cluster
from gpus import dcgm
from health.collect import Collected, collect
from health.findings import assess as findings_of
from health.findings import worst
from health.models import NodeHealth
from kube import Gateway

# GPU health is observation: it sits beneath the reviewed changes, which read it (the
# planner) and suggest drains from it. The changes app subscribes its suggester when Django
# starts (``changes/apps.py``); nothing subscribed (a script without that app): nothing is
# suggested. The one dependency here that points up, so it is a hook and not an import.
Suggester = Callable[[list[NodeHealth]], list[int]]
_suggesters: list[Suggester] = []


def suggests(suggester: Suggester) -> None:
    """Call ``suggester(rows)`` with each collection's stored readings; it answers the ids
    of the requests it suggested."""
    if suggester not in _suggesters:
        _suggesters.append(suggester)


def suggest_drains(rows: list[NodeHealth]) -> list[int]:
    """The drains suggested from ``rows``, by every subscribed suggester."""
    return [pk for suggester in _suggesters for pk in suggester(rows)]


# The readings stored, for the apps above that keep what they need of them (``idle``: each
# device's run under its pool's threshold), subscribed when Django starts (``idle/apps.py``).
ReadingsListener = Callable[[int, list[NodeHealth]], object]
_listeners: list[ReadingsListener] = []


def readings_stored(listener: ReadingsListener) -> None:
    """Call ``listener(cluster_id, rows)`` with each collection's stored readings."""
    if listener not in _listeners:
        _listeners.append(listener)


def store(collected: Collected, *, cluster_id: int | None = None) -> list[NodeHealth]:
    """One row per node of the cluster (by default the settings' one), replaced; nodes read
    this time only (a silent exporter keeps its last word, and says since when)."""
    now = timezone.now()
    cluster_id = cluster_id or settings_cluster_id()
    rows = []
    for node, gpus in collected.gpus.items():
        findings = findings_of(gpus, hot_c=settings.QM_GPU_HOT_CELSIUS)
        rows.append(
            NodeHealth(
                cluster_id=cluster_id,
                node=node,
                observed_at=now,
                error="",
                gpus=dcgm.as_json(gpus),
                findings=[f.__dict__ for f in findings],
                worst=worst(findings),
            )
        )
    with transaction.atomic():
        NodeHealth.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["cluster", "node"],
            update_fields=["observed_at", "error", "gpus", "findings", "worst"],
        )
        # Unreadable exporters: the error, and the last reading kept (one statement).
        NodeHealth.objects.bulk_create(
            [
                NodeHealth(cluster_id=cluster_id, node=n, observed_at=now, error=e)
                for n, e in collected.errors.items()
            ],
            update_conflicts=True,
            unique_fields=["cluster", "node"],
            update_fields=["error"],
        )
    return rows


def collect_gpu_health(
    gateway: Gateway | None, *, cluster: Cluster | None = None
) -> dict[str, Any]:
    """Collect one cluster's GPU health (by default the settings' one) through ``gateway``,
    store it, and suggest drains; what happened, for the task's log. QM_PROMETHEUS_URL is
    the settings' cluster's Prometheus: another cluster is read through its API server."""
    source = settings.QM_DCGM_SOURCE
    if source == "off":
        return {"source": "off"}
    cluster = cluster or settings_cluster()
    if source == "prometheus" and cluster.connection != Cluster.Connection.SETTINGS:
        source = "proxy"
    collected = collect(gateway, source=source)
    rows = store(collected, cluster_id=cluster.pk)
    suggested = suggest_drains(rows)
    for listener in _listeners:
        listener(cluster.pk, rows)
    return {
        "cluster": cluster.name,
        "source": source,
        "nodes": len(rows),
        "unreadable": len(collected.errors),
        "attention": sum(1 for r in rows if r.worst in ("warning", "critical")),
        "suggested": suggested,
    }
