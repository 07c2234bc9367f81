"""Celery tasks of the cluster loop: thin wrappers that map errors to retries."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from cluster.apply import ApplierBusy, apply_desired_state
from cluster.connection import cluster_configured, get_gateway
from cluster.poll import poll_cluster
from kube import RetryableKubeError
from portal import outbox

log = logging.getLogger(__name__)


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(RetryableKubeError,),
    retry_backoff=2,
    retry_backoff_max=120,
    retry_jitter=True,
    max_retries=None,
)
def apply_desired_state_task(self: Any, full: bool = False) -> dict[str, int]:
    """Converge the cluster toward the portal's desired state (idempotent: SSA by hash)."""
    if not cluster_configured():
        return {}
    try:
        report = apply_desired_state(gateway=get_gateway(), full=full)
    except ApplierBusy as exc:
        # Another run holds the lock and may have rendered before our change: run after it.
        raise self.retry(exc=exc, countdown=3, max_retries=None) from exc
    if report.applied or report.removed or report.failed or report.conflicts:
        log.info(
            "applied %d, removed %d, conflicts %d, failed %d, unchanged %d",
            len(report.applied),
            len(report.removed),
            len(report.conflicts),
            len(report.failed),
            report.unchanged,
        )
    return {
        "applied": len(report.applied),
        "removed": len(report.removed),
        "conflicts": len(report.conflicts),
        "failed": len(report.failed),
    }


@shared_task(acks_late=True, ignore_result=True)
def poll_cluster_task() -> None:
    """Read the fleet back into the observed tables (a failed poll is recorded, not retried:
    the next beat tick polls again)."""
    if cluster_configured():
        poll_cluster(gateway=get_gateway())


def queue_apply() -> None:
    """Queue an apply when the current transaction commits (once per transaction). The
    loop subscribes this to desired-state changes (``portal.desired``).

    A broker that is down loses nothing: the outbox's relay sends it when the broker is back
    (and the periodic re-apply would find the change by hash anyway).
    """
    outbox.send_later(apply_desired_state_task.name, once=True)
