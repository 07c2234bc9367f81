"""``manage.py demo_budgets``: set the demo's budgets again from the usage history (team-a's
nearly spent); ``dev.py run`` calls it once the history is backfilled."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from demo.services import load_demo_budgets


class Command(BaseCommand):
    help = "Set the demo teams' budgets from their use this month (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        load_demo_budgets()
        self.stdout.write(self.style.SUCCESS("Demo budgets set."))
