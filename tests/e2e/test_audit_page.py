"""The audit log a person reads, in a real browser: after an approver grants a ClusterQueue
quota in the page, the Audit page says what changed field by field, its request id shows
every event of that one request, and the row's link opens the request."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from changes.quota import request_quota_change
from queues.models import ClusterQueue
from tenants.models import Team
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from tests.factories import demo_fleet_nodes

pytestmark = pytest.mark.django_db(transaction=True)

QUOTA_LINE = "a100-80gb-3g / nvidia.com/mig-3g.40gb / nominalQuota: 24 → 40"


def test_an_approved_quota_reads_per_field_in_the_audit_log(
    live_server: Any, demo: None, page: Any
) -> None:
    demo_fleet_nodes()
    request = request_quota_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        kind="queue",
        cluster_queue=ClusterQueue.objects.get(name="cq-train"),
        flavor="a100-80gb-3g",
        resource="nvidia.com/mig-3g.40gb",
        requested="40",
        reason="A deadline for the 70B run.",
    )
    base = live_server.url
    sign_in(page, base, "approver")
    page.goto(f"{base}/quota/{request.pk}/")
    page.get_by_label("Comment").fill("For the deadline.")
    page.get_by_role("button", name="Approve 24 → 40").click()
    expect(page.locator("body")).to_contain_text("Approved by approver")

    page.goto(f"{base}/audit/")
    approved = page.locator("tr", has_text="Quota request approved").first
    expect(approved).to_contain_text("quota: 24 → 40")
    expect(approved).to_contain_text("comment: For the deadline.")
    expect(approved).to_contain_text("approver")
    saved = page.locator("tr", has_text="ClusterQueue saved").first
    expect(saved).to_contain_text(QUOTA_LINE)
    table = page.locator("table.audit")
    expect(table).not_to_contain_text("{'")
    expect(table).not_to_contain_text('{"')
    screenshot(page, "audit-log")

    # The request id shows what that one request did: the approval and the queue it changed.
    approved.get_by_role("link", name=re.compile("^request ")).click()
    rows = page.locator("table.audit tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator("table.audit")).to_contain_text(QUOTA_LINE)

    # The object's link opens the quota request.
    page.locator("tr", has_text="Quota request approved").get_by_role(
        "link", name=re.compile(r"Quota request #")
    ).click()
    expect(page).to_have_url(f"{base}/quota/{request.pk}/")
    expect(page.locator("body")).to_contain_text("For the deadline.")
