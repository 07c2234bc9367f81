"""Work done because of a decision names who decided and the request it carries out: the
audit row of an approved quota change's write is the approver's, pointing at the request."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from changes.models import AutoApprovalRule, QuotaChangeRequest
from changes.quota import approve_quota_change, expire_quota_grants
from cluster.models import ObservedNode
from portal.audit.record import SYSTEM, record_audit
from portal.models import AuditEvent
from portal.vocabulary.errors import DomainError
from queues.models import ClusterQueue
from tests.factories import demo_fleet_nodes, demo_quota_request

pytestmark = pytest.mark.django_db


ask = demo_quota_request


def write_of(request: QuotaChangeRequest, event: str) -> AuditEvent:
    """The one audit row of the desired-state write the request caused."""
    return AuditEvent.objects.get(event=event, cause=f"changes.quotachangerequest:{request.pk}")


def test_the_namespace_quota_write_of_an_approval_names_the_approver_and_the_request(
    demo: None,
) -> None:
    request = ask()
    approver = User.objects.get(username="approver")
    approve_quota_change(request_id=request.pk, approver=approver, comment="ok")
    row = AuditEvent.objects.filter(event="quota.changed").latest("id")
    assert (row.actor_id, row.actor_name, row.source) == (approver.pk, "approver", "web")
    assert row.cause == f"changes.quotachangerequest:{request.pk}"
    assert row.new["requests.nvidia.com/gpu"] == "24"
    assert "override_reason" not in row.new  # the approval checked the ceiling: no made-up reason


def test_the_cluster_queue_write_of_an_approval_names_the_approver_and_the_request(
    demo: None,
) -> None:
    request = ask(
        kind="queue",
        namespace=None,
        cluster_queue=ClusterQueue.objects.get(name="cq-train"),
        flavor="h100-80gb",
        resource="nvidia.com/gpu",
        requested="14",
    )
    approver = User.objects.get(username="approver")
    approve_quota_change(request_id=request.pk, approver=approver, comment="ok", source="api")
    row = AuditEvent.objects.filter(event="cluster_queue.saved").latest("id")
    assert (row.actor_id, row.actor_name, row.source) == (approver.pk, "approver", "api")
    assert row.cause == f"changes.quotachangerequest:{request.pk}"
    assert row.target_repr.startswith("cq-train")


def test_a_rule_and_the_end_of_a_grant_act_as_the_system_for_the_request(demo: None) -> None:
    AutoApprovalRule.objects.create(
        name="small GPU bumps",
        kind="namespace",
        resource="requests.nvidia.com/gpu",
        max_increase=8,
        max_days=7,
        requires_capacity=False,
    )
    granted = ask(grant_until=timezone.now() + dt.timedelta(days=3))
    row = write_of(granted, "quota.changed")
    assert (row.actor_id, row.actor_name) == (None, "auto-approval rule “small GPU bumps”")
    expire_quota_grants(now=timezone.now() + dt.timedelta(days=4))
    reverted = AuditEvent.objects.filter(
        event="quota.changed", cause=f"changes.quotachangerequest:{granted.pk}"
    ).latest("id")
    assert (reverted.actor_id, reverted.actor_name, reverted.source) == (None, "system", "task")
    assert reverted.new["requests.nvidia.com/gpu"] == "16"


def test_an_audit_row_without_an_actor_is_refused(demo: None) -> None:
    with pytest.raises(TypeError, match="needs an actor"):
        record_audit(actor=None, event="team.created", source="cli")  # type: ignore[arg-type]
    assert record_audit(actor=SYSTEM, event="team.created", source="cli").actor_name == "system"


def test_the_audit_page_csv_and_api_name_the_request_a_write_carried_out(demo: None) -> None:
    request = ask()
    approve_quota_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    row = AuditEvent.objects.filter(event="quota.changed").latest("id")
    page = client.get("/audit/?event=quota.changed").content.decode()
    assert f'for <a href="/quota/{request.pk}/">Quota request #{request.pk}</a>' in page
    streamed = client.get("/audit/events.csv?event=quota.changed").streaming_content
    csv_text = b"".join(streamed).decode()  # type: ignore[arg-type]
    assert f"changes.quotachangerequest:{request.pk}" in csv_text
    listed = client.get("/api/v1/audit/", {"event": "quota.changed"}).json()["results"]
    assert next(e for e in listed if e["id"] == row.pk)["cause"] == row.cause


def test_an_approval_beyond_the_fleet_now_records_no_made_up_reason(demo: None) -> None:
    demo_fleet_nodes()  # 40 GPUs: 24 fits when asked
    request = ask()
    ObservedNode.objects.exclude(name="gpu-h100-01").delete()  # the fleet shrinks to 8
    approver = User.objects.get(username="approver")
    with pytest.raises(DomainError, match="decide again"):
        approve_quota_change(request_id=request.pk, approver=approver, comment="ok")
    request.refresh_from_db()
    approve_quota_change(
        request_id=request.pk,
        approver=approver,
        comment="read it",
        seen=request.assessment["fingerprint"],
    )
    row = write_of(request, "quota.changed")
    assert row.new == {**row.old, "requests.nvidia.com/gpu": "24"}  # what was asked, no reason
