"""Celery tasks of reviewed changes: thin, idempotent, resumable."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.utils import timezone

from changes.executor import advance
from changes.models import MigChangeRequest
from changes.quota import expire_quota_grants
from cluster.connection import cluster_configured, get_gateway
from kube import RetryableKubeError

log = logging.getLogger(__name__)


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
    outcome = advance(request_id, gateway=get_gateway())
    if outcome.kind == "wait":
        execute_mig_change_task.apply_async((request_id,), countdown=outcome.seconds)
    return f"{outcome.kind}: {outcome.message}"


@shared_task(acks_late=True, ignore_result=True)
def resume_mig_changes_task() -> None:
    """Start scheduled changes whose window opened, and pick up any run whose task was lost
    (the per-request lock makes a duplicate harmless)."""
    now = timezone.now()
    due = MigChangeRequest.objects.filter(state="scheduled", window_start__lte=now)
    active = MigChangeRequest.objects.filter(state__in=["approved", "running", "rolling_back"])
    for request_id in {*due.values_list("pk", flat=True), *active.values_list("pk", flat=True)}:
        queue_execution(request_id)


@shared_task(acks_late=True, ignore_result=True)
def expire_quota_grants_task() -> None:
    """Warn about grants ending within a day and revert those that ended (idempotent)."""
    expire_quota_grants()


def queue_execution(request_id: int) -> None:
    """Run (or go on with) a MIG change in a worker; the services call it on commit."""
    try:
        execute_mig_change_task.delay(request_id)
    except Exception as exc:  # the periodic sweep starts it when the broker is back
        log.warning("could not queue MIG change %s: %s", request_id, exc)
