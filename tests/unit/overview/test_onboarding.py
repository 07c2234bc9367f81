"""Onboarding and offboarding a team, and leads managing their own members."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client

from portal.models import AuditEvent
from portal.vocabulary.errors import DomainError
from queues.models import LocalQueue
from tenants.models import Membership, Namespace, Team
from tenants.services import remove_team_member, set_team_member
from tests.support import bearer

pytestmark = pytest.mark.django_db

BODY: dict[str, Any] = {
    "slug": "team-new",
    "name": "Team New",
    "cluster": "default",
    "namespaces": [
        {
            "name": "team-new-train",
            "hard": {"requests.nvidia.com/gpu": "2", "limits.nvidia.com/gpu": "2"},
            "limits": [
                {"limit_type": "Container", "resource": "nvidia.com/gpu", "max": "2"},
            ],
            "local_queues": {"train": "cq-train"},
        }
    ],
    "members": {"lead-b": "lead", "member-a": "member"},
}


def _counts() -> tuple[int, ...]:
    return (
        Team.objects.count(),
        Namespace.objects.on_every_cluster().count(),
        LocalQueue.objects.count(),
        Membership.objects.count(),
        AuditEvent.objects.count(),
    )


def test_the_api_dry_run_answers_objects_and_warnings_and_writes_nothing(
    client: Client, demo: None
) -> None:
    admin = bearer("admin")
    before = _counts()
    answer = client.post(
        "/api/v1/onboarding/?dry_run=true", BODY, content_type="application/json", headers=admin
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["dry_run"] is True
    kinds = {(m["kind"], m["metadata"]["name"]) for m in body["manifests"]}
    assert {
        ("Namespace", "team-new-train"),
        ("LocalQueue", "train"),
    } <= kinds
    assert any(m["kind"] == "ResourceQuota" for m in body["manifests"])
    assert "kind: LimitRange" in body["yaml"]
    assert _counts() == before

    bad = client.post(
        "/api/v1/onboarding/?dry_run=true",
        {**BODY, "namespaces": [{**BODY["namespaces"][0], "local_queues": {"q": "cq-nope"}}]},
        content_type="application/json",
        headers=admin,
    )
    assert bad.status_code == 400
    assert "namespaces[0].local_queues[q].cluster_queue" in bad.json()["errors"]
    assert _counts() == before


def test_onboarding_writes_every_object_as_one_audited_story(client: Client, demo: None) -> None:
    assert (
        client.post(
            "/api/v1/onboarding/", BODY, content_type="application/json", headers=bearer("lead-a")
        ).status_code
        == 403
    )
    answer = client.post(
        "/api/v1/onboarding/", BODY, content_type="application/json", headers=bearer("admin")
    )
    assert answer.status_code == 201, answer.content
    story = answer.json()["story"]
    team = Team.objects.get(slug="team-new")
    ns = Namespace.objects.on_every_cluster().get(name="team-new-train")
    assert dict(ns.quota_items.values_list("resource", "hard")) == {
        "requests.nvidia.com/gpu": "2",
        "limits.nvidia.com/gpu": "2",
    }
    assert LocalQueue.objects.get(namespace=ns).cluster_queue.name == "cq-train"
    assert dict(team.memberships.values_list("user__username", "role")) == {
        "lead-b": "lead",
        "member-a": "member",
    }
    events = set(AuditEvent.objects.filter(request_id=story).values_list("event", flat=True))
    assert {
        "team.created",
        "namespace.created",
        "quota.changed",
        "limits.changed",
        "local_queue.saved",
        "membership.created",
    } <= events


def test_offboarding_is_refused_without_the_typed_slug(client: Client, demo: None) -> None:
    client.force_login(_user("admin"))
    team = Team.objects.get(slug="team-dev")
    before = _counts()
    page = client.get(f"/teams/{team.slug}/offboard/")
    assert page.status_code == 200 and b"Type the team" in page.content
    refused = client.post(f"/teams/{team.slug}/offboard/", {"confirm_slug": "team-de"})
    assert refused.status_code == 422
    assert _counts() == before
    version = page.context["what"].version
    stale = client.post(
        f"/teams/{team.slug}/offboard/", {"confirm_slug": team.slug, "version": "old"}
    )
    assert stale.status_code == 422 and b"changed since this page was opened" in stale.content
    assert _counts() == before
    done = client.post(
        f"/teams/{team.slug}/offboard/", {"confirm_slug": team.slug, "version": version}
    )
    assert done.status_code == 302
    assert not Team.objects.filter(slug="team-dev").exists()
    assert AuditEvent.objects.filter(team_name="team-dev").exists()  # history stays


def test_a_lead_manages_the_team_s_members_within_the_role(client: Client, demo: None) -> None:
    team = Team.objects.get(slug="team-a")
    lead = _user("lead-a")
    client.force_login(lead)
    added = client.post(
        f"/teams/{team.slug}/members/", {"username": "lead-b", "role": "viewer"}, follow=True
    )
    assert added.status_code == 200 and b"lead-b" in added.content
    assert team.memberships.get(user__username="lead-b").role == "viewer"
    row = AuditEvent.objects.filter(event="membership.created").latest("time")
    assert row.actor_name == "lead-a"
    # a member may not; the last lead stays; no platform roles through this door
    member = team.memberships.exclude(role="lead").exclude(user__username="lead-b").first()
    if member is not None:
        with pytest.raises(PermissionDenied):
            set_team_member(
                actor=member.user, team=team, username="lead-b", role="lead", source="web"
            )
    with pytest.raises(ValidationError):
        set_team_member(actor=lead, team=team, username="lead-b", role="admin", source="web")
    only_lead = team.memberships.get(user=lead)
    team.memberships.filter(role="lead").exclude(pk=only_lead.pk).update(role="member")
    with pytest.raises(ValidationError):
        set_team_member(actor=lead, team=team, username="lead-a", role="member", source="web")
    with pytest.raises(DomainError):
        remove_team_member(actor=lead, membership_id=only_lead.pk, team=team, source="web")


def _user(name: str) -> Any:
    return get_user_model().objects.get(username=name)
