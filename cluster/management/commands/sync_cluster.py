"""``manage.py sync_cluster``: apply desired state and poll the cluster now, in this process
(GPU health: ``manage.py collect_gpu_health``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.apply import apply_desired_state
from cluster.connection import get_gateway
from cluster.poll import poll_cluster
from kube import KubeError


class Command(BaseCommand):
    help = "Apply the portal's desired state to the cluster, then poll the fleet once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--full", action="store_true", help="Re-apply unchanged objects too.")
        parser.add_argument("--poll-only", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            gateway = get_gateway()
            if not options["poll_only"]:
                report = apply_desired_state(gateway=gateway, full=options["full"])
                self.stdout.write(
                    f"applied {len(report.applied)}, unchanged {report.unchanged}, "
                    f"removed {len(report.removed)}, conflicts {len(report.conflicts)}, "
                    f"failed {len(report.failed)}"
                )
                for name in report.conflicts + report.failed:
                    self.stdout.write(self.style.WARNING(f"  not applied: {name}"))
            run = poll_cluster(gateway=gateway)
        except KubeError as exc:
            raise CommandError(exc.message) from exc
        if run.error:
            raise CommandError(f"poll failed: {run.error}")
        self.stdout.write(f"polled {run.nodes} nodes and {run.pods} pods in {run.duration_ms} ms")
