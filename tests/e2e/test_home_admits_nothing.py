"""A team whose queue can admit nothing reads it on its home, in a real browser, at a desktop
and a phone's width: the warning, why, and who can change it."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from cluster.models import ObservedObject
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from tests.unit.overview.test_home_admits_nothing import set_cq_dev

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", [1366, 390])
def test_a_team_reads_that_its_queue_admits_nothing(
    live_server: Any, demo: None, page: Any, width: int
) -> None:
    set_cq_dev(h100_borrowing="0")
    ObservedObject.objects.create(
        api_version="kueue.x-k8s.io/v1beta2",
        kind="ClusterQueue",
        name="cq-dev",
        status={"flavorsUsage": []},
        last_seen=timezone.now(),
    )
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, live_server.url, "viewer-dev")
    warning = page.get_by_text("No workload submitted to dev-test can be admitted:")
    expect(warning).to_be_visible()
    expect(page.locator("body")).to_contain_text(
        "ClusterQueue cq-dev has a nominal quota of 0 of every resource"
    )
    expect(page.locator("body")).to_contain_text("ask your team lead or a platform admin")
    # 0 of 0 is an empty bar (it was drawn full)
    expect(page.locator(".bar-fill.fill-0")).to_have_count(4)
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # nothing cut off
    warning.scroll_into_view_if_needed()
    screenshot(page, f"home-admits-nothing{'-390' if width == 390 else ''}")
