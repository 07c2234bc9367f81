"""Deleting a namespace in a real browser: the admin's delete page says what leaves the
cluster and what history stays, refuses without the typed name (nothing deleted, the error
next to the field), deletes with it, and the team's quota requests then read the kept name
with the pending one cancelled and why."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from changes.models import QuotaChangeRequest
from changes.quota import request_quota_change
from tenants.models import Namespace, Team
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from tests.factories import demo_fleet_nodes

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_namespace_delete_asks_for_its_name_and_keeps_the_request_history(
    live_server: Any, demo: None, page: Any
) -> None:
    demo_fleet_nodes()
    namespace = Namespace.objects.get(name="team-a")
    pending = request_quota_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        kind="namespace",
        namespace=namespace,
        resource="requests.nvidia.com/gpu",
        requested="24",
        reason="A deadline for the 70B run.",
    )
    base = live_server.url
    sign_in(page, base, "admin")
    page.goto(f"{base}/admin/tenants/namespace/{namespace.pk}/change/")
    page.get_by_role("link", name="Delete", exact=True).click()
    expect(page.get_by_role("heading", name="Delete namespace team-a?")).to_be_visible()
    expect(page.locator("#namespace-delete-summary")).to_contain_text(
        "Deleting a namespace removes the portal's objects in it from the cluster"
    )
    keeps = page.locator("#namespace-delete-keeps")
    expect(keeps).to_contain_text("1 quota request about it stays in the history")
    expect(keeps).to_contain_text(f"Pending request #{pending.pk} is cancelled")

    page.get_by_label("Type team-a to confirm").fill("team-b")
    page.get_by_role("button", name="Delete namespace team-a").click()
    expect(page.locator("#id_confirm_name_error")).to_have_text(
        "Type the namespace's name, team-a, to delete it."
    )
    expect(page.get_by_label("Type team-a to confirm")).to_have_attribute("aria-invalid", "true")
    screenshot(page, "namespace-delete-refused")
    assert Namespace.objects.filter(name="team-a").exists()
    assert QuotaChangeRequest.objects.get(pk=pending.pk).state == "pending"

    page.get_by_label("Type team-a to confirm").fill("team-a")
    page.get_by_role("button", name="Delete namespace team-a").click()
    expect(page.get_by_text("Namespace team-a deleted.")).to_be_visible()
    assert not Namespace.objects.filter(name="team-a").exists()

    page.goto(f"{base}/quota/{pending.pk}/")
    expect(page.get_by_role("heading", name=re.compile(r"Cancelled"))).to_be_visible()
    expect(page.locator(f"#quota-{pending.pk}-deleted")).to_have_text("deleted")
    expect(page.locator(f"#quota-{pending.pk}-cancelled")).to_have_text(
        "Cancelled: the namespace team-a was deleted, so there is no quota left to apply this to."
    )
    screenshot(page, "quota-request-of-a-deleted-namespace")
    page.goto(f"{base}/quota/")
    expect(page.get_by_role("cell", name="team-a (deleted)")).to_be_visible()
