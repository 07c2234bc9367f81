"""Prometheus metrics of the portal itself, for the whole installation.

Web processes and Celery workers (any number of them, in any pod) add to counters in Redis
with one pipelined round trip per request or task; ``/metrics`` on any web pod reads them
back together with gauges computed from PostgreSQL (sync age and duration, pending
approvals, open drift). Scrape the Service: every pod answers with the same totals.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import redis
from django.conf import settings
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from portal.infra import shared_store

log = logging.getLogger(__name__)

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
HTTP_KEY = "qm:metrics:http"
TASK_KEY = "qm:metrics:tasks"
SEP = "\x1f"  # between label values in a hash field; never in a route, method or task name


def connection() -> redis.Redis:
    return shared_store.client(settings.QM_METRICS_REDIS_URL)


def _observe(key: str, labels: tuple[str, ...], seconds: float, extra: dict[str, int]) -> None:
    """Count one observation into its histogram (and ``extra`` counters); never raises."""
    base = SEP.join(labels)

    def count(store: redis.Redis) -> None:
        pipe = store.pipeline(transaction=False)
        pipe.hincrby(key, f"count{SEP}{base}", 1)
        pipe.hincrbyfloat(key, f"sum{SEP}{base}", seconds)
        for bound in BUCKETS:
            if seconds <= bound:
                pipe.hincrby(key, f"le{SEP}{bound}{SEP}{base}", 1)
        for name, value in extra.items():
            pipe.hincrby(key, f"{name}{SEP}{base}", value)
        pipe.execute()

    try:
        shared_store.call(settings.QM_METRICS_REDIS_URL, "metrics", count)
    except shared_store.StoreDown as exc:  # metrics never break a request or a task
        log.debug("metrics not recorded: %s", exc)


# The methods a label may name; any other (a client may send any token) counts as "other",
# so made-up methods cannot add series.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def observe_request(method: str, route: str, status: int, seconds: float) -> None:
    label = method if method in METHODS else "other"
    _observe(HTTP_KEY, (label, route, str(status)), seconds, {})


def observe_task(task: str, outcome: str, seconds: float) -> None:
    _observe(TASK_KEY, (task, outcome), seconds, {})


def _histograms(
    key: str, name: str, documentation: str, labels: list[str]
) -> HistogramMetricFamily:
    raw: dict[bytes, bytes] = connection().hgetall(key)  # type: ignore[assignment]
    series: dict[tuple[str, ...], dict[str, Any]] = defaultdict(
        lambda: {"count": 0, "sum": 0.0, "le": defaultdict(int)}
    )
    for field_bytes, value_bytes in raw.items():
        parts = field_bytes.decode().split(SEP)
        kind, value = parts[0], value_bytes.decode()
        if kind == "le":
            series[tuple(parts[2:])]["le"][float(parts[1])] = int(value)
        elif kind == "count":
            series[tuple(parts[1:])]["count"] = int(value)
        elif kind == "sum":
            series[tuple(parts[1:])]["sum"] = float(value)
    family = HistogramMetricFamily(name, documentation, labels=labels)
    for label_values, data in sorted(series.items()):
        buckets = [(str(b), data["le"].get(b, 0)) for b in BUCKETS]
        buckets.append(("+Inf", data["count"]))
        family.add_metric(list(label_values), buckets, data["sum"])
    return family


# State gauges read from PostgreSQL at scrape time; the apps above the ground floor add
# theirs at start-up (the loop: poll age and drift; changes: approvals and MIG changes).
GAUGES: list[Callable[[], Iterable[Metric]]] = []


def register(gauges: Callable[[], Iterable[Metric]]) -> None:
    """Add a function whose metric families /metrics reports."""
    if gauges not in GAUGES:
        GAUGES.append(gauges)


class PortalCollector(Collector):
    """Reads the shared counters (Redis) and the state gauges (PostgreSQL) at scrape time."""

    def collect(self) -> Iterator[Any]:
        yield from self._from_redis()
        yield from self._from_database()

    def _from_redis(self) -> Iterator[Any]:
        up = GaugeMetricFamily(
            "quartermaster_metrics_store_up", "Whether the shared metrics store (Redis) answered."
        )
        try:
            families = [
                _histograms(
                    HTTP_KEY,
                    "quartermaster_http_request_duration_seconds",
                    "Time to answer an HTTP request, by method, route and status.",
                    ["method", "route", "status"],
                ),
                _histograms(
                    TASK_KEY,
                    "quartermaster_task_duration_seconds",
                    "Time a Celery task ran, by task and outcome (success, failure, retry).",
                    ["task", "outcome"],
                ),
            ]
        except (redis.RedisError, OSError, ValueError):
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _from_database(self) -> Iterator[Any]:
        for gauges in GAUGES:
            yield from gauges()


def exposition() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PortalCollector())
    return generate_latest(registry)


class TaskTimer:
    """Celery signal handlers: time every task and count its outcome."""

    started: dict[str, float] = {}

    @classmethod
    def prerun(cls, task_id: str = "", **_: Any) -> None:
        cls.started[task_id] = time.perf_counter()

    @classmethod
    def postrun(cls, task_id: str = "", task: Any = None, state: str = "", **_: Any) -> None:
        began = cls.started.pop(task_id, None)
        if began is None or task is None:
            return
        outcome = {"SUCCESS": "success", "FAILURE": "failure", "RETRY": "retry"}.get(
            state, (state or "unknown").lower()
        )
        observe_task(task.name, outcome, time.perf_counter() - began)
