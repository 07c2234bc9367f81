"""Celery task of costs: record how busy the teams' GPUs were (idempotent per run: a run
right after another adds nothing)."""

from __future__ import annotations

from celery import shared_task

from costs.busy import record_busy


@shared_task(acks_late=True, ignore_result=True)
def record_busy_task() -> int:
    """Add the GPU utilisation the exporters read since the last run to each namespace's day."""
    return record_busy()
