"""Onboarding a team in a real browser, end to end: the steps, a preview with the rendered
YAML and the rules' warnings, one click to write, the Audit page showing the onboarding as
one story, and, after an apply, the demo cluster holding exactly the rendered objects; then
the offboarding page refusing without the typed slug."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from kube import Gateway, ObjectRef
from loop.apply import apply_desired_state
from loop.desired import collect_manifests
from portal.models import AuditEvent
from tenants.models import Team
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_onboards_a_team_and_the_cluster_holds_it(
    live_server: Any, portal_cluster: Gateway, page: Any
) -> None:
    base = live_server.url
    sign_in(page, base, "admin")
    page.goto(f"{base}/")
    page.get_by_role("link", name="Onboard a team").click()
    page.get_by_label("Slug", exact=True).fill("team-c")
    page.get_by_label("Name", exact=True).fill("Team C (vision)")
    page.get_by_label("Namespace", exact=True).fill("team-c")
    page.locator("#id_hard").fill("requests.nvidia.com/gpu=4\nlimits.nvidia.com/gpu=4")
    page.locator("#id_limits").fill("Container nvidia.com/gpu max=2 default=1")
    page.locator("#id_queues").fill("train=cq-nope")
    page.locator("#id_members").fill("lead-b=lead\nmember-a=viewer")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#step-queues .error")).to_contain_text("No ClusterQueue 'cq-nope'")
    assert not Team.objects.filter(slug="team-c").exists()

    page.locator("#id_queues").fill("train=cq-train")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#yaml-diff")).to_contain_text("kind: LimitRange")
    expect(page.locator("#yaml-diff")).to_contain_text("name: train")
    expect(page.locator("#onboard-preview")).to_contain_text("nothing written yet")
    screenshot(page, "onboarding-preview")
    assert not Team.objects.filter(slug="team-c").exists()

    page.get_by_role("button", name="Onboard team-c").click()
    expect(page.get_by_text("Team team-c onboarded.")).to_be_visible()
    screenshot(page, "onboarding-audit-story")
    story = AuditEvent.objects.filter(event="team.created", team_name="team-c").get().request_id
    assert AuditEvent.objects.filter(request_id=story).count() >= 6
    assert set(
        AuditEvent.objects.filter(team_name="team-c").values_list("request_id", flat=True)
    ) == {story}

    apply_desired_state(gateway=portal_cluster)
    wanted = collect_manifests(team_slug="team-c")
    assert {m["kind"] for m in wanted} == {"Namespace", "ResourceQuota", "LimitRange", "LocalQueue"}
    for manifest in wanted:
        there = portal_cluster.get(ObjectRef.of(manifest))
        assert _within(manifest["metadata"]["labels"], there["metadata"]["labels"])
        assert _within(manifest.get("spec", {}), there.get("spec", {})), manifest["kind"]

    page.goto(f"{base}/teams/team-c/offboard/")
    expect(page.get_by_role("heading", name="What leaves the cluster")).to_be_visible()
    page.get_by_label("Type the team's slug").fill("team-")
    page.get_by_role("button", name="Offboard team-c").click()
    expect(page.locator("#id_confirm_slug-error")).to_have_text(
        "Type the team's slug, team-c, to offboard it."
    )
    screenshot(page, "offboarding-confirmation")
    assert Team.objects.filter(slug="team-c").exists()


def _within(wanted: Any, there: Any) -> bool:
    """Every field the portal rendered is there with its value (the API server adds its
    defaults: a LimitRange's defaultRequest, a Namespace's finalizers)."""
    if isinstance(wanted, dict):
        return isinstance(there, dict) and all(
            key in there and _within(value, there[key]) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(there, list)
            and len(wanted) == len(there)
            and all(_within(w, t) for w, t in zip(wanted, there, strict=True))
        )
    return bool(wanted == there)
