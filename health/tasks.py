"""Celery tasks of GPU health: thin; one task per cluster, side by side."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from cluster.connection import cluster_configured, gateway_for
from cluster.models import Cluster
from cluster.services import settings_cluster
from health.services import collect_gpu_health


@shared_task(ignore_result=True)
def collect_all_gpu_health_task() -> int:
    """Queue one GPU health read per cluster (beat, every QM_HEALTH_SECONDS); a read still
    waiting for a worker when the next one is queued is dropped."""
    ids = list(Cluster.objects.order_by("name").values_list("pk", flat=True))
    for cluster_id in ids:
        collect_gpu_health_task.apply_async(
            (cluster_id,), expires=float(settings.QM_HEALTH_SECONDS)
        )
    return len(ids)


@shared_task(acks_late=True, ignore_result=True)
def collect_gpu_health_task(cluster_id: int | None = None) -> dict[str, Any]:
    """Read one cluster's GPU health (None: the settings' cluster), store it, suggest drains
    for broken GPUs. The settings' cluster while the settings name none has no gateway: only
    a Prometheus is read for it."""
    if cluster_id is None:
        cluster: Cluster | None = settings_cluster()
    else:
        cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return {}
    reachable = cluster.connection != Cluster.Connection.SETTINGS or cluster_configured()
    return collect_gpu_health(gateway_for(cluster) if reachable else None, cluster=cluster)
