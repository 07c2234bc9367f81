"""With two clusters, an admin switches the Fleet page to the other cluster in a real
browser: its pools alone are shown, the choice stays on the next visit, each cluster's
freshness is told, and the switcher fits a phone's header."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from cluster.models import Cluster, SyncRun
from cluster.services import settings_cluster
from fleet.models import NodePool
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from tests.factories import ObservedNodeFactory

pytestmark = pytest.mark.django_db(transaction=True)


def two_fleets() -> Cluster:
    """The demo's pools with a node each on the settings' cluster; an inference cluster
    with a pool of H100s of its own, unreachable for five minutes."""
    train = settings_cluster()
    for name in ("train", "h100"):
        ObservedNodeFactory(
            cluster=train, name=f"gpu-{name}-01", labels={"quartermaster.io/pool": name}
        )
    infer = Cluster.objects.create(
        name="inference", display_name="Inference", connection="in_cluster"
    )
    NodePool.objects.create(
        cluster=infer,
        name="serve-h100",
        node_selector={"quartermaster.io/pool": "serve-h100"},
        purpose="infer",
    )
    for i in range(3):
        ObservedNodeFactory(
            cluster=infer,
            name=f"infer-h100-{i:02d}",
            gpu_product="NVIDIA-H100-80GB-HBM3",
            mig_config="all-disabled",
            labels={"quartermaster.io/pool": "serve-h100"},
            allocatable={"nvidia.com/gpu": "8"},
        )
    now = timezone.now()
    SyncRun.objects.create(cluster=train, started_at=now, finished_at=now)
    SyncRun.objects.create(
        cluster=infer, started_at=now - dt.timedelta(minutes=9), finished_at=now, nodes=3
    )
    SyncRun.objects.create(
        cluster=infer,
        started_at=now - dt.timedelta(minutes=5),
        finished_at=now,
        error="connection refused",
    )
    return infer


def test_an_admin_switches_the_fleet_to_the_other_cluster(
    live_server: Any, demo: None, page: Any
) -> None:
    base = live_server.url
    two_fleets()
    sign_in(page, base, "admin")
    page.goto(f"{base}/fleet/")
    pools = page.locator("section.pool h2")
    expect(pools.filter(has_text="Pool train")).to_be_visible()  # every cluster at first
    expect(pools.filter(has_text="Pool serve-h100")).to_be_visible()
    freshness = page.locator("#cluster-freshness")
    expect(freshness).to_contain_text("Inference unreachable since")
    expect(freshness).to_contain_text("connection refused")

    page.get_by_label("Cluster", exact=True).select_option("inference")
    expect(page).to_have_url(re.compile(r"cluster=inference"))
    expect(pools.filter(has_text="Pool serve-h100")).to_be_visible()
    expect(pools.filter(has_text="Pool train")).to_have_count(0)
    expect(page.locator("section.pool").first).to_contain_text("3 nodes")
    page.goto(f"{base}/fleet/")  # the choice is kept
    expect(page.get_by_label("Cluster", exact=True)).to_have_value("inference")
    expect(pools.filter(has_text="Pool train")).to_have_count(0)
    screenshot(page, "fleet-inference")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    box = page.locator("#cluster-switcher").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    screenshot(page, "fleet-inference-390")
    page.set_viewport_size({"width": 1366, "height": 900})

    page.get_by_label("Cluster", exact=True).select_option("all")
    expect(pools.filter(has_text="Pool train")).to_be_visible()
    expect(page.get_by_role("heading", name=re.compile("Cluster Inference"))).to_be_visible()
