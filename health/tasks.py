"""Celery tasks of GPU health: thin."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from cluster.connection import cluster_configured, get_gateway
from health.services import collect_gpu_health


@shared_task(acks_late=True, ignore_result=True)
def collect_gpu_health_task() -> dict[str, Any]:
    """Read the DCGM exporters, store GPU health, suggest drains for broken GPUs."""
    gateway = get_gateway() if cluster_configured() else None
    return collect_gpu_health(gateway)
