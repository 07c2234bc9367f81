"""GPU health as the DCGM exporters last reported it, one row per node.

The table keeps the name it had before health had an app of its own (``db_table``).
"""

from __future__ import annotations

from django.db import models

from cluster.scope import ScopedManager, cluster_key


class NodeHealth(models.Model):
    """What the node's DCGM exporter reported at the last collection: per GPU utilisation,
    memory, temperature, power, the last Xid, and per MIG instance utilisation and memory."""

    cluster = cluster_key(related_name="node_health")
    node = models.CharField(max_length=253)
    observed_at = models.DateTimeField()
    error = models.TextField(blank=True, help_text="Why the exporter could not be read.")
    gpus = models.JSONField(default=list)
    findings = models.JSONField(default=list, help_text="What needs attention, worst first.")
    worst = models.CharField(
        max_length=8, default="ok", help_text="ok, info, warning or critical", db_index=True
    )

    objects = ScopedManager["NodeHealth"]()

    class Meta:
        db_table = "fleet_nodehealth"
        ordering = ["node"]
        constraints = [models.UniqueConstraint(fields=["cluster", "node"], name="node_health_once")]

    def __str__(self) -> str:
        return f"{self.node}: {self.worst}"
