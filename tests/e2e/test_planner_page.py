"""The MIG layout planner page in a real browser, on the demo cluster: the seed incident is
planned as its fix (gpu-a100-03 to all-3g.40gb), and once the fix has run nothing is
proposed."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from kube import Gateway
from tests.e2e.test_mig_change_flow import sign_in
from tests.integration.test_planner_cases import fix_the_seed_incident

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_planner_page_proposes_the_fix_then_nothing(
    live_server: Any, portal_cluster: Gateway, page: Any
) -> None:
    base = live_server.url
    sign_in(page, base, "lead-a")
    page.goto(f"{base}/planner/")
    expect(page.locator("#plan-node-gpu-a100-03")).to_contain_text("all-3g.40gb")
    expect(page.locator("#plan-summary")).to_contain_text("1 node to change")
    assert page.locator("#plan-nodes tbody tr").count() == 1

    fix_the_seed_incident(portal_cluster)
    page.goto(f"{base}/planner/")
    expect(page.locator("#plan-summary")).to_contain_text("No node needs to change.")
    expect(page.get_by_text("Every node keeps its config.")).to_be_visible()
