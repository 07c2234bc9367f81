"""GPU health: read the DCGM exporters (through the API server's pod proxy, or a Prometheus
that scrapes them), store per node what they say, and turn bad GPUs into suggested
cordon-and-drain requests that go through the normal approval flow."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from fleet import dcgm
from fleet.models import NodeHealth
from kube import Gateway, KubeError

log = logging.getLogger(__name__)


@dataclass
class Collected:
    """Per node: its GPUs, or why they could not be read."""

    gpus: dict[str, list[dcgm.Gpu]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def running_exporters(pods: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(pod, node) of the DCGM exporter pods (QM_DCGM_EXPORTER_SELECTOR) running on a node."""
    wanted = dict(
        part.strip().split("=", 1)
        for part in settings.QM_DCGM_EXPORTER_SELECTOR.split(",")
        if "=" in part
    )
    out = []
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        node = (pod.get("spec") or {}).get("nodeName", "")
        running = (pod.get("status") or {}).get("phase") == "Running"
        if running and node and all(labels.get(k) == v for k, v in wanted.items()):
            out.append((pod["metadata"]["name"], node))
    return out


def scrape_exporter(gateway: Gateway, namespace: str, pod: str) -> str:
    """One exporter's /metrics through the API server's pod proxy."""
    return gateway.pod_proxy_get(namespace, pod, settings.QM_DCGM_PORT, "metrics")


def read_through_proxy(gateway: Gateway) -> Collected:
    """Each running exporter pod's /metrics through ``pods/proxy`` (a few at a time)."""
    namespace = settings.QM_GPU_OPERATOR_NAMESPACE
    pods = gateway.list(
        "v1", "Pod", namespace=namespace, label_selector=settings.QM_DCGM_EXPORTER_SELECTOR
    )
    out = Collected()

    def scrape(target: tuple[str, str]) -> tuple[str, str | None, str]:
        pod, node = target
        try:
            text = scrape_exporter(gateway, namespace, pod)
        except KubeError as exc:
            return node, None, f"{pod}: {exc.message}"
        return node, text, ""

    with ThreadPoolExecutor(max_workers=max(1, settings.QM_DCGM_CONCURRENCY)) as pool:
        for node, text, error in pool.map(scrape, running_exporters(pods)):
            if text is None:
                out.errors[node] = error
                continue
            found = dcgm.gpus_by_node(dcgm.parse_exposition(text), default_node=node)
            out.gpus[node] = found.get(node, [])
    return out


def read_from_prometheus(url: str) -> Collected:
    """One instant query for every wanted DCGM series of the fleet."""
    query = '{__name__=~"' + "|".join(dcgm.WANTED) + '"}'
    target = f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    try:
        with urllib.request.urlopen(target, timeout=30) as response:
            body = json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PrometheusError(f"Prometheus at {url} did not answer: {exc}") from exc
    if body.get("status") != "success":
        raise PrometheusError(f"Prometheus at {url} refused the query: {body.get('error', body)}")
    samples = dcgm.samples_from_prometheus(body["data"]["result"])
    return Collected(gpus=dcgm.gpus_by_node(samples))


class PrometheusError(Exception):
    pass


def collect(gateway: Gateway | None) -> Collected:
    if settings.QM_DCGM_SOURCE == "prometheus":
        return read_from_prometheus(settings.QM_PROMETHEUS_URL)
    if gateway is None:
        return Collected()
    return read_through_proxy(gateway)


def store(collected: Collected) -> list[NodeHealth]:
    """One row per node, replaced; nodes read this time only (a silent exporter keeps its
    last word, and says since when)."""
    now = timezone.now()
    rows = []
    for node, gpus in collected.gpus.items():
        findings = dcgm.assess(gpus, hot_c=settings.QM_GPU_HOT_CELSIUS)
        rows.append(
            NodeHealth(
                node=node,
                observed_at=now,
                error="",
                gpus=dcgm.as_json(gpus),
                findings=[f.__dict__ for f in findings],
                worst=dcgm.worst(findings),
            )
        )
    with transaction.atomic():
        NodeHealth.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["node"],
            update_fields=["observed_at", "error", "gpus", "findings", "worst"],
        )
        # Unreadable exporters: the error, and the last reading kept (one statement).
        NodeHealth.objects.bulk_create(
            [NodeHealth(node=n, observed_at=now, error=e) for n, e in collected.errors.items()],
            update_conflicts=True,
            unique_fields=["node"],
            update_fields=["error"],
        )
    return rows


def collect_gpu_health(gateway: Gateway | None) -> dict[str, Any]:
    """Collect, store, and suggest drains; what happened, for the task's log."""
    from fleet.drains import suggest_drains

    if settings.QM_DCGM_SOURCE == "off":
        return {"source": "off"}
    collected = collect(gateway)
    rows = store(collected)
    suggested = suggest_drains(rows)
    return {
        "source": settings.QM_DCGM_SOURCE,
        "nodes": len(rows),
        "unreadable": len(collected.errors),
        "attention": sum(1 for r in rows if r.worst in ("warning", "critical")),
        "suggested": suggested,
    }
