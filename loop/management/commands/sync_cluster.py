"""``manage.py sync_cluster [--cluster NAME]``: apply desired state to a cluster and poll it
now, in this process (GPU health: ``manage.py collect_gpu_health``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.connection import gateway_for
from cluster.credentials import CredentialKeyError
from cluster.management.cluster_option import named_cluster
from kube import KubeError
from loop.apply import apply_desired_state
from loop.poll import poll_cluster


class Command(BaseCommand):
    help = "Apply the portal's desired state to a cluster, then poll its fleet once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--full", action="store_true", help="Re-apply unchanged objects too.")
        parser.add_argument("--poll-only", action="store_true")
        parser.add_argument(
            "--cluster", help="The cluster's name (default: the one the settings connect to)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = named_cluster(options.get("cluster"))
        try:
            gateway = gateway_for(cluster)
            if not options["poll_only"]:
                report = apply_desired_state(gateway=gateway, cluster=cluster, full=options["full"])
                self.stdout.write(
                    f"{cluster.name}: applied {len(report.applied)}, unchanged "
                    f"{report.unchanged}, removed {len(report.removed)}, conflicts "
                    f"{len(report.conflicts)}, failed {len(report.failed)}"
                )
                for name in report.conflicts + report.failed:
                    self.stdout.write(self.style.WARNING(f"  not applied: {name}"))
            run = poll_cluster(gateway=gateway, cluster=cluster)
        except KubeError as exc:
            raise CommandError(exc.message) from exc
        except CredentialKeyError as exc:
            raise CommandError(str(exc)) from exc
        if run.error:
            raise CommandError(f"poll of {cluster.name} failed: {run.error}")
        self.stdout.write(
            f"{cluster.name}: polled {run.nodes} nodes and {run.pods} pods in {run.duration_ms} ms"
        )
