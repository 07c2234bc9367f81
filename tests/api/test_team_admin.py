"""Daily administration over the API: offboarding a team and a team's members, through the
same services (and the same permission rules) as their pages."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from portal.models import AuditEvent, PlatformRole
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


MEMBERS = "/api/v1/teams/{}/members/"


def test_a_lead_manages_their_team_s_members_over_the_api(client: Client, demo: None) -> None:
    lead = bearer("lead-a")
    listed = client.get(MEMBERS.format("team-a"), headers=lead)
    assert listed.status_code == 200
    assert {(m["user"], m["role"]) for m in listed.json()} == set(
        Membership.objects.filter(team__slug="team-a").values_list("user__username", "role")
    )

    added = _post(
        client, MEMBERS.format("team-a"), {"username": "lead-b", "role": "viewer"}, **lead
    )
    assert added.status_code == 201, added.content
    assert added.json()["user"] == "lead-b" and added.json()["role"] == "viewer"
    created = AuditEvent.objects.filter(event="membership.created").latest("time")
    assert (created.actor_name, created.source) == ("lead-a", "api")

    changed = client.patch(
        MEMBERS.format("team-a") + "lead-b/",
        {"role": "member"},
        content_type="application/json",
        headers=lead,
    )
    assert changed.status_code == 200 and changed.json()["role"] == "member"
    assert Membership.objects.get(team__slug="team-a", user__username="lead-b").role == "member"

    unknown = _post(
        client, MEMBERS.format("team-a"), {"username": "nobody", "role": "member"}, **lead
    )
    assert unknown.status_code == 400 and "username" in unknown.json()["errors"]

    removed = client.delete(MEMBERS.format("team-a") + "lead-b/", headers=lead)
    assert removed.status_code == 204
    assert not Membership.objects.filter(team__slug="team-a", user__username="lead-b").exists()
    revoked = AuditEvent.objects.filter(event="membership.revoked").latest("time")
    assert (revoked.actor_name, revoked.source) == ("lead-a", "api")

    last_lead = client.delete(MEMBERS.format("team-a") + "lead-a/", headers=lead)
    assert last_lead.status_code == 409 and "last lead" in last_lead.json()["detail"]
    assert client.delete(MEMBERS.format("team-a") + "nobody/", headers=lead).status_code == 404


def test_a_lead_is_answered_not_found_on_another_team_s_members(client: Client, demo: None) -> None:
    lead = bearer("lead-a")
    before = list(Membership.objects.order_by("pk").values_list("pk", "role"))
    for answer in (
        client.get(MEMBERS.format("team-b"), headers=lead),
        _post(client, MEMBERS.format("team-b"), {"username": "lead-a", "role": "lead"}, **lead),
        client.patch(
            MEMBERS.format("team-b") + "lead-b/",
            {"role": "viewer"},
            content_type="application/json",
            headers=lead,
        ),
        client.delete(MEMBERS.format("team-b") + "lead-b/", headers=lead),
    ):
        assert answer.status_code == 404, answer.content
        assert answer.json() == {"detail": "Not found.", "code": "not_found"}
    # the same answer as a team that does not exist, and as the team route itself
    assert client.get(MEMBERS.format("no-such-team"), headers=lead).status_code == 404
    assert client.get("/api/v1/teams/team-b/", headers=lead).status_code == 404
    assert list(Membership.objects.order_by("pk").values_list("pk", "role")) == before


def test_no_one_escalates_beyond_their_role_over_the_members_api(
    client: Client, demo: None
) -> None:
    roles_before = PlatformRole.objects.count()
    before = list(Membership.objects.order_by("pk").values_list("pk", "role"))
    lead = bearer("lead-a")
    for role in ("admin", "approver", "owner"):  # platform roles are not a team role
        answer = _post(
            client, MEMBERS.format("team-a"), {"username": "lead-b", "role": role}, **lead
        )
        assert answer.status_code == 400 and "role" in answer.json()["errors"]
        answer = client.patch(
            MEMBERS.format("team-a") + "member-a/",
            {"role": role},
            content_type="application/json",
            headers=lead,
        )
        assert answer.status_code == 400 and "role" in answer.json()["errors"]
    # a member reads the list but may not make themselves (or anyone) lead
    member = bearer("member-a")
    assert client.get(MEMBERS.format("team-a"), headers=member).status_code == 200
    promoted = client.patch(
        MEMBERS.format("team-a") + "member-a/",
        {"role": "lead"},
        content_type="application/json",
        headers=member,
    )
    assert promoted.status_code == 403 and promoted.json()["code"] == "permission_denied"
    added = _post(
        client, MEMBERS.format("team-a"), {"username": "lead-b", "role": "lead"}, **member
    )
    assert added.status_code == 403
    assert client.delete(MEMBERS.format("team-a") + "lead-a/", headers=member).status_code == 403
    assert PlatformRole.objects.count() == roles_before
    assert list(Membership.objects.order_by("pk").values_list("pk", "role")) == before


def test_an_admin_manages_any_team_s_members(client: Client, demo: None) -> None:
    admin = bearer("admin")
    added = _post(
        client, MEMBERS.format("team-b"), {"username": "lead-a", "role": "viewer"}, **admin
    )
    assert added.status_code == 201
    again = _post(
        client, MEMBERS.format("team-b"), {"username": "lead-a", "role": "member"}, **admin
    )
    assert again.status_code == 200 and again.json()["role"] == "member"
