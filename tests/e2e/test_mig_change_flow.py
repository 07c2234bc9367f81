"""The story of the seed incident, in a real browser against the running portal: a team
lead sees why the training job waits, asks for the MIG change with a live impact preview,
an approver approves, and the timeline runs to success on the demo cluster. The approver's
other pages (GPU health and the workspace, the queues, the usage history) need only the demo
applied and polled: each is a test of its own, so they run beside the story."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from playwright.sync_api import expect

import devcluster
from changes import mig
from changes.models import MigChangeRequest
from cluster.models import AppliedObject
from demo.data import DEMO_PASSWORD
from demo.services import load_demo
from devcluster.controllers import Options
from devcluster.scenario import workload
from health.services import collect_gpu_health
from kube import Gateway, ObjectRef, connect
from loop.desired import collect_manifests
from loop.poll import poll_cluster
from tenants.models import Team
from tests.e2e.conftest import screenshot
from tests.support import Worker, protect_dev_pod, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # MIG Manager takes half a second: the browser sees the timeline move step by step.
    # Kueue's fair sharing on, as the run command has it: the Queues page shows the shares.
    pytest.mark.demo_cluster(
        options=Options(mig_delay_seconds=0.5, retry_seconds=0.5, tick=0.05, fair_sharing=True)
    ),
]


def htmx_idle(page: Any) -> None:
    """Wait until htmx has no request in flight and has settled (wired) swapped content."""
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
    )


def demo_applied(demo_cluster: devcluster.DemoCluster) -> Gateway:
    """The demo loaded, applied by the worker to the demo cluster and polled once, after the
    demo cluster's controllers caught up with the apply (``settle``): polled at once, the
    seed's workloads could still say their LocalQueue does not exist, as Kueue said before
    the portal made it (seen once in CI: the lead's home then said so)."""
    gateway = connect(url=demo_cluster.url)
    load_demo()
    wanted = len(collect_manifests())
    wait_for(
        lambda: AppliedObject.objects.filter(outcome="applied").count() == wanted,
        what="the demo objects applied",
    )
    demo_cluster.settle()
    poll_cluster(gateway=gateway)
    return gateway


# The tables of a page (other than a node list, which scrolls whole on purpose) that are
# wider than their box: clipped on a phone, read only by scrolling each sideways.
CLIPPED_TABLES = """() => [...document.querySelectorAll('main table, main .table-wrap')]
  .filter(t => !t.closest('.node-list') && t.scrollWidth > t.clientWidth + 1)
  .map(t => t.getAttribute('aria-label') || t.innerText.slice(0, 60))"""


def sign_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name=re.compile("sign in|log in", re.I)).click()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()


def test_lead_asks_approver_approves_timeline_succeeds(
    live_server: Any, worker: Worker, demo_cluster: devcluster.DemoCluster, page: Any
) -> None:
    base = live_server.url
    gateway = demo_applied(demo_cluster)

    # The lead's home: the Pending training pod and why it waits (the drifted node).
    sign_in(page, base, "lead-a")
    page.goto(f"{base}/")
    why = page.locator(".why-box").filter(has_text="gpu-a100-03").first
    expect(why).to_be_visible()
    expect(why).to_contain_text("all-3g.40gb")
    expect(page.locator("body")).not_to_contain_text("doesn't exist")
    # What runs, with its GPUs, and the Job the quota refuses as one card with its pod.
    expect(page.get_by_role("heading", name="Running GPU work").first).to_be_visible()
    expect(page.locator("[id^=create-failure-]").filter(has_text="eval-sweep")).to_contain_text(
        "was created and waits too"
    )
    screenshot(page, "home-lead")
    # On a phone's width the home reads top to bottom: nothing scrolls sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.evaluate(CLIPPED_TABLES) == []
    screenshot(page, "home-lead-390")
    page.set_viewport_size({"width": 1366, "height": 900})

    # Ask for the MIG change; the impact preview follows the choices.
    page.goto(f"{base}/changes/new/")
    page.get_by_label("gpu-a100-03").check()
    # the configs the node's GPU model can take appear once a node is picked
    expect(page.locator("#id_target_config option[value='all-3g.40gb']")).to_have_count(1)
    htmx_idle(page)
    page.get_by_label("Target MIG config").select_option("all-3g.40gb")
    assessment = page.locator("#assessment")
    expect(assessment).to_be_visible()
    expect(assessment).to_contain_text("Offers after (all-3g.40gb)")
    expect(assessment).to_contain_text("1 Pending pod of team-a would fit afterwards.")
    expect(assessment.locator("li", has_text="team-a/train-3g")).to_have_count(1)
    # team-b's pod is evicted: counted for lead-a, never named.
    expect(assessment).to_contain_text("1 pod in team-b")
    expect(assessment).not_to_contain_text("dev-test-1g")
    htmx_idle(page)
    page.get_by_label("Target MIG config").select_option("all-1g.10gb")
    expect(assessment).to_contain_text("Offers after (all-1g.10gb)")
    expect(assessment).not_to_contain_text("team-a/train-3g")
    htmx_idle(page)
    page.get_by_label("Target MIG config").select_option("all-3g.40gb")
    expect(assessment).to_contain_text("Offers after (all-3g.40gb)")
    htmx_idle(page)
    page.get_by_label("Reason").fill("Back to the training layout (seed incident)")
    screenshot(page, "change-form")
    page.get_by_role("button", name="Send for approval").click()
    expect(page).to_have_url(re.compile(r"/changes/\d+/$"))
    change = MigChangeRequest.objects.get()
    assert change.state == "pending"
    page.get_by_role("button", name="Sign out").click()

    # The approver reads the assessment beside the decision and approves.
    sign_in(page, base, "approver")
    page.goto(f"{base}/changes/{change.pk}/")
    expect(page.locator("#assessment")).to_be_visible()
    page.get_by_label("Comment").fill("ok, team-b agreed")
    page.get_by_role("button", name="Approve").click()  # it breaks quota: a tick first
    tick = page.get_by_label("I have read why, and approve it anyway")
    assert tick.evaluate("box => !box.validity.valid")  # the browser holds the form back
    expect(page.get_by_label("Comment")).to_have_value("ok, team-b agreed")  # nothing lost
    assert MigChangeRequest.objects.get().state == "pending"
    expect(page.locator("#confirm-box")).to_contain_text("Queues promise 16 mig-1g.10gb")
    page.get_by_label("I have read why, and approve it anyway").check()
    page.get_by_role("button", name="Approve").click()

    # The timeline updates itself until the change succeeded on the demo cluster.
    timeline = page.locator(f"#change-{change.pk}-timeline")
    expect(timeline).to_contain_text("Succeeded", timeout=60_000)
    expect(timeline.locator("li.step-done").first).to_be_visible()
    expect(page.locator("#change-state")).to_have_text("Succeeded")  # the header follows
    screenshot(page, "change-succeeded")
    node = gateway.get(ObjectRef("v1", "Node", "gpu-a100-03"))
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "all-3g.40gb"

    # team-b, whose pod it evicted, is told at home and reads the request with its pod named.
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, base, "lead-b")
    page.goto(f"{base}/")
    page.get_by_role("link", name=f"MIG change #{change.pk}").click()
    expect(page).to_have_url(re.compile(rf"/changes/{change.pk}/$"))
    timeline = page.locator(f"#change-{change.pk}-timeline")
    expect(timeline.locator("li", has_text="evict")).to_contain_text("evicted team-b/dev-test-1g")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    screenshot(page, "change-seen-by-the-team-it-hit")
    # ... and was told without subscribing: the request, its approval, its end and the
    # eviction, each naming team-b's own pod and no other team's.
    page.goto(f"{base}/notifications/")
    told = page.locator("#notification-list")
    evicted = told.locator("tr", has_text=f"MIG change #{change.pk} evicted 1 pod of team team-b")
    expect(evicted).to_contain_text("team-b/dev-test-1g")
    expect(evicted).to_contain_text("unread")
    for said in ("requested", "approved", "succeeded"):
        expect(
            told.get_by_role("link", name=re.compile(rf"MIG change #{change.pk} {said}"))
        ).to_be_visible()
    expect(told).not_to_contain_text("team-a/")
    screenshot(page, "notifications-of-the-team-it-hit")
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, base, "approver")

    # The fleet page shows the node back on its pool's layout after the next poll.
    wait_for(lambda: poll_cluster(gateway=gateway).ok, what="a poll")
    assert collect_gpu_health(gateway)["suggested"]  # GPU health, as the worker reads it
    page.goto(f"{base}/fleet/")
    train = page.locator(
        "section.pool", has=page.get_by_role("heading", name=re.compile("Pool train"))
    )
    expect(train).to_contain_text("nvidia.com/mig-3g.40gb")
    expect(train).to_contain_text("all-3g.40gb")
    # The pool's node list opens in place (htmx), those needing attention first.
    train.locator("summary").click()
    rows = train.locator("tbody tr")
    expect(rows.first).to_be_visible()
    expect(train.get_by_role("link", name="gpu-a100-03")).to_be_visible()
    htmx_idle(page)
    # The page's own refresh (every 30 s) keeps the list that was opened, as it was.
    page.evaluate(
        "htmx.ajax('GET', '/fleet/', {target: '#fleet-body', swap: 'outerHTML', "
        "headers: {'HX-Request': 'true'}})"
    )
    htmx_idle(page)
    expect(train.get_by_role("link", name="gpu-a100-03")).to_be_visible()
    screenshot(page, "fleet")
    # On a phone's width the summaries stack; only the node table scrolls sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "fleet-390")
    # The MIG changes page at that width: each request is a small card, none cut at the edge.
    page.goto(f"{base}/changes/")
    expect(page.locator("table[aria-label='MIG change requests'] tbody tr").first).to_be_visible()
    assert page.evaluate(CLIPPED_TABLES) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "changes-approver-390")


def borrows_two(status: dict[str, Any]) -> bool:
    """cq-dev's status shows its share of 25 and the 2 H100 GPUs it borrows."""
    borrowed = [
        resource.get("borrowed")
        for flavor in status.get("flavorsUsage") or []
        if flavor.get("name") == "h100-80gb"
        for resource in flavor.get("resources") or []
        if resource.get("name") == "nvidia.com/gpu"
    ]
    return status.get("fairSharing") == {"weightedShare": 25} and borrowed in (["2"], [2])


def queues_with_a_borrower(page: Any, base: str, gateway: Gateway) -> None:
    """team-dev borrows 2 of the cohort's idle H100 GPUs (its queue owns none): after a poll
    the Queues page shows the cohort tree, weights, cq-dev's share as Kueue computes it
    (2 borrowed of the 16 the cohort can lend, weight 5: 25) and the cohort's totals."""
    gateway.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            **workload("notebook-h100", "team-dev", "dev-test", 1, {"nvidia.com/gpu": "2"}),
        }
    )
    cq = ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", "cq-dev")
    # Kueue writes a queue's share and its usage in separate status updates: wait for both.
    wait_for(lambda: borrows_two(gateway.get(cq).get("status") or {}), what="cq-dev's share")
    wait_for(lambda: poll_cluster(gateway=gateway).ok, what="a poll")
    page.goto(f"{base}/queues/")
    expect(page.get_by_label("Cohorts and their ClusterQueues")).to_contain_text("gpu-fleet")
    expect(page.locator("#cluster-queue-cq-dev-title")).to_contain_text("weight 5")
    expect(page.locator("#cluster-queue-cq-dev-title")).to_contain_text("share 25")
    expect(page.locator("#cluster-queue-cq-train-waiting")).to_contain_text("job-big-train")
    totals = page.get_by_label("Totals of cohort ai-platform")
    h100 = totals.locator("tr", has_text="nvidia.com/gpu")
    expect(h100).to_have_text(re.compile(r"h100-80gb\s*nvidia.com/gpu\s*16\s*14\s*2\s*4"))
    screenshot(page, "queues")
    # On a phone's width the tables scroll inside their boxes: the page itself does not.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "queues-390")
    page.set_viewport_size({"width": 1366, "height": 900})


def test_the_approver_reads_a_sick_gpu_and_the_drain_it_suggests(
    live_server: Any, portal_cluster: Gateway, page: Any
) -> None:
    """GPU health as the worker reads it: the H100 whose GPU 5 fell off the bus on its node's
    page, and the drain it suggests waiting in the approver's workspace."""
    base = live_server.url
    assert collect_gpu_health(portal_cluster)["suggested"]
    sign_in(page, base, "approver")
    page.goto(f"{base}/fleet/nodes/gpu-h100-02/")
    expect(page.locator("#health")).to_contain_text("critical")
    expect(page.locator(".finding-critical")).to_contain_text("Xid 79")
    expect(page.get_by_label("GPU 5: not reporting")).to_be_visible()
    screenshot(page, "node-health")

    # The approver's workspace: the drain the health check suggests waits for a decision,
    # counted in the navigation; the sick GPU is listed with a link to its node.
    page.goto(f"{base}/workspace/")
    expect(page.locator("#decisions")).to_contain_text(
        re.compile(r"Cordon and drain #\d+\s+gpu-h100-02, suggested by the GPU health check")
    )
    expect(page.locator("#gpus")).to_contain_text("GPU 5")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name=re.compile(r"^Workspace\s+1\s+waiting$"))).to_be_visible()
    screenshot(page, "workspace-approver")
    # On a phone's width every link of the navigation is on screen, and nothing scrolls sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    for link in nav.get_by_role("link").all():
        expect(link).to_be_in_viewport()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "workspace-approver-390")


def test_the_queues_page_shows_a_borrower_and_its_share(
    live_server: Any, portal_cluster: Gateway, page: Any
) -> None:
    sign_in(page, live_server.url, "approver")
    queues_with_a_borrower(page, live_server.url, portal_cluster)


def test_a_teams_usage_history_reads_day_by_day(
    live_server: Any, portal_cluster: Gateway, page: Any
) -> None:
    """Usage history (the demo backfills two weeks), as a team's page."""
    base = live_server.url
    sign_in(page, base, "approver")
    # Two weeks as the run command does when the README's screenshots are taken; two days
    # (a tenth of the time) show the same chart otherwise.
    call_command("backfill_usage", "--days", "14" if os.environ.get("QM_SCREENSHOTS") else "2")
    page.goto(f"{base}/reports/?team=team-a&days=30")
    chart = page.get_by_label("team-a: nvidia.com/gpu in use against the quota, daily averages")
    expect(chart).to_be_visible()
    # Every day of the period is a column whose tooltip has its numbers, today's the last.
    tips = chart.locator("rect.hit > title")
    expect(tips).to_have_count(30)
    expect(tips.last).to_contain_text("today")
    expect(chart.locator("text", has_text="history from")).to_have_count(1)
    expect(page.locator("#insights-title + p")).to_contain_text("Checked 1 namespace quota")
    # One chart's data, as the API gives it.
    href = page.get_by_role("link", name="team-a nvidia.com/gpu as JSON").get_attribute("href")
    rows = page.request.get(f"{base}{href}").json()
    assert rows and {(r["team"], r["resource"]) for r in rows} == {("team-a", "nvidia.com/gpu")}
    screenshot(page, "usage-team")
    # On a phone's width the grid is one column and nothing scrolls sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    charts = page.locator(".charts figure")
    first, second = charts.nth(0).bounding_box(), charts.nth(1).bounding_box()
    assert first and second and second["y"] > first["y"] + first["height"] - 1
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "usage-team-390")


def test_an_admin_aborts_a_running_change_in_the_page(
    live_server: Any, worker: Worker, demo_cluster: devcluster.DemoCluster, page: Any
) -> None:
    base = live_server.url
    gateway = demo_applied(demo_cluster)
    protect_dev_pod(gateway)  # the change waits at its evict step
    change = mig.request_mig_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=["gpu-a100-03"],
        target_config="all-3g.40gb",
        reason="Back to the training layout",
    )
    mig.approve_mig_change(
        request_id=change.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    wait_for(
        lambda: change.steps.filter(step="evict", status="running").exists(),
        what="the change waiting at evict",
    )
    sign_in(page, base, "lead-a")
    page.goto(f"{base}/changes/{change.pk}/")
    expect(page.get_by_role("button", name="Abort at the next step")).to_have_count(0)
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, base, "admin")
    page.goto(f"{base}/changes/{change.pk}/")
    page.get_by_role("link", name="Abort at the next step…").click()
    # The abort says what it does before it does it.
    effects = page.locator("#confirm-effects")
    expect(effects).to_contain_text("The change stops before its next step")
    expect(effects).to_contain_text("A node it has cordoned stays cordoned")
    screenshot(page, "confirm-abort")
    page.get_by_role("button", name="Abort at the next step").click()
    timeline = page.locator(f"#change-{change.pk}-timeline")
    expect(timeline).to_contain_text("Aborted by admin before evict", timeout=30_000)
    expect(page.locator("#change-state")).to_have_text("Failed")
    screenshot(page, "change-aborted")
    node = gateway.get(ObjectRef("v1", "Node", "gpu-a100-03"))
    assert node["spec"].get("unschedulable") is True
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "all-balanced"
    # Rolling back undoes what ran (the cordon): it says so, and does only that, the
    # budget still holding team-b's pod.
    page.get_by_role("link", name="Roll back…").click()
    expect(effects).to_contain_text(
        "gpu-a100-03: uncordoned (its MIG config was never changed); no pod is evicted."
    )
    expect(page.locator("#confirm-unchanged")).to_contain_text(
        "No pod is evicted and no MIG config is set."
    )
    screenshot(page, "confirm-rollback")
    page.get_by_role("button", name="Roll back", exact=True).click()
    expect(page.locator("#change-state")).to_have_text("Rolled back", timeout=30_000)
    node = gateway.get(ObjectRef("v1", "Node", "gpu-a100-03"))
    assert not node["spec"].get("unschedulable")
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "all-balanced"
    pod = gateway.get(ObjectRef("v1", "Pod", "dev-test-1g", "team-b"))
    assert "deletionTimestamp" not in pod["metadata"]
    assert not change.steps.exclude(pods=[]).exists()
