"""The MIG layout planner page in a real browser, on the demo cluster: the seed incident is
planned as its fix (gpu-a100-03 to all-3g.40gb), and once the fix has run nothing is
proposed; with the fix run and nothing waiting, a platform admin is told no change is
needed and offered no request to ask for."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
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


def remove_waiting_demand(gateway: Gateway) -> list[str]:
    """Every Workload Kueue has not admitted and every Pending pod deleted from the cluster,
    then the cluster polled: nothing waits. Returns what was deleted."""
    gone = []
    for api_version, kind, waits in (
        ("kueue.x-k8s.io/v1beta2", "Workload", lambda o: not o["status"].get("admission")),
        ("v1", "Pod", lambda o: o["status"].get("phase") == "Pending"),
    ):
        for item in gateway.list(api_version, kind):
            item.setdefault("status", {})
            if waits(item):
                meta = item["metadata"]
                ref = ObjectRef(api_version, kind, meta["name"], meta.get("namespace", ""))
                gateway.delete(ref)
                gone.append(str(ref))
    poll_cluster(gateway=gateway)
    return gone


def test_with_nothing_waiting_the_planner_needs_no_change_and_offers_no_request(
    live_server: Any, portal_cluster: Gateway, page: Any
) -> None:
    base = live_server.url
    ask = page.get_by_role("button", name="Ask for these MIG changes")
    sign_in(page, base, "admin")
    page.goto(f"{base}/planner/")
    expect(ask).to_be_visible()  # the seed incident waits: a change is offered

    # The fleet as the queues promise it (the fix run), and nothing waiting any more.
    fix_the_seed_incident(portal_cluster)
    assert remove_waiting_demand(portal_cluster)  # the seed's pending pods, at least
    page.goto(f"{base}/planner/")
    expect(page.locator("#plan-summary")).to_contain_text("No node needs to change.")
    expect(page.get_by_text("Every node keeps its config.")).to_be_visible()
    expect(ask).to_have_count(0)
    expect(page.locator("#plan-form")).to_have_count(0)
