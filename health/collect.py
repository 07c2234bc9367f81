"""Reading GPU health: the DCGM exporters through the API server's pod proxy (a few at a
time), or one instant query to a Prometheus that scrapes them (QM_DCGM_SOURCE)."""

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

from gpus import dcgm
from kube import Gateway, KubeError
from portal.vocabulary.names import selector_matches

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
        if running and node and selector_matches(wanted, labels):
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


def collect(gateway: Gateway | None, *, source: str = "") -> Collected:
    """GPU health as ``source`` (by default QM_DCGM_SOURCE) reads it; no gateway: none
    through the API server."""
    if (source or settings.QM_DCGM_SOURCE) == "prometheus":
        return read_from_prometheus(settings.QM_PROMETHEUS_URL)
    if gateway is None:
        return Collected()
    return read_through_proxy(gateway)
