"""A team lead walks the Workloads list (a state filter, the search box, the next page) and
the pages of an admitted, a waiting, an evicted-and-requeued and a finished workload, in a
real browser at a desktop and a phone's width; nothing is cut off at either."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from cluster.models import ObservedEvent, ObservedPod, ObservedWorkload
from cluster.scope import settings_cluster_id
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from tests.support import written

pytestmark = pytest.mark.django_db(transaction=True)

GPU = "nvidia.com/gpu"
# Whether an input's placeholder fits its box (measured in the input's own font).
PLACEHOLDER_FITS = """selector => {
  const input = document.querySelector(selector), style = getComputedStyle(input);
  const context = document.createElement("canvas").getContext("2d");
  context.font = style.font;
  const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return context.measureText(input.placeholder).width <= room;
}"""


def condition(kind: str, status: str, reason: str, at: dt.datetime, message: str = "") -> Any:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at.isoformat(),
    }


def four_workloads() -> None:
    """An admitted workload with a pod on a node, a waiting one, one evicted and back in
    line, a finished one; and 50 older ones, so that the list has a second page."""
    now = timezone.now()
    ago = [now - dt.timedelta(minutes=m) for m in range(0, 200, 10)]
    common = {"cluster_id": settings_cluster_id(), "namespace": "team-a", "last_changed": now}
    ObservedWorkload.objects.bulk_create(
        ObservedWorkload(
            **common,
            name=f"sweep-{index:02d}",
            queue_name="team-a-train",
            finished=True,
            created_at=now - dt.timedelta(days=2, minutes=index),
        )
        for index in range(50)
    )
    reserved = "Quota reserved in ClusterQueue cq-train"
    ObservedWorkload.objects.create(
        **common,
        name="train-llama-admitted",
        queue_name="team-a-train",
        cluster_queue="cq-train",
        admitted=True,
        requests={GPU: 4},
        flavors={GPU: "h100-80gb"},
        created_at=ago[6],
        admitted_at=ago[5],
        conditions=[
            condition("QuotaReserved", "True", "QuotaReserved", ago[5], reserved),
            condition("Admitted", "True", "Admitted", ago[5], "The workload is admitted"),
            condition("PodsReady", "True", "Started", ago[4], "All pods reached readiness"),
        ],
    )
    ObservedPod.objects.create(
        cluster_id=settings_cluster_id(),
        namespace="team-a",
        name="train-llama-admitted-0",
        node_name="gpu-node-1",
        phase="Running",
        gpu_requests={GPU: 4},
        workload_name="train-llama-admitted",
        started_at=ago[4],
        last_changed=now,
    )
    waiting = "couldn't assign flavors to pod set main: insufficient unused quota for "
    waiting += "nvidia.com/gpu in flavor h100-80gb, 64 more needed"
    ObservedWorkload.objects.create(
        **common,
        name="finetune-waiting",
        queue_name="team-a-train",
        requests={GPU: 64},
        created_at=ago[3],
        queued_at=ago[3],
        position=0,
        position_in_local_queue=0,
        reason="Pending",
        message=waiting,
        conditions=[condition("QuotaReserved", "False", "Pending", ago[3], waiting)],
    )
    ObservedWorkload.objects.create(
        **common,
        name="eval-evicted-requeued",
        queue_name="team-a-train",
        requests={GPU: 2},
        created_at=ago[12],
        queued_at=ago[2],
        evictions=2,
        evicted_reason="Preempted",
        evicted_at=ago[3],
        position=1,
        reason="Pending",
        message=waiting,
        conditions=[
            condition("Evicted", "True", "Preempted", ago[3], "Preempted to accommodate a "
                      "workload (UID: 1) due to prioritization in the ClusterQueue"),
            condition("Preempted", "True", "InClusterQueue", ago[3]),
            condition("Requeued", "True", "BackoffFinished", ago[2]),
            condition("QuotaReserved", "False", "Pending", ago[1], waiting),
        ],
    )  # fmt: skip
    ObservedWorkload.objects.create(
        **common,
        name="sweep-finished",
        queue_name="team-a-train",
        finished=True,
        requests={GPU: 1},
        created_at=ago[19],
        admitted_at=ago[18],
        finished_at=ago[8],
        conditions=[
            condition("Admitted", "True", "Admitted", ago[18]),
            condition("Finished", "True", "Succeeded", ago[8], "Job finished successfully"),
        ],
    )
    kueues_events(ago, waiting)
    written()  # the poll's explainer: why what waits waits, and when it could start


def kueues_events(ago: list[dt.datetime], waiting: str) -> None:
    """Kueue's events about the waiting and the evicted workloads, in real Kueue's words
    (tests/data/kueue-samples/events-workload-story.json): the evicted one was preempted by
    team-b's workload, which a lead of team-a may not name."""
    uid = (
        "(UID: 456403c9-5132-4683-a481-6b56e3e036ec, JobUID: 53474932-7a94-4d4c-a7c1-72e4f79ccf98)"
    )
    preempted = (
        f"Preempted to accommodate a workload {uid} due to reclamation within the cohort; "
        "preemptor path: /gpu-fleet/ai-platform/cq-infer; preemptee path: "
        "/gpu-fleet/ai-platform/cq-train"
    )
    said = [
        ("finetune-waiting", "Warning", "Pending", waiting, 14, ago[3], ago[0], ""),
        ("eval-evicted-requeued", "Normal", "QuotaReserved",
         "Quota reserved in ClusterQueue cq-train, wait time since queued was 2s", 1,
         ago[10], ago[10], ""),
        ("eval-evicted-requeued", "Normal", "Admitted",
         "Admitted by ClusterQueue cq-train, wait time since reservation was 0s", 1,
         ago[10], ago[10], ""),
        ("eval-evicted-requeued", "Normal", "EvictedDueToPreempted", preempted, 1,
         ago[3], ago[3], "team-b/infer-burst-7c2f1"),
        ("eval-evicted-requeued", "Normal", "Preempted", preempted + "; preemptor effective "
         "priority: 0 (base: 0, boost: 0); preemptee effective priority: 0 (base: 0, boost: 0)",
         1, ago[3], ago[3], "team-b/infer-burst-7c2f1"),
        ("eval-evicted-requeued", "Warning", "Pending", waiting, 3, ago[1], ago[0], ""),
    ]  # fmt: skip
    ObservedEvent.objects.bulk_create(
        ObservedEvent(
            cluster_id=settings_cluster_id(),
            namespace="team-a",
            name=f"{workload}.{index:x}",
            workload_name=workload,
            type=kind,
            reason=reason,
            message=message,
            count=count,
            first_seen=first,
            last_seen=last,
            preemptor=preemptor,
        )
        for index, (workload, kind, reason, message, count, first, last, preemptor) in enumerate(
            said
        )
    )


@pytest.mark.parametrize("width", [1366, 390])
def test_a_lead_walks_the_workloads_list_and_four_workloads(
    live_server: Any, demo: None, page: Any, width: int
) -> None:
    four_workloads()
    suffix = "" if width == 1366 else "-390"
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, live_server.url, "lead-a")
    page.get_by_role("link", name="Workloads").first.click()
    expect(page.get_by_role("heading", name="Workloads")).to_be_visible()
    expect(page.locator("#workload-list")).to_contain_text("workloads 1\u201350 of 54")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.evaluate(PLACEHOLDER_FITS, "#wl-q"), "the search box's placeholder is cut"
    screenshot(page, f"workloads-list{suffix}")
    page.get_by_role("link", name="Older →").click()
    expect(page.locator("#workload-list")).to_contain_text("workloads 51\u201354 of 54")
    page.get_by_label("State").select_option("waiting")
    page.get_by_role("button", name="Find").click()
    expect(page.locator("#workload-list tbody tr")).to_have_count(1)
    expect(page.locator("#workload-list")).to_contain_text("finetune-waiting")
    page.get_by_label("State").select_option("")
    page.get_by_label("Name", exact=True).fill("evicted")
    page.get_by_role("button", name="Find").click()
    expect(page.locator("#workload-list tbody tr")).to_have_count(1)
    screenshot(page, f"workloads-list-found{suffix}")
    page.get_by_role("link", name="team-a/eval-evicted-requeued").click()
    expect(page.locator("#workload-state-tag")).to_have_text("evicted")
    expect(page.locator("#workload-story")).to_contain_text("Evicted: it was preempted")
    expect(page.locator("#workload-story")).to_contain_text("Back in line: its back-off ended")
    expect(page.locator("#workload-position")).to_contain_text("#2 in line")
    story = page.locator("#workload-story")
    expect(story).to_contain_text("(another team's workload) due to reclamation")
    expect(story).to_contain_text("event \N{MULTIPLICATION SIGN} 3")
    expect(story).not_to_contain_text("infer-burst")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, f"workload-evicted{suffix}")
    for name, state, says in [
        ("finetune-waiting", "waiting", "#1 in line"),
        ("train-llama-admitted", "admitted", "Admitted with h100-80gb"),
        ("sweep-finished", "finished", "Finished: succeeded"),
    ]:
        page.goto(f"{live_server.url}/workloads/?q={name}")
        page.get_by_role("link", name=f"team-a/{name}").click()
        expect(page.locator("#workload-state-tag")).to_have_text(state)
        expect(page.locator("#workload-live")).to_contain_text(says)
        if state == "waiting":
            expect(page.locator(".why-box")).to_be_visible()
        if state == "admitted":
            expect(page.get_by_role("link", name="gpu-node-1")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width, name
        screenshot(page, f"workload-{state}{suffix}")
    # A platform admin reads the same story with the preemptor named.
    page.context.clear_cookies()
    sign_in(page, live_server.url, "admin")
    for name, state, says in [
        ("eval-evicted-requeued", "evicted", "(Workload team-b/infer-burst-7c2f1)"),
        ("finetune-waiting", "waiting", "event \N{MULTIPLICATION SIGN} 14"),
    ]:
        page.goto(f"{live_server.url}/workloads/default/team-a/{name}/")
        expect(page.locator("#workload-story")).to_contain_text(says)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, name
        screenshot(page, f"workload-{state}-admin{suffix}")
