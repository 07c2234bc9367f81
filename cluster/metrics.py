"""The loop's gauges for /metrics: the last poll (duration, age, outcome) and open drift."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from cluster.decode import gpu_offer
from cluster.models import Drift, ObservedNode, SyncRun


def loop_gauges() -> Iterator[GaugeMetricFamily]:
    """Per cluster (label ``cluster``): its last poll's duration and outcome, the age of its
    last good poll; open drift by kind (three queries whatever the number of clusters)."""
    now = timezone.now()
    newest = (
        SyncRun.objects.on_every_cluster()
        .filter(finished_at__isnull=False)
        .order_by("cluster_id", "-started_at")
    )
    last = newest.select_related("cluster").distinct("cluster_id")
    good = dict(
        newest.filter(error="").distinct("cluster_id").values_list("cluster__name", "finished_at")
    )
    duration = GaugeMetricFamily(
        "quartermaster_sync_duration_seconds",
        "How long the last poll of the cluster took.",
        labels=["cluster"],
    )
    age = GaugeMetricFamily(
        "quartermaster_sync_age_seconds",
        "Seconds since the last successful poll of the cluster (alert when it grows).",
        labels=["cluster"],
    )
    ok = GaugeMetricFamily(
        "quartermaster_sync_last_ok",
        "1 when the last poll of the cluster succeeded.",
        labels=["cluster"],
    )
    for run in last:
        duration.add_metric([run.cluster.name], (run.duration_ms or 0) / 1000)
        ok.add_metric([run.cluster.name], 1 if run.ok else 0)
    for name, finished in good.items():
        if finished is not None:  # filtered on: finished polls only
            age.add_metric([name], (now - finished).total_seconds())
    yield from (duration, age, ok)
    drift = GaugeMetricFamily(
        "quartermaster_drift_open",
        "Differences between intent and cluster, by kind.",
        labels=["kind"],
    )
    open_drift = dict(
        Drift.objects.on_every_cluster()
        .filter(resolved_at__isnull=True)
        .values_list("kind")
        .annotate(n=Count("id"))
    )
    for kind in Drift.Kind.values:
        drift.add_metric([kind], open_drift.get(kind, 0))
    yield drift


def fleet_gauges() -> Iterator[GaugeMetricFamily]:
    """The fleet's GPU resources per cluster, pool (the node's pool label, "" without one)
    and resource: what the nodes offer and what pods hold; nodes per pool and how many of
    them are not ready or cordoned (one query whatever the number of nodes)."""
    allocatable = GaugeMetricFamily(
        "quartermaster_gpu_allocatable",
        "GPU resources the cluster's nodes offer, by pool and resource (whole GPUs or MIG "
        "instances).",
        labels=["cluster", "pool", "resource"],
    )
    allocated = GaugeMetricFamily(
        "quartermaster_gpu_allocated",
        "GPU resources pods hold on the cluster's nodes, by pool and resource.",
        labels=["cluster", "pool", "resource"],
    )
    nodes = GaugeMetricFamily(
        "quartermaster_gpu_nodes",
        "Nodes with GPU resources, by pool and condition (ready, not_ready, cordoned).",
        labels=["cluster", "pool", "condition"],
    )
    offered: dict[tuple[str, str, str], list[int]] = {}
    counted: dict[tuple[str, str, str], int] = {}
    rows = (
        ObservedNode.objects.on_every_cluster()
        .filter(gone_since__isnull=True)
        .values_list(
            "cluster__name", "pool_label", "allocatable", "allocated", "ready", "unschedulable"
        )
    )
    for cluster, pool, offer, held, ready, cordoned in rows:
        gpus = gpu_offer(offer or {})
        if not gpus:
            continue
        for resource, amount in gpus.items():
            sums = offered.setdefault((cluster, pool, resource), [0, 0])
            sums[0] += amount
            sums[1] += int((held or {}).get(resource, 0) or 0)
        condition = "cordoned" if cordoned else "ready" if ready else "not_ready"
        for each in ("ready", "not_ready", "cordoned"):
            counted.setdefault((cluster, pool, each), 0)
        counted[(cluster, pool, condition)] += 1
    for key, (offer_sum, held_sum) in sorted(offered.items()):
        allocatable.add_metric(list(key), offer_sum)
        allocated.add_metric(list(key), held_sum)
    for key, n in sorted(counted.items()):
        nodes.add_metric(list(key), n)
    yield from (allocatable, allocated, nodes)
