"""The admin writes teams, memberships, namespaces, their quota and limits, and the
PriorityClass catalog through ``tenants.services`` only: the service's refusals on the page
with nothing written, one audit row per change naming the admin, inline rows included, and a
namespace never moved to another cluster by an edit."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from cluster.models import Cluster
from portal.models import AuditEvent
from tenants.models import LimitRangeItem, Membership, Namespace, PriorityClass, Team
from tests.admin_forms import (
    audited_since,
    change_url,
    edit_writes_one_row,
    form_data,
    inline_row,
    last_audit,
    page_text,
)

pytestmark = pytest.mark.django_db


def test_moving_a_namespace_to_another_cluster_is_refused_and_it_stays(
    admin_site: Client,
) -> None:
    inference = Cluster.objects.create(name="inference", display_name="Inference")
    namespace = Namespace.objects.get(name="team-b")
    home = namespace.cluster_id
    data = form_data(admin_site, change_url(namespace))
    before = last_audit()
    answer = admin_site.post(change_url(namespace), {**data, "cluster": str(inference.pk)})
    assert answer.status_code == 200  # the form again, with why
    shown = page_text(answer)
    assert "The namespace team-b is on cluster default: it cannot move." in shown
    assert "then delete it here (the delete says what it removes and asks to confirm)" in shown
    namespace.refresh_from_db()
    assert namespace.cluster_id == home
    assert audited_since(before) == []


def test_moving_a_namespace_from_its_teams_page_is_refused_too(admin_site: Client) -> None:
    inference = Cluster.objects.create(name="inference", display_name="Inference")
    team = Team.objects.get(slug="team-b")
    data = form_data(admin_site, change_url(team))
    row = inline_row(data, "namespaces", "name", "team-b")
    assert row is not None
    before = last_audit()
    answer = admin_site.post(change_url(team), {**data, f"{row}-cluster": str(inference.pk)})
    assert answer.status_code == 200
    assert "cluster: The namespace team-b is on cluster default: it cannot move." in page_text(
        answer
    )
    assert Namespace.objects.get(name="team-b").cluster.name == "default"
    assert audited_since(before) == []


def test_a_quota_raised_beyond_the_fleet_needs_the_services_reason(
    admin_site: Client, fleet: None
) -> None:
    """The one observed node has 8 GPUs: 100 is more than the fleet could ever offer."""
    namespace = Namespace.objects.get(name="team-b")
    data = form_data(admin_site, change_url(namespace))
    row = inline_row(data, "quota_items", "resource", "requests.nvidia.com/gpu")
    assert row is not None
    before = last_audit()
    refused = admin_site.post(change_url(namespace), {**data, f"{row}-hard": "100"})
    assert refused.status_code == 200
    assert (
        "hard[requests.nvidia.com/gpu]: 100 is more than the fleet could ever offer (8 in its "
        "best MIG layout): give an override reason to set it anyway."
    ) in page_text(refused)
    assert namespace.quota_items.get(resource="requests.nvidia.com/gpu").hard == "8"
    assert audited_since(before) == []
    saved = admin_site.post(
        change_url(namespace),
        {**data, f"{row}-hard": "100", "override_reason": "Eight nodes arrive Monday."},
    )
    assert saved.status_code == 302
    assert namespace.quota_items.get(resource="requests.nvidia.com/gpu").hard == "100"
    assert audited_since(before) == [("quota.changed", "admin", "admin")]
    event = AuditEvent.objects.latest("pk")
    assert event.old["requests.nvidia.com/gpu"] == "8"
    assert event.new["requests.nvidia.com/gpu"] == "100"
    assert event.new["override_reason"] == "Eight nodes arrive Monday."


def test_quota_and_limit_rows_edited_inline_are_each_audited_once(
    admin_site: Client,
) -> None:
    namespace = Namespace.objects.get(name="team-a")
    data = form_data(admin_site, change_url(namespace))
    quota = inline_row(data, "quota_items", "resource", "pods")
    limit = inline_row(data, "limit_items", "resource", "nvidia.com/gpu")
    assert quota is not None and limit is not None
    before = last_audit()
    saved = admin_site.post(
        change_url(namespace),
        {**data, f"{quota}-hard": "60", f"{limit}-default": "2", f"{limit}-default_request": "2"},
    )
    assert saved.status_code == 302, page_text(saved)[-1500:]
    assert audited_since(before) == [
        ("quota.changed", "admin", "admin"),
        ("limits.changed", "admin", "admin"),
    ]
    quota_row = AuditEvent.objects.get(pk__gt=before, event="quota.changed")
    assert (quota_row.old["pods"], quota_row.new["pods"]) == ("50", "60")
    assert LimitRangeItem.objects.get(namespace=namespace, resource="nvidia.com/gpu").default == "2"


def test_a_limit_the_service_refuses_leaves_every_row_as_it_was(admin_site: Client) -> None:
    namespace = Namespace.objects.get(name="team-a")
    data = form_data(admin_site, change_url(namespace))
    limit = inline_row(data, "limit_items", "resource", "nvidia.com/gpu")
    quota = inline_row(data, "quota_items", "resource", "pods")
    assert limit is not None and quota is not None
    before = last_audit()
    # A default request above the default limit: the API server (and the service) refuse it.
    answer = admin_site.post(
        change_url(namespace),
        {**data, f"{quota}-hard": "60", f"{limit}-default_request": "4"},
    )
    assert answer.status_code == 200
    assert "Please correct the error" in page_text(answer)
    assert namespace.quota_items.get(resource="pods").hard == "50"  # the quota row too
    assert audited_since(before) == []


def test_a_membership_added_on_the_teams_page_is_audited(admin_site: Client) -> None:
    team = Team.objects.get(slug="team-b")
    newcomer = User.objects.create_user("erin")
    data = form_data(admin_site, change_url(team))
    total = int(data["memberships-TOTAL_FORMS"])
    before = last_audit()
    saved = admin_site.post(
        change_url(team),
        {
            **data,
            "memberships-TOTAL_FORMS": str(total + 1),
            f"memberships-{total}-user": str(newcomer.pk),
            f"memberships-{total}-role": "member",
            f"memberships-{total}-team": str(team.pk),
            f"memberships-{total}-granted_by": "portal",
        },
    )
    assert saved.status_code == 302, page_text(saved)[-1500:]
    assert audited_since(before) == [("membership.created", "admin", "admin")]
    assert AuditEvent.objects.latest("pk").team_name == "team-b"
    assert Membership.objects.get(user=newcomer).role == "member"


@pytest.mark.parametrize(
    ("model", "lookup", "changes", "event"),
    [
        (Team, {"slug": "team-b"}, {"description": "Vision research."}, "team.changed"),
        (Namespace, {"name": "team-b"}, {"description": "Vision jobs."}, "namespace.changed"),
        (
            PriorityClass,
            {"name": "dev-best-effort"},
            {"description": "Best effort."},
            "priority_class.saved",
        ),
        (Membership, {"user__username": "lead-b"}, {"role": "member"}, "membership.changed"),
    ],
)
def test_a_valid_admin_edit_writes_one_audit_row_naming_the_admin(
    admin_site: Client, model: Any, lookup: dict[str, str], changes: dict[str, str], event: str
) -> None:
    edit_writes_one_row(admin_site, model.objects.get(**lookup), changes, event)


@pytest.mark.parametrize(
    ("model", "lookup", "changes", "message"),
    [
        (
            Namespace,
            {"name": "team-b"},
            {"name": "kube-vision"},
            "Names starting with 'kube-' and 'default' belong to the cluster.",
        ),
        (
            PriorityClass,
            {"name": "dev-best-effort"},
            {"value": "2000000000"},
            "Must be between -2,147,483,648 and 1,000,000,000",
        ),
        (Team, {"slug": "team-b"}, {"slug": "Team B"}, "a lowercase RFC 1123 label must consist"),
    ],
)
def test_an_invalid_admin_edit_is_refused_with_the_rules_message_and_nothing_written(
    admin_site: Client,
    model: Any,
    lookup: dict[str, str],
    changes: dict[str, str],
    message: str,
) -> None:
    obj = model.objects.get(**lookup)
    data = form_data(admin_site, change_url(obj))
    before = last_audit()
    answer = admin_site.post(change_url(obj), {**data, **changes})
    assert answer.status_code == 200
    assert message in page_text(answer)
    fresh = model.objects.get(pk=obj.pk)
    assert all(getattr(fresh, k) == getattr(obj, k) for k in changes)
    assert audited_since(before) == []


def test_quota_and_limit_items_are_not_written_on_their_own_pages(admin_site: Client) -> None:
    """Edited on their namespace's page, where the whole quota is checked and audited."""
    item = Namespace.objects.get(name="team-b").quota_items.get(resource="pods")
    assert admin_site.get("/admin/tenants/quotaitem/add/").status_code == 403
    answer = admin_site.post(change_url(item), {"namespace": item.namespace_id, "hard": "1"})
    assert answer.status_code == 403
    item.refresh_from_db()
    assert item.hard == "50"


def test_the_audit_log_is_read_only_in_the_admin(admin_site: Client) -> None:
    event = AuditEvent.objects.order_by("pk").first()
    assert event is not None
    assert admin_site.get("/admin/portal/auditevent/add/").status_code == 403
    assert admin_site.post(change_url(event), {"event": "forged"}).status_code == 403
    assert admin_site.post(f"/admin/portal/auditevent/{event.pk}/delete/").status_code == 403
    assert AuditEvent.objects.get(pk=event.pk).event == event.event


def test_a_membership_removed_on_the_teams_page_is_audited(admin_site: Client) -> None:
    team = Team.objects.get(slug="team-b")
    data = form_data(admin_site, change_url(team))
    lead = Membership.objects.get(team=team, user__username="lead-b")
    row = inline_row(data, "memberships", "id", str(lead.pk))
    assert row is not None
    before = last_audit()
    saved = admin_site.post(change_url(team), {**data, f"{row}-DELETE": "on"})
    assert saved.status_code == 302, page_text(saved)[-1500:]
    assert audited_since(before) == [("membership.deleted", "admin", "admin")]
    assert AuditEvent.objects.latest("pk").old["user"] == "lead-b"
    assert not Membership.objects.filter(pk=lead.pk).exists()


def test_a_teams_priority_classes_are_in_its_audit_row_as_chosen(admin_site: Client) -> None:
    """The team's row is saved before its classes are set: its audit row said "none" where
    training-critical was chosen (team-a in the demo too)."""
    demo = AuditEvent.objects.get(event="team.created", team_name="team-a")
    assert demo.new["allowed_priority_classes"] == ["training-critical"]
    critical = PriorityClass.objects.get(name="training-critical")
    data = form_data(admin_site, "/admin/tenants/team/add/")
    before = last_audit()
    saved = admin_site.post(
        "/admin/tenants/team/add/",
        {**data, "slug": "team-new", "name": "New", "allowed_priority_classes": [critical.pk]},
    )
    assert saved.status_code == 302, page_text(saved)[-1500:]
    assert audited_since(before) == [
        ("team.created", "admin", "admin"),
        ("team.priority_classes_changed", "admin", "admin"),
    ]
    created = AuditEvent.objects.get(event="team.created", team_name="team-new")
    assert created.new["allowed_priority_classes"] == ["training-critical"]
    team = Team.objects.get(slug="team-new")
    assert [pc.name for pc in team.allowed_priority_classes.all()] == ["training-critical"]


def test_a_namespace_created_and_a_lead_granted_on_the_teams_page_are_audited(
    admin_site: Client,
) -> None:
    team = Team.objects.get(slug="team-b")
    member = Membership.objects.create(
        team=team, user=User.objects.create_user("erin"), role="member"
    )
    data = form_data(admin_site, change_url(team))
    row = inline_row(data, "memberships", "id", str(member.pk))
    assert row is not None
    total = int(data["namespaces-TOTAL_FORMS"])
    before = last_audit()
    saved = admin_site.post(
        change_url(team),
        {
            **data,
            f"{row}-role": "lead",
            "namespaces-TOTAL_FORMS": str(total + 1),
            f"namespaces-{total}-name": "team-b-vision",
            f"namespaces-{total}-team": str(team.pk),
            f"namespaces-{total}-cluster": data["namespaces-0-cluster"],
        },
    )
    assert saved.status_code == 302, page_text(saved)[-1500:]
    assert sorted(audited_since(before)) == [
        ("membership.changed", "admin", "admin"),
        ("namespace.created", "admin", "admin"),
    ]
    granted = AuditEvent.objects.get(pk__gt=before, event="membership.changed")
    assert (granted.old["role"], granted.new["role"], granted.team_name) == (
        "member",
        "lead",
        "team-b",
    )
    assert Namespace.objects.get(name="team-b-vision").team == team
