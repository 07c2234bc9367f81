"""Celery tasks of reviewed changes: thin, idempotent, resumable."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import Any

from celery import shared_task
from django.db.models import Q
from django.utils import timezone

from changes.executor import advance
from changes.models import MigChangeRequest
from changes.quota import expire_quota_grants
from cluster.connection import cluster_configured, gateway_for
from cluster.models import Cluster
from kube import RetryableKubeError
from portal.infra import outbox

log = logging.getLogger(__name__)


# A waiting execution whose continuation is this late was lost (a worker or the broker
# died with it): the sweep starts a new one.
LOST_AFTER = dt.timedelta(seconds=120)
MIN_COUNTDOWN = 1.0


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(RetryableKubeError,),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=None,
)
def execute_mig_change_task(self: Any, request_id: int, token: str = "") -> str:
    """Advance a MIG change; waiting is one rescheduled check, never a sleep.

    Each waiting change has exactly one scheduled continuation: its token is stored with
    the request, a run holding any other token exits, and the next token is taken by a
    conditional update (a redelivered task and its twin cannot both schedule one). Every
    read and write goes to the change's cluster, through its own gateway."""
    cluster = Cluster.objects.filter(mig_changes=request_id).first()
    if cluster is None:
        return "no such change"
    if cluster.connection == Cluster.Connection.SETTINGS and not cluster_configured():
        return "no cluster configured"
    if token and not MigChangeRequest.objects.filter(pk=request_id, wake_token=token).exists():
        return "superseded: another continuation runs this change"
    outcome = advance(request_id, gateway=gateway_for(cluster))
    if outcome.kind == "wait":
        _continue_later(request_id, token, outcome.seconds)
    return f"{outcome.kind}: {outcome.message}"


def _continue_later(request_id: int, token: str, seconds: float) -> None:
    """Schedule the one continuation, published before its token is taken: a worker killed
    between the two leaves this run's token in place (its redelivered message goes on, the
    published one exits), never a token no message carries. At least a second away, so the
    continuation never runs before its token is stored."""
    follow = uuid.uuid4().hex
    seconds = max(seconds, MIN_COUNTDOWN)
    execute_mig_change_task.apply_async((request_id, follow), countdown=seconds)
    mine = MigChangeRequest.objects.filter(pk=request_id)
    if token:
        mine = mine.filter(wake_token=token)
    mine.update(wake_token=follow, wake_at=timezone.now() + dt.timedelta(seconds=seconds))


@shared_task(acks_late=True, ignore_result=True)
def resume_mig_changes_task() -> None:
    """Start scheduled changes whose window opened, and pick up any run whose continuation
    was lost (a waiting change with a live continuation is left to it)."""
    now = timezone.now()
    due = MigChangeRequest.objects.filter(state="scheduled", window_start__lte=now)
    lost = MigChangeRequest.objects.filter(
        Q(wake_at__isnull=True) | Q(wake_at__lt=now - LOST_AFTER),
        state__in=["approved", "running", "rolling_back"],
    )
    for request_id in {*due.values_list("pk", flat=True), *lost.values_list("pk", flat=True)}:
        queue_execution(request_id)


@shared_task(acks_late=True, ignore_result=True)
def expire_quota_grants_task() -> None:
    """Warn about grants ending within a day and revert those that ended (idempotent)."""
    expire_quota_grants()


def queue_execution(request_id: int) -> None:
    """Run (or go on with) a MIG change in a worker, from the services' transaction: the task
    goes through the outbox, published when it commits (or by the relay when the broker was
    away; the periodic sweep is the last resort). The new run takes the change's continuation
    token: any earlier scheduled run exits."""
    token = uuid.uuid4().hex
    MigChangeRequest.objects.filter(pk=request_id).update(wake_token=token, wake_at=timezone.now())
    outbox.send_later(execute_mig_change_task.name, request_id, token)
