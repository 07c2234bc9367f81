"""Celery tasks of usage history: a sample after each successful poll, and rollups of
samples into hours and days (both idempotent)."""

from __future__ import annotations

from celery import shared_task

from usage.sampling import roll_up, take_sample_after_poll


@shared_task(acks_late=True, ignore_result=True)
def take_sample_task() -> int:
    """One sample of the observed state, once a poll succeeded since the last sample."""
    return take_sample_after_poll()


@shared_task(acks_late=True, ignore_result=True)
def roll_up_task() -> int:
    return roll_up()
