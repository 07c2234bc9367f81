"""``manage.py collect_gpu_health``: read the DCGM exporters now, in this process."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from cluster.connection import cluster_configured, get_gateway
from health.collect import PrometheusError
from health.services import collect_gpu_health
from kube import KubeError


class Command(BaseCommand):
    help = "Read GPU health from the DCGM exporters (or Prometheus) and suggest drains."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            health = collect_gpu_health(get_gateway() if cluster_configured() else None)
        except (KubeError, PrometheusError) as exc:
            raise CommandError(f"GPU health not read: {exc}") from exc
        if health.get("source") == "off":
            self.stdout.write("GPU health is not read (QM_DCGM_SOURCE=off)")
            return
        self.stdout.write(
            f"GPU health of {health['nodes']} nodes, {health['attention']} needing "
            f"attention; drains suggested: {len(health['suggested'])}"
        )
