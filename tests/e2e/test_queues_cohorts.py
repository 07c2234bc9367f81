"""The Queues page in a real browser: on a cluster of many ClusterQueues a lead reads a
line per cohort, opens one from the keyboard (the URL keeps it: back, reload), and sees
its queues alone; the demo's few queues stay all open; both fit a phone's width."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from cluster.models import ObservedObject
from queues.models import ClusterQueue, Cohort
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

GPU = "nvidia.com/gpu"


def many_cohorts(cohorts: int = 6, queues: int = 10) -> None:
    """``cohorts`` departments under a root ``research``, ``queues`` polled ClusterQueues
    each (more than the page shows at once)."""
    root = Cohort.objects.create(name="research")
    for c in range(cohorts):
        cohort = Cohort.objects.create(name=f"dept-{c}", parent=root)
        for q in range(queues):
            name = f"dept-{c}-q{q}"
            groups = [
                {
                    "coveredResources": [GPU],
                    "flavors": [
                        {"name": "h100-80gb", "resources": [{"name": GPU, "nominalQuota": "4"}]}
                    ],
                }
            ]
            ClusterQueue.objects.create(name=name, cohort=cohort, resource_groups=groups)
            used = [{"name": GPU, "total": str(q % 5)}]
            ObservedObject.objects.create(
                kind="ClusterQueue",
                name=name,
                api_version="kueue.x-k8s.io/v1beta2",
                last_seen=timezone.now(),
                status={
                    "admittedWorkloads": q % 5,
                    "pendingWorkloads": q % 3,
                    "flavorsUsage": [{"name": "h100-80gb", "resources": used}],
                },
            )


def fits(page: Any, width: int, name: str) -> None:
    page.set_viewport_size({"width": width, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, f"{name}-{width}")
    page.set_viewport_size({"width": 1366, "height": 900})


def test_a_lead_opens_one_cohort_of_many_from_the_keyboard(
    live_server: Any, demo: None, page: Any
) -> None:
    base = live_server.url
    sign_in(page, base, "lead-a")
    # The demo's few queues: everything open, as before.
    page.goto(f"{base}/queues/")
    expect(page.get_by_role("heading", name="Cohort tree")).to_be_visible()
    expect(page.locator("h3", has_text="ClusterQueue cq-train")).to_be_visible()
    expect(page.get_by_role("table", name="Cohorts")).to_have_count(0)
    screenshot(page, "queues-demo")

    many_cohorts()  # 63 ClusterQueues: a line per cohort
    page.goto(f"{base}/queues/")
    lines = page.get_by_role("table", name="Cohorts")
    expect(lines).to_be_visible()
    expect(lines.get_by_role("row")).to_have_count(1 + 3 + 6)  # head, demo's 2, research, 6
    expect(page.locator("h3", has_text="ClusterQueue")).to_have_count(0)
    dept = lines.get_by_role("row", name=re.compile(r"Cohort dept-2 in research"))
    expect(dept).to_contain_text("10")  # its queues
    expect(dept).to_contain_text(f"{GPU} 40, 20 in use")
    screenshot(page, "queues-cohorts")
    fits(page, 390, "queues-cohorts")

    link = page.get_by_role("link", name=re.compile(r"^Cohort dept-2$"))
    link.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"\?cohort=dept-2#cohort-dept-2$"))
    expect(page.locator("h3", has_text="ClusterQueue")).to_have_count(10)
    expect(page.locator("h3", has_text="ClusterQueue dept-2-q0")).to_be_visible()
    expect(page.get_by_role("link", name=re.compile(r"^Cohort dept-2$"))).to_have_attribute(
        "aria-current", "true"
    )
    screenshot(page, "queues-one-cohort")
    fits(page, 390, "queues-one-cohort")
    page.reload()
    expect(page.locator("h3", has_text="ClusterQueue")).to_have_count(10)
    page.go_back()
    expect(page.locator("h3", has_text="ClusterQueue")).to_have_count(0)

    page.goto(f"{base}/queues/?cohort=nope")
    expect(page.get_by_role("alert")).to_contain_text("There is no cohort named nope")
    expect(page.get_by_role("table", name="Cohorts")).to_be_visible()
