"""``manage.py load_demo``: load (or restore) the seed chapter's demo scenario."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from demo.data import DEMO_PASSWORD, USERS
from demo.services import load_demo


class Command(BaseCommand):
    help = "Load the demo teams, quotas, priority classes and Kueue queues (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        warnings = load_demo()
        self.stdout.write(self.style.SUCCESS("Demo data loaded."))
        for warning in dict.fromkeys(warnings):
            self.stdout.write(self.style.WARNING(f"  note: {warning}"))
        self.stdout.write(f"Demo logins (password {DEMO_PASSWORD!r}):")
        for user in USERS:
            self.stdout.write(f"  {user.username:<11} {user.description}")
