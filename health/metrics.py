"""GPU health gauges for /metrics, per cluster: nodes by their worst finding, findings by
severity, nodes whose DCGM exporter could not be read and the age of the oldest reading
(one query whatever the number of nodes)."""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from health.findings import SEVERITY
from health.models import NodeHealth


def health_gauges() -> Iterator[GaugeMetricFamily]:
    now = timezone.now()
    nodes = GaugeMetricFamily(
        "quartermaster_gpu_health_nodes",
        "Nodes by the worst finding on their GPUs (ok, info, warning, critical).",
        labels=["cluster", "worst"],
    )
    findings = GaugeMetricFamily(
        "quartermaster_gpu_health_findings",
        "Findings on the GPUs (Xids, failed row remapping, heat) by severity; "
        "needs_drain counts those whose advice is to drain the node.",
        labels=["cluster", "severity", "needs_drain"],
    )
    unread = GaugeMetricFamily(
        "quartermaster_gpu_health_unread_nodes",
        "Nodes whose DCGM exporter could not be read at the last collection.",
        labels=["cluster"],
    )
    age = GaugeMetricFamily(
        "quartermaster_gpu_health_age_seconds",
        "Seconds since the oldest of the cluster's node readings (alert when it grows).",
        labels=["cluster"],
    )
    by_worst: dict[tuple[str, str], int] = {}
    by_severity: dict[tuple[str, str, str], int] = {}
    errors: dict[str, int] = {}
    oldest: dict[str, float] = {}
    rows = NodeHealth.objects.on_every_cluster().values_list(
        "cluster__name", "worst", "findings", "error", "observed_at"
    )
    for cluster, worst, found, error, observed in rows:
        for level in SEVERITY:
            by_worst.setdefault((cluster, level), 0)
            for drain in ("false", "true"):
                if level != "ok":
                    by_severity.setdefault((cluster, level, drain), 0)
        if worst in SEVERITY:
            by_worst[(cluster, worst)] += 1
        for finding in found or []:
            severity = finding.get("severity") if isinstance(finding, dict) else None
            if severity in SEVERITY and severity != "ok":
                drain = "true" if finding.get("needs_drain") else "false"
                by_severity[(cluster, severity, drain)] += 1
        errors[cluster] = errors.get(cluster, 0) + (1 if error else 0)
        oldest[cluster] = max(oldest.get(cluster, 0.0), (now - observed).total_seconds())
    for (cluster, level), n in sorted(by_worst.items()):
        nodes.add_metric([cluster, level], n)
    for key, n in sorted(by_severity.items()):
        findings.add_metric(list(key), n)
    for cluster, n in sorted(errors.items()):
        unread.add_metric([cluster], n)
        age.add_metric([cluster], oldest[cluster])
    yield from (nodes, findings, unread, age)
