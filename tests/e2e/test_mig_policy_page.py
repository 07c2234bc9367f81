"""The MIG policy page in a real browser: a platform admin proposes governing the cluster's
per-claim MIG (a wrong line first, answered on the form), an approver reads the impact and
approves, and team-a's lead reads the policy with their own team's grant only."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from cluster.services import settings_cluster
from loop.fetch import DraListing
from loop.write import write_dra
from tenants.models import Team
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in
from tests.factories import NamespaceFactory

pytestmark = pytest.mark.django_db(transaction=True)
RECORDED = Path(__file__).resolve().parents[1] / "data" / "dra"


def recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text())


def test_admin_proposes_approver_decides_lead_reads_their_own(
    live_server: Any, demo: None, page: Any
) -> None:
    cluster = settings_cluster()
    write_dra(
        DraListing(recorded("deviceclasses.json"), recorded("resourceslices.json"), []),
        cluster_id=cluster.pk,
        now=dt.datetime(2026, 12, 6, 10, 0, tzinfo=dt.UTC),
    )
    for name, team in (("team-a-dra", "team-a"), ("team-b-dra", "team-b")):
        NamespaceFactory(name=name, team=Team.objects.get(slug=team), cluster=cluster)
    base = live_server.url
    sign_in(page, base, "admin")
    page.goto(f"{base}/changes/mig-policy/")
    form = page.locator(f"#cluster-{cluster.pk}-mig-policy-form")
    form.get_by_label("Govern this cluster's per-claim MIG").check()
    grants = form.get_by_label("Grants, one a line: namespace, profile, devices")
    grants.fill("team-a-dra 3g.40gb 1\nteam-b-dra 1g.10gb 1")
    form.get_by_label("Reason").fill("3g.40gb for team-a's training only")
    form.get_by_role("button", name="Propose (an approver decides)").click()
    errors = page.locator(f"#cluster-{cluster.pk}-mig-policy-form .errorlist")
    expect(errors).to_contain_text("Line 2: The cluster's GPUs publish no MIG device of profile")
    expect(page.locator(f"#cluster-{cluster.pk}-mig-policy-form textarea").first).to_have_value(
        "team-a-dra 3g.40gb 1\nteam-b-dra 1g.10gb 1"
    )
    screenshot(page, "mig-policy-refused-line")
    form = page.locator(f"#cluster-{cluster.pk}-mig-policy-form")
    expect(form.get_by_label("Govern this cluster's per-claim MIG")).to_be_checked()
    form.get_by_label("Grants, one a line: namespace, profile, devices").fill(
        "team-a-dra 3g.40gb 1\nteam-b-dra 3g.40gb 1"
    )
    form.get_by_label("Reason").fill("3g.40gb for the training teams")
    form.get_by_role("button", name="Propose (an approver decides)").click()
    expect(page.locator("body")).to_contain_text("The policy change is proposed")

    sign_in(page, base, "approver")
    page.goto(f"{base}/changes/mig-policy/")
    expect(page.locator("body")).to_contain_text("waiting for a decision")
    expect(page.locator("body")).to_contain_text("Impact")
    screenshot(page, "mig-policy-to-decide")
    page.get_by_role("button", name="Approve this policy").first.click()
    expect(page.locator("body")).to_contain_text("Approved: the loop applies the policy.")
    expect(page.locator(f"#cluster-{cluster.pk}-mig-policy")).to_contain_text("governed per claim")

    sign_in(page, base, "lead-a")
    page.goto(f"{base}/changes/mig-policy/")
    mine = page.locator(f"#cluster-{cluster.pk}-mig-policy")
    expect(mine).to_contain_text("team-a-dra")
    expect(page.locator("main")).not_to_contain_text("team-b")
    screenshot(page, "mig-policy-lead")
