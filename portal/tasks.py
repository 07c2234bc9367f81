"""Portal-wide Celery tasks."""

from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(autoretry_for=(OSError,), retry_backoff=5, max_retries=5, ignore_result=True)
def notify_task(event: str, subject: str, payload: dict[str, Any]) -> None:
    from portal.notify import send_event

    send_event(event, subject, payload)
