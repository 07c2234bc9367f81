"""The estimated wait as a team lead reads it in a real browser, wide and narrow: a waiting
workload's range with its basis on the home page, and "no estimate" with why for a pod
outside Kueue; another team's workloads are counted in line, never named."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from tests.factories import ObservedPodFactory, demo_fleet_nodes
from tests.support import written
from tests.unit.diagnostics.test_waiting_estimate import history, short_of, workload

pytestmark = pytest.mark.django_db(transaction=True)
GPU = "nvidia.com/gpu"


def line_and_history() -> None:
    """cq-train runs team-b's 16-GPU job (its 12 and 4 borrowed from cq-infer), just
    admitted; team-a's job-wait (8 GPUs) is first in line; five runs of 50-90 min before."""
    workload("team-b", "job-b-big", "team-b-train", gpus=16, admitted_into="cq-train")
    workload(
        "team-a", "job-wait", "team-a-train", gpus=8, position=0, message=short_of(8, "h100-80gb")
    )
    history("cq-train", [50, 60, 70, 80, 90])


def test_a_team_lead_reads_when_a_workload_could_start(
    live_server: Any, demo: None, page: Any
) -> None:
    demo_fleet_nodes()
    line_and_history()
    ObservedPodFactory(
        namespace="team-a",
        name="notebook",
        phase="Pending",
        gpu_requests={GPU: 1},
        pending_message="0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 node(s) "
        "didn't match Pod's node affinity/selector.",
    )
    written()  # what the poll does after writing the rows
    base = live_server.url
    sign_in(page, base, "lead-a")
    for width in (1366, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{base}/")
        workload = page.locator("li", has_text="job-wait").locator(".estimate")
        # between two moments in the reader's own time zone (the browser writes them)
        expect(workload).to_have_text(
            re.compile(
                r"^Estimated wait: about 60–80 min \(\S.+ to \S.+\) — first in line; the one "
                r"running usually runs 60–80 min \(5 finished in cq-train\)$"
            )
        )
        expect(workload.locator("time").first).not_to_have_attribute("data-local", "")
        box = workload.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width  # wraps, never overflows
        pod = page.locator("li", has_text="notebook").locator(".estimate")
        expect(pod).to_have_text(
            "Estimated wait: no estimate — it waits for room on the nodes outside any Kueue "
            "queue, and the portal keeps run times of Kueue workloads only"
        )
        expect(page.locator("body")).not_to_contain_text("job-b-big")
        screenshot(page, f"home-estimated-wait-{width}")
