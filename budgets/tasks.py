"""The budgets' periodic check: warnings at thresholds, holds where enforced."""

from __future__ import annotations

from celery import shared_task

from budgets.services import check_budgets


@shared_task(acks_late=True, ignore_result=True)
def check_budgets_task() -> int:
    """Warn of each threshold reached (once per period) and hold or release the queues of
    enforced budgets; idempotent: a second run finds the warnings told and the holds set."""
    return len(check_budgets())
