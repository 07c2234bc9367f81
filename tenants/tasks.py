"""Celery tasks for tenants: thin."""

from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, ignore_result=True)
def expire_quota_grants_task() -> None:
    """Warn about grants ending within a day and revert those that ended (idempotent)."""
    from tenants.quota_requests import expire_quota_grants

    expire_quota_grants()
