"""Applying everything again changes nothing in the cluster: the portal renders what the API
server and Kueue's webhook store (no ``globalDefault: false``, Kueue quantities as strings),
so a full re-apply leaves every object's generation and resourceVersion where they were."""

from __future__ import annotations

from typing import Any

import pytest

import devcluster
from cluster.apply import apply_desired_state, collect_manifests
from kube import Gateway, ObjectRef

pytestmark = pytest.mark.django_db


def versions(gateway: Gateway) -> dict[str, tuple[Any, Any]]:
    seen = {}
    for manifest in collect_manifests():
        live = gateway.get(ObjectRef.of(manifest))
        key = f"{manifest['kind']} {manifest['metadata'].get('namespace', '')}/{manifest['metadata']['name']}"
        seen[key] = (live["metadata"].get("generation"), live["metadata"]["resourceVersion"])
    return seen


def test_a_full_reapply_changes_nothing(
    settings: Any, demo: None, demo_cluster: devcluster.DemoCluster, gateway: Gateway
) -> None:
    settings.KUBE_URL = demo_cluster.url
    apply_desired_state(gateway=gateway, full=True)
    before = versions(gateway)
    assert any(key.startswith("ClusterQueue ") for key in before)
    assert any(key.startswith("PriorityClass ") for key in before)
    apply_desired_state(gateway=gateway, full=True)
    assert versions(gateway) == before
