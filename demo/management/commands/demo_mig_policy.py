"""``manage.py demo_mig_policy``: seed the inference cluster's MIG policy through a proposal
and its approval; ``dev.py run`` calls it once the cluster's DRA GPUs are polled."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from demo.services import load_demo_mig_policy


class Command(BaseCommand):
    help = "Seed the demo inference cluster's MIG policy for per-claim MIG (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(load_demo_mig_policy())
