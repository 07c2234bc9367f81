"""Applying everything again changes nothing in the cluster: the portal renders what the API
server and Kueue's webhook store (no ``globalDefault: false``, Kueue quantities as strings),
so a full re-apply leaves every object's generation and resourceVersion where they were."""

from __future__ import annotations

import time
from typing import Any

import pytest

import devcluster
from kube import Gateway, ObjectRef
from loop.apply import apply_desired_state, collect_manifests

pytestmark = pytest.mark.django_db


def versions(gateway: Gateway) -> dict[str, tuple[Any, Any]]:
    seen = {}
    for manifest in collect_manifests():
        live = gateway.get(ObjectRef.of(manifest))
        key = f"{manifest['kind']} {manifest['metadata'].get('namespace', '')}/{manifest['metadata']['name']}"
        seen[key] = (live["metadata"].get("generation"), live["metadata"]["resourceVersion"])
    return seen


def settled(gateway: Gateway, timeout: float = 30) -> dict[str, tuple[Any, Any]]:
    """The versions once the demo's controllers have written what an apply makes them write
    (Kueue's LocalQueue and ClusterQueue statuses, the quota's status): two reads a second
    apart agree. A status write moves the resourceVersion; only the re-apply is measured."""
    last, deadline = versions(gateway), time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1)
        now = versions(gateway)
        if now == last:
            return now
        last = now
    raise AssertionError(f"the cluster did not settle after the first apply: {last}")


def test_a_full_reapply_changes_nothing(
    settings: Any, demo: None, demo_cluster: devcluster.DemoCluster, gateway: Gateway
) -> None:
    settings.KUBE_URL = demo_cluster.url
    apply_desired_state(gateway=gateway, full=True)
    before = settled(gateway)
    assert any(key.startswith("ClusterQueue ") for key in before)
    assert any(key.startswith("PriorityClass ") for key in before)
    apply_desired_state(gateway=gateway, full=True)
    assert versions(gateway) == before
