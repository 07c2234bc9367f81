"""A nearly spent budget (the demo's, set from the usage history) read in a real browser at
a desktop and a phone's width: the panel on the team's home and the budgets page, with the
forecast and what enforcement would hold."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from demo.services import load_demo_budgets
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from usage.models import Rollup, SamplingState

pytestmark = pytest.mark.django_db(transaction=True)


def history() -> None:
    """team-a and team-b used 6 and 2 GPUs all month so far, rolled up to this hour."""
    hour = timezone.now().astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    today, first = hour.replace(hour=0), hour.replace(day=1, hour=0)
    rows = []
    for slug, gpus in (("team-a", 6), ("team-b", 2)):
        days = [(first + dt.timedelta(days=d), "day", 86400) for d in range((today - first).days)]
        hours = [(today + dt.timedelta(hours=h), "hour", 3600) for h in range(hour.hour)]
        for start, period, seconds in days + hours:
            rows.append(
                Rollup(
                    period=period,
                    start=start,
                    kind="team",
                    owner=slug,
                    resource="nvidia.com/gpu",
                    covered_seconds=seconds,
                    gpu_seconds=gpus * seconds,
                )
            )
    Rollup.objects.bulk_create(rows)
    SamplingState.objects.update_or_create(pk=1, defaults={"rolled_up_to": hour})


@pytest.mark.parametrize("width", [1366, 390])
def test_a_nearly_spent_budget_on_the_home_and_the_budgets_page(
    live_server: Any, demo: None, page: Any, width: int
) -> None:
    history()
    load_demo_budgets()  # as dev.py run does once the history is backfilled
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, live_server.url, "lead-a")
    panel = page.locator("[id$='-budget']").first
    expect(panel).to_contain_text("92 %")
    expect(panel).to_contain_text("with it on, it would hold queue team-a/team-a-train")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    panel.scroll_into_view_if_needed()
    suffix = "-390" if width == 390 else ""
    screenshot(page, f"home-budget{suffix}")
    page.goto(f"{live_server.url}/budgets/")
    body = page.locator("body")
    expect(body).to_contain_text("Forecast to the period's end")
    expect(body).to_contain_text("Linear:")
    expect(body).not_to_contain_text("team-b")  # a lead reads their own teams' budgets
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, f"budgets-lead{suffix}")
    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/budgets/")
    expect(body).to_contain_text("team-b")
    expect(body).to_contain_text("Set a team's budget")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, f"budgets-admin{suffix}")


def test_a_lead_asks_for_an_extension_and_an_admin_grants_it_on_the_pages(
    live_server: Any, demo: None, page: Any
) -> None:
    history()
    load_demo_budgets()
    sign_in(page, live_server.url, "lead-a")
    page.goto(f"{live_server.url}/budgets/")
    page.get_by_role("link", name="Team A (LLM training)").click()
    page.get_by_label("GPU-hours to add").fill("100")  # the budget counts GPU-hours
    page.get_by_label("Reason").fill("The last training run of the quarter.")
    page.get_by_role("button", name="Ask for an extension").click()
    expect(page.locator("body")).to_contain_text("Extension asked for: a platform admin decides.")
    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/budgets/")
    waiting = page.locator("#budget-extensions-waiting")
    expect(waiting).to_contain_text("team-a asks for 100.0 GPU-hours more")
    screenshot(page, "budgets-extension-waiting")
    waiting.get_by_role("link", name="Decide on its budget's page").click()
    page.get_by_role("button", name="Grant", exact=True).click()
    expect(page.locator("body")).to_contain_text("granted")
    expect(page.locator("body")).to_contain_text("100.0 granted by extension")
    # Removing the budget asks first, saying what it changes (the extension goes with it).
    page.get_by_role("link", name="Remove this budget…").click()
    effects = page.locator("#confirm-effects")
    expect(effects).to_contain_text("no longer warned at")
    expect(effects).to_contain_text("Its extension goes with it.")
    screenshot(page, "budget-remove")
    page.get_by_role("button", name="Remove the budget").click()
    expect(page.locator("body")).to_contain_text("Budget of team-a removed.")
