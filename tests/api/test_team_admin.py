"""Daily administration over the API: offboarding a team and a team's members, through the
same services (and the same permission rules) as their pages."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from portal.models import AuditEvent
from queues.models import LocalQueue
from tenants.models import Membership, Namespace, Team
from tests.support import bearer

pytestmark = pytest.mark.django_db

OFFBOARD = "/api/v1/teams/{}/offboard/"


def _counts() -> tuple[int, ...]:
    return (
        Team.objects.count(),
        Namespace.objects.on_every_cluster().count(),
        LocalQueue.objects.count(),
        Membership.objects.count(),
        AuditEvent.objects.count(),
    )


def _post(client: Client, url: str, body: dict[str, Any], **headers: str) -> Any:
    return client.post(url, body, content_type="application/json", headers=headers)


def test_an_offboarding_dry_run_says_what_leaves_and_what_stays(client: Client, demo: None) -> None:
    team = Team.objects.get(slug="team-dev")
    admin = bearer("admin")  # a token's creation is audited: before counting
    before = _counts()
    answer = _post(client, OFFBOARD.format(team.slug) + "?dry_run=true", {}, **admin)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["dry_run"] is True and body["team"] == "team-dev"
    names = {ns["name"] for ns in body["removes"]["namespaces"]}
    assert names == set(
        Namespace.objects.on_every_cluster().filter(team=team).values_list("name", flat=True)
    )
    assert names  # the demo's team-dev has a namespace to remove
    assert {m["user"] for m in body["removes"]["members"]} == set(
        team.memberships.values_list("user__username", flat=True)
    )
    assert body["keeps"]["audit_rows"] == AuditEvent.objects.filter(team=team).count()
    assert any("audit log" in line for line in body["keeps"]["said"])
    assert answer["ETag"] == body["version"]
    assert _counts() == before


def test_offboarding_over_the_api_needs_the_typed_slug_and_the_version_read(
    client: Client, demo: None
) -> None:
    admin = bearer("admin")
    url = OFFBOARD.format("team-dev")
    version = _post(client, url + "?dry_run=true", {}, **admin).json()["version"]
    before = _counts()

    missing = _post(client, url, {"version": version}, **admin)
    assert missing.status_code == 400
    assert missing.json()["code"] == "invalid"
    assert "confirm_slug" in missing.json()["errors"]
    mistyped = _post(client, url, {"confirm_slug": "team-de", "version": version}, **admin)
    assert mistyped.status_code == 400 and "confirm_slug" in mistyped.json()["errors"]
    unknown = _post(client, url, {"confirm_slug": "team-dev", "colour": "red"}, **admin)
    assert unknown.status_code == 400 and "colour" in unknown.json()["errors"]
    unread = _post(client, url, {"confirm_slug": "team-dev"}, **admin)
    assert unread.status_code == 428
    assert unread.json()["removes"]["namespaces"]  # says what it would remove
    stale = _post(client, url, {"confirm_slug": "team-dev"}, **admin, **{"If-Match": '"old"'})
    assert stale.status_code == 412
    assert _counts() == before

    done = _post(client, url, {"confirm_slug": "team-dev"}, **admin, **{"If-Match": version})
    assert done.status_code == 200, done.content
    story = done.json()["story"]
    assert not Team.objects.filter(slug="team-dev").exists()
    rows = AuditEvent.objects.filter(request_id=story)
    assert {"namespace.deleted", "team.deleted"} <= set(rows.values_list("event", flat=True))
    assert set(rows.values_list("actor_name", flat=True)) == {"admin"}
    assert set(rows.values_list("source", flat=True)) == {"api"}
    assert AuditEvent.objects.filter(team_name="team-dev").count() > rows.count()  # history
    again = _post(client, url, {"confirm_slug": "team-dev", "version": version}, **admin)
    assert again.status_code == 404 and again.json()["code"] == "not_found"


def test_offboarding_over_the_api_is_for_platform_admins(client: Client, demo: None) -> None:
    lead = bearer("lead-a")
    before = _counts()
    for slug in ("team-a", "team-b", "no-such-team"):  # own team, another, none: all 403
        answer = _post(client, OFFBOARD.format(slug) + "?dry_run=true", {}, **lead)
        assert answer.status_code == 403 and answer.json()["code"] == "permission_denied"
        answer = _post(client, OFFBOARD.format(slug), {"confirm_slug": slug}, **lead)
        assert answer.status_code == 403
    assert _counts() == before
    assert _post(client, OFFBOARD.format("no-such-team"), {}, **bearer("admin")).status_code == 404
