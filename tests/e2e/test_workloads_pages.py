"""A team lead walks the Workloads list (a state filter, the search box, the next page) and
the pages of an admitted, a waiting, an evicted-and-requeued and a finished workload, in a
real browser at a desktop and a phone's width; nothing is cut off at either."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from cluster.models import ObservedPod, ObservedWorkload
from cluster.scope import settings_cluster_id
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from tests.support import written

pytestmark = pytest.mark.django_db(transaction=True)

GPU = "nvidia.com/gpu"


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
    written()  # the poll's explainer: why what waits waits, and when it could start


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
