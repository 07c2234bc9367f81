"""The admin's one door in a real browser: a ClusterQueue raised beyond the fleet in the
admin is refused with the service's words next to the inputs that lift it (the tick and the
reason the Queues page asks for), nothing saved; with them it saves."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from queues.models import ClusterQueue
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from tests.factories import demo_fleet_nodes

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_admin_asks_what_the_queues_page_asks_before_promising_beyond_the_fleet(
    live_server: Any, demo: None, page: Any
) -> None:
    demo_fleet_nodes()  # 16 H100 GPUs behind h100-80gb, in any layout
    cq = ClusterQueue.objects.get(name="cq-train")
    groups = cq.resource_groups
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "30"
    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/admin/queues/clusterqueue/{cq.pk}/change/")
    page.locator("#id_resource_groups").fill(json.dumps(groups, indent=2))
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".errornote")).to_be_visible()
    reason = page.locator(".field-override_reason")
    expect(reason).to_contain_text("give the reason to promise beyond the fleet")
    expect(page.locator(".field-promise_more_than_exists")).to_contain_text(
        "Queues would promise more than the fleet offers behind these flavors"
    )
    screenshot(page, "admin-cluster-queue-beyond-the-fleet")
    assert ClusterQueue.objects.get(pk=cq.pk).nominal_quota("h100-80gb", "nvidia.com/gpu") == "12"
    page.get_by_label("Promise more than exists").check()
    page.get_by_label("Reason to promise beyond the fleet").fill("Two H100 nodes arrive Monday.")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page).to_have_url(re.compile(r"/admin/queues/clusterqueue/$"))
    assert ClusterQueue.objects.get(pk=cq.pk).nominal_quota("h100-80gb", "nvidia.com/gpu") == "30"
