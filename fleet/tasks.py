"""Celery tasks for MIG changes: thin, idempotent, resumable."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.utils import timezone

from kube import RetryableKubeError
from portal.gateway import cluster_configured, get_gateway


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(RetryableKubeError,),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=None,
)
def execute_mig_change_task(self: Any, request_id: int) -> str:
    """Advance a MIG change; waiting is a rescheduled check, never a sleep."""
    if not cluster_configured():
        return "no cluster configured"
    from fleet.execution import advance

    outcome = advance(request_id, gateway=get_gateway())
    if outcome.kind == "wait":
        execute_mig_change_task.apply_async((request_id,), countdown=outcome.seconds)
    return f"{outcome.kind}: {outcome.message}"


@shared_task(acks_late=True, ignore_result=True)
def resume_mig_changes_task() -> None:
    """Start scheduled changes whose window opened, and pick up any run whose task was lost
    (the per-request lock makes a duplicate harmless)."""
    from fleet.changes import queue_execution
    from fleet.models import MigChangeRequest

    now = timezone.now()
    due = MigChangeRequest.objects.filter(state="scheduled", window_start__lte=now)
    active = MigChangeRequest.objects.filter(state__in=["approved", "running", "rolling_back"])
    for request_id in {*due.values_list("pk", flat=True), *active.values_list("pk", flat=True)}:
        queue_execution(request_id)


@shared_task(acks_late=True, ignore_result=True)
def collect_gpu_health_task() -> dict[str, Any]:
    """Read the DCGM exporters, store GPU health, suggest drains for broken GPUs."""
    from fleet.health import collect_gpu_health

    gateway = get_gateway() if cluster_configured() else None
    return collect_gpu_health(gateway)
