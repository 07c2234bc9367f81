"""A team lead adds a person to the team in a real browser: a name that is no one is refused
next to its field and nothing changes; a real one appears in the list with its role, and the
audit log names the lead."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from portal.models import AuditEvent
from tenants.models import Team
from tests.e2e.test_mig_change_flow import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_lead_adds_a_member(live_server: Any, demo: None, page: Any) -> None:
    team = Team.objects.get(slug="team-a")
    before = set(team.memberships.values_list("user__username", "role"))
    sign_in(page, live_server.url, "lead-a")
    page.goto(f"{live_server.url}/teams/team-a/members/")
    expect(page.get_by_role("heading", name="Members of")).to_be_visible()

    page.get_by_label("Username").fill("no-such-person")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#id_username")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#member-form .error")).not_to_be_empty()
    assert set(team.memberships.values_list("user__username", "role")) == before

    page.get_by_label("Username").fill("lead-b")
    page.get_by_label("Team role").select_option(label="Viewer")
    page.get_by_role("button", name="Save").click()
    row = page.locator("tbody tr", has_text="lead-b")
    expect(row).to_contain_text("Viewer")
    expect(page.get_by_role("button", name="Remove lead-b")).to_be_visible()
    assert team.memberships.get(user__username="lead-b").role == "viewer"
    event = AuditEvent.objects.filter(event="membership.created").latest("time")
    assert event.actor_name == "lead-a"
