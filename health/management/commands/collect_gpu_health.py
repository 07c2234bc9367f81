"""``manage.py collect_gpu_health [--cluster NAME]``: read a cluster's DCGM exporters now, in
this process."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.connection import cluster_configured, gateway_for
from cluster.credentials import CredentialKeyError
from cluster.management.cluster_option import named_cluster
from cluster.models import Cluster
from health.collect import PrometheusError
from health.services import collect_gpu_health
from kube import KubeError


class Command(BaseCommand):
    help = "Read GPU health from the DCGM exporters (or Prometheus) and suggest drains."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--cluster", help="The cluster's name (default: the one the settings connect to)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = named_cluster(options.get("cluster"))
        reachable = cluster.connection != Cluster.Connection.SETTINGS or cluster_configured()
        try:
            gateway = gateway_for(cluster) if reachable else None
            health = collect_gpu_health(gateway, cluster=cluster)
        except (KubeError, PrometheusError, CredentialKeyError) as exc:
            raise CommandError(f"GPU health of {cluster.name} not read: {exc}") from exc
        if health.get("source") == "off":
            self.stdout.write("GPU health is not read (QM_DCGM_SOURCE=off)")
            return
        self.stdout.write(
            f"{cluster.name}: GPU health of {health['nodes']} nodes, {health['attention']} "
            f"needing attention; drains suggested: {len(health['suggested'])}"
        )
