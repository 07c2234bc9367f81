"""History outlives what it talks about: deleting a namespace or a ClusterQueue keeps the
quota requests about it under its name (pages, API, audit), cancels the pending ones with
the reason (an approval could no longer apply them), and a grant on it ends without a
revert; the API's refused delete says what would leave the cluster and what stays."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from changes.models import QuotaChangeRequest
from changes.quota import approve_quota_change, expire_quota_grants, request_quota_change
from cluster.models import AppliedObject
from portal.models import AuditEvent
from portal.vocabulary.errors import DomainError
from queues.models import ClusterQueue
from tenants.models import Namespace, Team
from tenants.services import delete_namespace
from tests.factories import demo_fleet_nodes
from tests.support import bearer

pytestmark = pytest.mark.django_db


def user(name: str) -> User:
    return User.objects.get(username=name)


def ask(requested: str, **overrides: Any) -> QuotaChangeRequest:
    values: dict[str, Any] = {
        "actor": user("lead-a"),
        "team": Team.objects.get(slug="team-a"),
        "kind": "namespace",
        "namespace": Namespace.objects.get(name="team-a"),
        "resource": "requests.nvidia.com/gpu",
        "requested": requested,
        "reason": "A deadline for the 70B run.",
    }
    return request_quota_change(**{**values, **overrides})


def decided_and_pending() -> tuple[QuotaChangeRequest, QuotaChangeRequest]:
    demo_fleet_nodes()
    decided = ask("24")
    approve_quota_change(request_id=decided.pk, approver=user("approver"), comment="ok")
    return decided, ask("32")


def test_deleting_a_namespace_keeps_its_requests_and_cancels_the_pending_one(demo: None) -> None:
    decided, pending = decided_and_pending()
    assert (decided.namespace_name, pending.namespace_name) == ("team-a", "team-a")
    namespace = Namespace.objects.get(name="team-a")
    delete_namespace(actor=user("admin"), namespace=namespace, source="api")

    decided.refresh_from_db()
    pending.refresh_from_db()
    assert (decided.namespace_id, decided.state, decided.where) == (
        None,
        "approved",
        "team-a (deleted)",
    )
    assert (pending.namespace_id, pending.state) == (None, "cancelled")
    assert pending.decision_comment == (
        "Cancelled: the namespace team-a was deleted, so there is no quota left to apply this to."
    )
    voided = AuditEvent.objects.get(event="quota_change.voided")
    assert (voided.target_id, voided.actor_name, voided.source) == (
        str(pending.pk),
        "admin",
        "api",
    )
    assert voided.new == {"requested": "32", "reason": pending.decision_comment}
    kept = AuditEvent.objects.filter(target_type="changes.quotachangerequest")
    assert set(kept.values_list("event", flat=True)) >= {
        "quota_change.requested",
        "quota_change.approved",
        "quota_change.voided",
    }
    assert AuditEvent.objects.filter(event="namespace.deleted", target_repr="team-a").exists()
    with pytest.raises(DomainError, match="already decided"):
        approve_quota_change(request_id=pending.pk, approver=user("approver"), comment="ok")
    # One pending request per quota item still holds for a namespace made again by that name.
    again = Namespace.objects.create(name="team-a", team=Team.objects.get(slug="team-a"))
    again.quota_items.create(resource="requests.nvidia.com/gpu", hard="16")
    fresh = ask("32", namespace=again)
    assert (fresh.state, fresh.namespace_id, fresh.namespace_name) == (
        "pending",
        again.pk,
        "team-a",
    )
    with pytest.raises(ValidationError, match=f"Request #{fresh.pk} for this quota"):
        ask("40", namespace=again)


def test_a_pending_request_whose_namespace_is_gone_is_refused_with_409_not_500(
    demo: None, client: Client
) -> None:
    demo_fleet_nodes()
    pending = ask("24")
    # A namespace gone without the portal's delete (a script, a raw SQL fix): the row stays
    # pending, and an approval says why it cannot be applied.
    QuotaChangeRequest.objects.filter(pk=pending.pk).update(namespace=None)
    with pytest.raises(DomainError) as refused:
        approve_quota_change(request_id=pending.pk, approver=user("approver"), comment="ok")
    assert refused.value.code == "target_deleted"
    assert "The namespace team-a was deleted" in refused.value.message
    answer = client.post(
        f"/api/v1/quota-requests/{pending.pk}/approve/",
        {"comment": "ok"},
        content_type="application/json",
        headers=bearer("approver"),
    )
    assert (answer.status_code, answer.json()["code"]) == (409, "target_deleted")
    client.force_login(user("approver"))
    page = client.get(f"/quota/{pending.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "can no longer be approved" in html and "Approve " not in html and "Reject" in html


def test_pages_and_api_show_the_kept_name_after_the_delete(demo: None, client: Client) -> None:
    decided, pending = decided_and_pending()
    delete_namespace(
        actor=user("admin"), namespace=Namespace.objects.get(name="team-a"), source="web"
    )
    client.force_login(user("lead-a"))
    listing = client.get("/quota/")
    assert listing.status_code == 200
    assert listing.content.decode().count("team-a (deleted)") == 2
    detail = client.get(f"/quota/{pending.pk}/")
    assert detail.status_code == 200
    html = detail.content.decode()
    assert "<code>team-a</code>" in html and f'id="quota-{pending.pk}-deleted"' in html
    assert "Cancelled: the namespace team-a was deleted" in html
    assert client.get("/").status_code == 200
    assert client.get("/audit/").status_code == 200

    rows = client.get("/api/v1/quota-requests/", headers=bearer("lead-a")).json()["results"]
    shown = {row["id"]: row for row in rows}
    for request in (decided, pending):
        row = shown[request.pk]
        assert (row["namespace"], row["namespace_name"], row["target_deleted"]) == (
            None,
            "team-a",
            True,
        )
    assert shown[pending.pk]["state"] == "cancelled"


def test_a_grant_on_a_deleted_namespace_ends_without_a_revert(demo: None) -> None:
    demo_fleet_nodes()
    grant = ask("24", grant_until=timezone.now() + dt.timedelta(days=3))
    approve_quota_change(request_id=grant.pk, approver=user("approver"), comment="ok")
    delete_namespace(
        actor=user("admin"), namespace=Namespace.objects.get(name="team-a"), source="api"
    )
    assert expire_quota_grants(now=timezone.now() + dt.timedelta(days=4)) == [grant.pk]
    grant.refresh_from_db()
    assert grant.state == "expired"
    skipped = AuditEvent.objects.get(event="quota_change.revert_skipped", target_id=grant.pk)
    assert skipped.new == {"note": "team-a was deleted; nothing to put back"}


def test_deleting_a_cluster_queue_in_the_admin_cancels_its_pending_requests(
    demo: None, client: Client
) -> None:
    demo_fleet_nodes()
    cq = ClusterQueue.objects.get(name="cq-train")
    pending = ask(
        "16",
        kind="queue",
        namespace=None,
        cluster_queue=cq,
        flavor="h100-80gb",
        resource="nvidia.com/gpu",
    )
    cq.local_queues.all().delete()  # LocalQueues protect their ClusterQueue
    client.force_login(user("admin"))
    answer = client.post(f"/admin/queues/clusterqueue/{cq.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 302
    pending.refresh_from_db()
    assert (pending.cluster_queue_id, pending.state, pending.where) == (
        None,
        "cancelled",
        "cq-train (deleted) / h100-80gb",
    )
    assert "ClusterQueue cq-train was deleted" in pending.decision_comment
    assert AuditEvent.objects.filter(event="quota_change.voided", source="admin").count() == 1


def applied(kind: str, name: str, namespace: str = "", *, adopted: bool = False) -> None:
    AppliedObject.objects.create(
        api_version="v1", kind=kind, name=name, namespace=namespace, adopted=adopted
    )


def test_the_api_delete_without_if_match_says_what_it_removes_and_keeps(
    demo: None, client: Client
) -> None:
    decided_and_pending()
    applied("Namespace", "team-a", adopted=True)
    blind = client.delete("/api/v1/namespaces/team-a/", headers=bearer("admin"))
    body = blind.json()
    assert (blind.status_code, body["code"]) == (428, "precondition_required")
    assert body["detail"].startswith("Deleting a namespace removes the portal's objects in it")
    assert body["removes"] == [
        "Namespace team-a stays, with everything in it: it was there before the portal, "
        "which only gives up the labels it set."
    ]
    assert body["keeps"][0] == (
        "2 quota requests about it stay in the history, shown as “team-a (deleted)”."
    )
