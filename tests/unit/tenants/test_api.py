"""REST API of tenants: teams, namespaces, quotas and limits."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tenants.api import NamespaceSerializer
from tenants.models import LimitRangeItem, Namespace, QuotaItem
from tests.support import bearer

pytestmark = pytest.mark.django_db


def test_admins_create_and_change_teams_with_if_match(client: Client, fleet: None) -> None:
    from portal.models import AuditEvent
    from tenants.models import Team

    admin = bearer("admin")
    body = {"slug": "team-new", "name": "New", "allowed_priority_classes": ["dev-best-effort"]}
    assert (
        client.post(
            "/api/v1/teams/", body, content_type="application/json", headers=bearer("lead-a")
        ).status_code
        == 403
    )
    bad = client.post(
        "/api/v1/teams/",
        {**body, "slug": "Team_New", "allowed_priority_classes": ["nope"]},
        content_type="application/json",
        headers=admin,
    )
    assert bad.status_code == 400
    assert "nope" in str(bad.json()["errors"]["allowed_priority_classes"])
    bad = client.post(
        "/api/v1/teams/",
        {**body, "slug": "Team_New"},
        content_type="application/json",
        headers=admin,
    )
    assert bad.status_code == 400 and "slug" in bad.json()["errors"]
    assert not Team.objects.filter(name="New").exists()

    created = client.post("/api/v1/teams/", body, content_type="application/json", headers=admin)
    assert created.status_code == 201, created.json()
    assert created.json()["allowed_priority_classes"] == ["dev-best-effort"]
    etag = client.get("/api/v1/teams/team-new/", headers=admin).headers["ETag"]
    assert etag == created.headers["ETag"]
    changed = client.patch(
        "/api/v1/teams/team-new/",
        {"name": "Newer"},
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert changed.status_code == 200 and changed.json()["name"] == "Newer"
    stale = client.patch(
        "/api/v1/teams/team-new/",
        {"name": "Lost update"},
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert stale.status_code == 412
    assert Team.objects.get(slug="team-new").name == "Newer"
    assert AuditEvent.objects.filter(event="team.changed", source="api").exists()


def test_quota_and_limits_over_the_api(client: Client, fleet: None) -> None:
    from portal.models import AuditEvent
    from tenants.models import Namespace

    admin = bearer("admin")
    url = "/api/v1/namespaces/team-a/"
    read = client.get(url, headers=admin)
    etag, before = read.headers["ETag"], read.json()["quota"]
    # a lead reads their namespace but cannot change the quota; another team's lead sees nothing
    assert client.get(url, headers=bearer("lead-a")).status_code == 200
    assert (
        client.put(
            url + "quota/",
            {"hard": {"pods": "10"}},
            content_type="application/json",
            headers=bearer("lead-a"),
        ).status_code
        == 403
    )
    assert (
        client.put(
            url + "quota/",
            {"hard": {"pods": "10"}},
            content_type="application/json",
            headers=bearer("lead-b"),
        ).status_code
        == 404
    )
    # out-of-range quantities are refused per item and nothing changes
    bad = client.put(
        url + "quota/",
        {"hard": {"requests.nvidia.com/gpu": "1.5", "pods": "10"}},
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert bad.status_code == 400
    assert "hard[requests.nvidia.com/gpu]" in bad.json()["errors"]
    assert client.get(url, headers=admin).json()["quota"] == before

    # beyond what the one observed node (8 GPUs) could ever offer: a reason, or refused
    beyond = client.put(
        url + "quota/",
        {"hard": {**before, "requests.nvidia.com/gpu": "32"}},
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert beyond.status_code == 400
    assert "could ever offer (8 in its best MIG layout)" in str(beyond.json()["errors"])
    good = client.put(
        url + "quota/",
        {
            "hard": {**before, "requests.nvidia.com/gpu": "32"},
            "override_reason": "nodes on order",
        },
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert good.status_code == 200, good.json()
    assert good.json()["quota"]["requests.nvidia.com/gpu"] == "32"
    assert good.headers["ETag"] != etag
    stale = client.put(
        url + "quota/",
        {"hard": {}},
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert stale.status_code == 412
    assert client.get(url, headers=admin).json()["quota"]["requests.nvidia.com/gpu"] == "32"
    assert AuditEvent.objects.filter(event="quota.changed", source="api").exists()

    limits = client.put(
        url + "limits/",
        {
            "limits": [
                {
                    "limit_type": "Container",
                    "resource": "cpu",
                    "default": "2",
                    "default_request": "1",
                }
            ]
        },
        content_type="application/json",
        headers=admin,
    )
    assert limits.status_code == 200, limits.json()
    assert limits.json()["limits"][0]["default"] == "2"
    wrong = client.put(
        url + "limits/",
        {"limits": [{"limit_type": "Node", "resource": "cpu"}]},
        content_type="application/json",
        headers=admin,
    )
    assert wrong.status_code == 400
    assert Namespace.objects.get(name="team-a").limit_items.count() == 1


def test_admins_create_and_remove_namespaces(client: Client, fleet: None) -> None:
    from tenants.models import Namespace

    admin = bearer("admin")
    bad = client.post(
        "/api/v1/namespaces/",
        {"name": "Bad_Name", "team": "team-a"},
        content_type="application/json",
        headers=admin,
    )
    assert bad.status_code == 400 and "name" in bad.json()["errors"]
    assert (
        client.post(
            "/api/v1/namespaces/",
            {"name": "team-a-x", "team": "team-a"},
            content_type="application/json",
            headers=bearer("lead-a"),
        ).status_code
        == 403
    )
    created = client.post(
        "/api/v1/namespaces/",
        {"name": "team-a-x", "team": "team-a"},
        content_type="application/json",
        headers=admin,
    )
    assert created.status_code == 201, created.json()
    again = client.post(
        "/api/v1/namespaces/",
        {"name": "team-a-x", "team": "team-a"},
        content_type="application/json",
        headers=admin,
    )
    assert again.status_code == 400 and "name" in again.json()["errors"]
    assert (
        client.delete("/api/v1/namespaces/team-a-x/", headers=bearer("lead-a")).status_code == 403
    )
    blind = client.delete("/api/v1/namespaces/team-a-x/", headers=admin)
    assert (blind.status_code, blind.json()["code"]) == (428, "precondition_required")
    assert Namespace.objects.filter(name="team-a-x").exists()
    etag = client.get("/api/v1/namespaces/team-a-x/", headers=admin)["ETag"]
    deleted = client.delete("/api/v1/namespaces/team-a-x/", headers={**admin, "If-Match": etag})
    assert deleted.status_code == 204
    assert not Namespace.objects.filter(name="team-a-x").exists()


def test_a_teams_priority_classes_changed_over_the_api_are_audited(
    client: Client, fleet: None
) -> None:
    from portal.models import AuditEvent
    from tenants.models import Team

    admin = bearer("admin")
    created = client.post(
        "/api/v1/teams/",
        {"slug": "team-new", "name": "New", "allowed_priority_classes": ["dev-best-effort"]},
        content_type="application/json",
        headers=admin,
    )
    assert created.status_code == 201, created.json()
    # (the demo's teams got theirs through the same service: theirs are audited too)
    granted = AuditEvent.objects.get(event="team.priority_classes_changed", team_name="team-new")
    assert (granted.old, granted.new, granted.source) == (
        {"allowed_priority_classes": []},
        {"allowed_priority_classes": ["dev-best-effort"]},
        "api",
    )
    changed = client.patch(
        "/api/v1/teams/team-new/",
        {"allowed_priority_classes": ["training-critical", "dev-best-effort"]},
        content_type="application/json",
        headers=admin,
    )
    assert changed.status_code == 200, changed.json()
    event = AuditEvent.objects.filter(event="team.priority_classes_changed").latest("pk")
    assert event.team == Team.objects.get(slug="team-new")
    assert event.actor_name == "admin"
    assert event.new == {"allowed_priority_classes": ["dev-best-effort", "training-critical"]}
    assert event.old == {"allowed_priority_classes": ["dev-best-effort"]}
    # The same classes again change nothing and record nothing.
    client.patch(
        "/api/v1/teams/team-new/",
        {"allowed_priority_classes": ["dev-best-effort", "training-critical"]},
        content_type="application/json",
        headers=admin,
    )
    assert (
        AuditEvent.objects.filter(
            event="team.priority_classes_changed", team_name="team-new"
        ).count()
        == 2
    )


def test_the_namespaces_list_shows_each_ones_items_in_order_as_its_related_rows_say(
    client: Client, fleet: None
) -> None:
    """A page of namespaces reads their quota and limit items in its one statement: each
    namespace shows them as the serializer shows its related rows, in the models' order."""
    ns = Namespace.objects.get(name="team-a")
    QuotaItem.objects.filter(namespace=ns).delete()
    LimitRangeItem.objects.filter(namespace=ns).delete()
    for resource, hard in (("requests.nvidia.com/gpu", "8"), ("pods", "40"), ("limits.cpu", "9")):
        QuotaItem.objects.create(namespace=ns, resource=resource, hard=hard)
    for limit_type, resource in (("Pod", "cpu"), ("Container", "memory"), ("Container", "cpu")):
        LimitRangeItem.objects.create(
            namespace=ns, limit_type=limit_type, resource=resource, max="4", min="1"
        )
    listed = client.get("/api/v1/namespaces/", headers=bearer("admin")).json()["results"]
    assert [n["name"] for n in listed] == [n.name for n in Namespace.objects.order_by("name")]
    for shown in listed:
        related = NamespaceSerializer(
            Namespace.objects.get(name=shown["name"], cluster__name=shown["cluster"])
        ).data
        assert json.dumps(shown) == json.dumps(related)
    team_a = next(n for n in listed if n["name"] == "team-a")
    assert list(team_a["quota"]) == ["limits.cpu", "pods", "requests.nvidia.com/gpu"]
    assert [(i["limit_type"], i["resource"]) for i in team_a["limits"]] == [
        ("Container", "cpu"),
        ("Container", "memory"),
        ("Pod", "cpu"),
    ]
