"""``manage.py load_demo``: load (or restore) the seed chapter's demo scenario; with
``QM_DEMO_INFERENCE_URL`` and ``QM_DEMO_INFERENCE_TOKEN`` (what ``dev.py run`` sets for its
second demo cluster) also the inference cluster, and the objects that live there."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand

from demo.data import DEMO_PASSWORD, USERS, Endpoint
from demo.services import load_demo


class Command(BaseCommand):
    help = "Load the demo teams, quotas, priority classes and Kueue queues (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        url = os.environ.get("QM_DEMO_INFERENCE_URL", "")
        token = os.environ.get("QM_DEMO_INFERENCE_TOKEN", "")
        warnings = load_demo(Endpoint(url, token) if url else None)
        where = f" (and the inference cluster at {url})" if url else ""
        self.stdout.write(self.style.SUCCESS(f"Demo data loaded{where}."))
        for warning in dict.fromkeys(warnings):
            self.stdout.write(self.style.WARNING(f"  note: {warning}"))
        self.stdout.write(f"Demo logins (password {DEMO_PASSWORD!r}):")
        for user in USERS:
            self.stdout.write(f"  {user.username:<11} {user.description}")
