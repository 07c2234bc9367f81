"""An admin registers a cluster in a real browser: a refused name is shown next to its
field and nothing is saved, the token never comes back into the page, and the connection
test answers in the page (htmx) with what the portal may do there."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

import devcluster
from cluster.connection import gateway_for
from cluster.models import Cluster
from loop.poll import poll_cluster
from tests.deploy.conftest import cluster_role
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import htmx_idle, sign_in

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "portal-token-for-the-browser-test"
SERVICE_ACCOUNT = "system:serviceaccount:quartermaster:quartermaster"


@pytest.mark.demo_cluster(users=lambda: {TOKEN: (SERVICE_ACCOUNT, cluster_role()["rules"])})
def test_an_admin_registers_a_cluster_and_tests_its_connection(
    live_server: Any, demo: None, demo_cluster: devcluster.DemoCluster, page: Any
) -> None:
    base = live_server.url
    sign_in(page, base, "admin")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Clusters").click()
    expect(page.get_by_role("heading", name="Clusters")).to_be_visible()
    page.get_by_role("link", name="Register a cluster").click()

    page.get_by_label("Name", exact=True).fill("GPU_East")
    page.get_by_label("Display name").fill("GPU east")
    page.get_by_label("Training").check()
    page.get_by_label("Connection", exact=True).select_option("token")
    page.get_by_role("textbox", name="API server URL").fill(demo_cluster.url)
    page.get_by_label("Credential", exact=True).fill(TOKEN)
    page.get_by_role("button", name="Register").click()
    expect(page.locator("#id_name-error")).to_contain_text("lowercase RFC 1123 label")
    expect(page.get_by_label("Name", exact=True)).to_have_attribute("aria-invalid", "true")
    assert TOKEN not in page.content()  # the refused form does not echo the token either
    assert not Cluster.objects.filter(display_name="GPU east").exists()

    page.get_by_label("Name", exact=True).fill("gpu-east")
    page.get_by_label("Credential", exact=True).fill(TOKEN)
    page.get_by_role("button", name="Register").click()
    expect(page.get_by_role("heading", name="GPU east")).to_be_visible()
    expect(page.get_by_text("stored encrypted")).to_be_visible()
    page.get_by_role("button", name="Test connection").click()
    htmx_idle(page)
    expect(page.get_by_role("status")).to_contain_text("Reached Kubernetes v1.36.2")
    expect(page.get_by_role("status")).to_contain_text("has every permission it needs")
    assert TOKEN not in page.content()
    # A poll of that cluster discovers what it runs; the page shows it after a reload.
    cluster = Cluster.objects.get(name="gpu-east")
    assert poll_cluster(gateway=gateway_for(cluster), cluster=cluster).error == ""
    page.reload()
    discovered = page.locator(f"#cluster-{cluster.pk}-discovery")
    expect(discovered).to_contain_text("serves v1beta2, v1beta1")
    expect(discovered).to_contain_text("The portal renders Kueue v1beta2 for this cluster")
    page.get_by_role("button", name="Test connection").click()
    htmx_idle(page)
    screenshot(page, "cluster-detail")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "cluster-detail-390")
    page.goto(f"{base}/clusters/")
    screenshot(page, "clusters-390")
    page.set_viewport_size({"width": 1366, "height": 900})
    screenshot(page, "clusters")
