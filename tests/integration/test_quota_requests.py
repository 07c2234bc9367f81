"""Self-service quota requests: asked by a lead, decided by an approver or a rule, applied
through desired state, and reverted when a time-limited grant ends."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from changes.models import AutoApprovalRule
from changes.quota import (
    approve_quota_change,
    expire_quota_grants,
    reject_quota_change,
    request_quota_change,
)
from portal.errors import DomainError
from portal.models import AuditEvent
from queues.models import ClusterQueue
from tenants.models import Namespace, Team

pytestmark = pytest.mark.django_db


def lead() -> User:
    return User.objects.get(username="lead-a")


def ask(**overrides: Any) -> Any:
    values = {
        "actor": lead(),
        "team": Team.objects.get(slug="team-a"),
        "kind": "namespace",
        "namespace": Namespace.objects.get(name="team-a"),
        "resource": "requests.nvidia.com/gpu",
        "requested": "24",
        "reason": "A deadline for the 70B run.",
    }
    return request_quota_change(**{**values, **overrides})


def hard(resource: str = "requests.nvidia.com/gpu") -> str:
    return Namespace.objects.get(name="team-a").quota_items.get(resource=resource).hard


def test_an_approved_request_changes_desired_state(demo: None) -> None:
    request = ask()
    assert (request.state, request.previous) == ("pending", "16")
    assert hard() == "16"
    approve_quota_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    request.refresh_from_db()
    assert request.state == "approved"
    assert hard() == "24"
    assert list(
        AuditEvent.objects.filter(
            target_id=str(request.pk), target_type="changes.quotachangerequest"
        )
        .order_by("id")
        .values_list("event", flat=True)
    ) == ["quota_change.requested", "quota_change.approved"]


def test_rules_for_who_asks_and_who_decides(demo: None) -> None:
    with pytest.raises(PermissionDenied):
        ask(actor=User.objects.get(username="member-a"))
    with pytest.raises(PermissionDenied):
        ask(actor=User.objects.get(username="lead-b"))
    request = ask(actor=User.objects.get(username="admin"))
    with pytest.raises(DomainError, match="cannot approve your own request"):
        approve_quota_change(
            request_id=request.pk, approver=User.objects.get(username="admin"), comment=""
        )
    with pytest.raises(PermissionDenied):
        approve_quota_change(request_id=request.pk, approver=lead(), comment="")
    reject_quota_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="Not now."
    )
    with pytest.raises(DomainError, match="already decided"):
        approve_quota_change(
            request_id=request.pk, approver=User.objects.get(username="approver"), comment=""
        )
    assert hard() == "16"


def test_bad_input_is_refused_per_field_and_writes_nothing(demo: None) -> None:
    from changes.models import QuotaChangeRequest

    with pytest.raises(ValidationError) as caught:
        ask(requested="1.5", reason="", grant_until=timezone.now() - dt.timedelta(hours=1))
    assert set(caught.value.message_dict) == {"requested", "reason", "grant_until"}
    with pytest.raises(ValidationError) as caught:
        ask(namespace=Namespace.objects.get(name="team-b"))
    assert "namespace" in caught.value.message_dict
    assert not QuotaChangeRequest.objects.exists()


def test_an_auto_approval_rule_grants_small_time_limited_increases(demo: None) -> None:
    AutoApprovalRule.objects.create(
        name="small GPU bumps",
        kind="namespace",
        resource="requests.nvidia.com/gpu",
        max_increase=8,
        max_days=7,
        requires_capacity=False,
    )
    until = timezone.now() + dt.timedelta(days=3)
    granted = ask(grant_until=until)
    granted.refresh_from_db()
    assert (granted.state, granted.auto_rule.name, granted.decided_by) == (
        "approved",
        "small GPU bumps",
        None,
    )
    assert hard() == "24"
    assert AuditEvent.objects.filter(event="quota_change.auto_approved").count() == 1
    # Too big, or not time-limited: an approver decides.
    assert ask(requested="40", grant_until=until).state == "pending"
    assert ask(requested="25").state == "pending"


def test_a_time_limited_grant_warns_then_reverts(demo: None) -> None:
    until = timezone.now() + dt.timedelta(hours=30)
    request = ask(grant_until=until)
    approve_quota_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="for the run"
    )
    assert expire_quota_grants(now=until - dt.timedelta(hours=48)) == []
    assert not AuditEvent.objects.filter(event="quota_change.expiring").exists()
    expire_quota_grants(now=until - dt.timedelta(hours=12))
    assert AuditEvent.objects.filter(event="quota_change.expiring").count() == 1
    assert expire_quota_grants(now=until + dt.timedelta(minutes=1)) == [request.pk]
    assert hard() == "16"
    request.refresh_from_db()
    assert request.state == "expired"
    assert expire_quota_grants(now=until + dt.timedelta(hours=1)) == []  # idempotent


def test_a_queue_nominal_quota_request_and_its_assessment(demo: None) -> None:
    cq = ClusterQueue.objects.get(name="cq-train")
    request = ask(
        kind="queue",
        namespace=None,
        cluster_queue=cq,
        flavor="h100-80gb",
        resource="nvidia.com/gpu",
        requested="14",
    )
    assert request.previous == "12"
    assert any(
        "cq-infer, cq-dev can borrow up to 2 less" in n
        or "cq-dev, cq-infer can borrow up to 2 less" in n
        for n in request.assessment["notes"]
    )
    approve_quota_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    assert cq.__class__.objects.get(pk=cq.pk).quota()[("h100-80gb", "nvidia.com/gpu")] == 14
    with pytest.raises(ValidationError) as caught:
        ask(
            kind="queue",
            namespace=None,
            cluster_queue=ClusterQueue.objects.get(name="cq-infer"),
            flavor="h100-80gb",
            resource="nvidia.com/gpu",
            requested="6",
        )
    assert "cluster_queue" in caught.value.message_dict  # team-a has no LocalQueue on cq-infer
