"""A lead reads the team's cost this month on its home and opens the invoice, in a real
browser, at a desktop's and a phone's width: figures from the demo's prices, nothing cut
off, no other team named."""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from cluster.scope import settings_cluster_id
from tenants.models import Namespace
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from tests.factories import ObservedNodeFactory
from tests.unit.costs.history import GPU, midnight, rollup
from usage.models import Rollup, SamplingState

pytestmark = pytest.mark.django_db(transaction=True)
MIG_3G = "nvidia.com/mig-3g.40gb"


def this_month(today: dt.date) -> None:
    """The demo's fleet (a train pool of A100s in 3g.40gb, an h100 pool) and this month's
    days so far: team-a's namespace runs 4 H100s and 6 3g.40gb slices, team-b's 2 H100s."""
    ObservedNodeFactory(name="gpu-a100-01", labels={"quartermaster.io/pool": "train"})
    ObservedNodeFactory(
        name="gpu-h100-01",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        labels={"quartermaster.io/pool": "h100"},
    )
    team_a = Namespace.objects.filter(team__slug="team-a").order_by("name").first()
    team_b = Namespace.objects.filter(team__slug="team-b").order_by("name").first()
    assert team_a is not None and team_b is not None
    row = functools.partial(rollup, cluster_id=settings_cluster_id())

    def of_day(day: dt.date) -> list[Rollup]:
        return [
            row(day, "team", "team-a", GPU, 4, 8, team_a.name),
            row(day, "team", "team-a", MIG_3G, 6, 8, team_a.name, 0.5),
            row(day, "team", "team-b", GPU, 2, 8, team_b.name),
            row(day, "pool", "h100", GPU, 6, 16),
            row(day, "pool", "train", MIG_3G, 6, 16, weight=0.5),
        ]

    rows = [row for d in range(1, today.day) for row in of_day(today.replace(day=d))]
    for row in of_day(today):  # today's first twelve hours, rolled up hour by hour
        for hour in range(12):
            row.pk, row.period = None, "hour"
            row.start = midnight(today) + dt.timedelta(hours=hour)
            row.covered_seconds = 3600
            rows.append(
                Rollup(
                    **{
                        f.attname: getattr(row, f.attname)
                        for f in Rollup._meta.concrete_fields
                        if f.attname != "id"
                    }
                )
            )
    for row in rows:
        if row.period == "hour":
            for name in ("used_seconds", "gpu_seconds", "capacity_seconds"):
                setattr(row, name, getattr(row, name) / 24)
    Rollup.objects.bulk_create(rows)
    SamplingState.objects.all().delete()
    SamplingState.objects.create(rolled_up_to=midnight(today) + dt.timedelta(hours=12))


def test_a_lead_reads_this_months_cost_and_the_invoice(
    live_server: Any, demo: None, page: Any
) -> None:
    today = timezone.now().date()
    this_month(today)
    hours = (today.day - 1) * 24 + 12
    sign_in(page, live_server.url, "lead-a")
    for width in (1366, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/")
        panel = page.locator(".cost-panel").first
        # 4 H100s at 4.50 and 6 3g.40gb at half of 2.40 an hour, every hour rolled up
        expect(panel).to_contain_text(f"so far: {hours * (4 * 4.5 + 6 * 1.2):.2f} USD")
        expect(panel).to_contain_text("forecast to the month's end")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        panel.scroll_into_view_if_needed()
        suffix = "-390" if width == 390 else ""
        screenshot(page, f"home-cost-panel{suffix}")
        panel.get_by_role("link", name="Invoice").click()
        expect(page.locator("#invoice-total")).to_contain_text(
            f"{hours * (4 * 4.5 + 6 * 1.2):.2f} USD"
        )
        body = page.locator("body")
        expect(body).to_contain_text("kept by the platform")
        expect(body).not_to_contain_text("team-b")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        screenshot(page, f"cost-invoice{suffix}")
