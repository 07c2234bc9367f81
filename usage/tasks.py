"""Celery task of usage history: roll samples up into hours and days (idempotent)."""

from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, ignore_result=True)
def roll_up_task() -> int:
    from usage.sampling import roll_up

    return roll_up()
