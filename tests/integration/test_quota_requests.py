"""Self-service quota requests: asked by a lead, decided by an approver or a rule, applied
through desired state, and reverted when a time-limited grant ends."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.utils import timezone

from changes.models import AutoApprovalRule
from changes.quota import (
    approve_quota_change,
    cancel_quota_change,
    expire_quota_grants,
    reject_quota_change,
)
from portal.models import AuditEvent
from portal.vocabulary.errors import DomainError
from queues.models import ClusterQueue
from tenants.models import Namespace
from tests.factories import demo_fleet_nodes, demo_quota_request

pytestmark = pytest.mark.django_db


def lead() -> User:
    return User.objects.get(username="lead-a")


ask = demo_quota_request  # lead-a asks for 24 GPUs in team-a (overrides: other values)


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
    big = ask(requested="40", grant_until=until)
    assert big.state == "pending"
    cancel_quota_change(request_id=big.pk, actor=lead())
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
        "While cq-train leaves it unused, cq-dev, cq-infer may borrow it" in n
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


# ----------------------------------------------------------------------------- trustworthy


def approver() -> User:
    return User.objects.get(username="approver")


def test_a_no_op_is_refused_and_values_are_stored_in_one_spelling(demo: None) -> None:
    with pytest.raises(ValidationError) as caught:
        ask(requested="16")
    assert caught.value.message_dict == {
        "requested": ["The quota is already 16: there is nothing to change."]
    }
    with pytest.raises(ValidationError, match="already 16"):
        ask(requested="1.6e1")  # the same value in another spelling is still no change
    request = ask(requested="2.4e1")
    assert (request.previous, request.requested) == ("16", "24")
    approve_quota_change(request_id=request.pk, approver=approver(), comment="ok")
    assert hard() == "24"


def test_a_quota_the_fleet_could_never_back_needs_an_admin_and_a_reason(demo: None) -> None:
    demo_fleet_nodes()  # 40 GPUs in all; every GPU could give 7 1g.10gb slices
    absurd = "99999999999999999999999"
    with pytest.raises(ValidationError) as caught:
        ask(requested=absurd)
    (message,) = caught.value.message_dict["requested"]
    assert "could never offer more than 40 nvidia.com/gpu" in message
    with pytest.raises(ValidationError, match=r"never offer more than 280 nvidia\.com/mig-1g"):
        ask(resource="requests.nvidia.com/mig-1g.10gb", requested="281")
    assert ask(resource="requests.nvidia.com/mig-1g.10gb", requested="280").state == "pending"
    admin = User.objects.get(username="admin")
    with pytest.raises(ValidationError) as caught:
        ask(actor=admin, requested="48")
    assert list(caught.value.message_dict) == ["override_reason"]
    override = ask(actor=admin, requested="48", override_reason="Two H100 nodes arrive Monday.")
    assert override.override_reason == "Two H100 nodes arrive Monday."
    assert any("Two H100 nodes arrive Monday" in n for n in override.assessment["notes"])
    with pytest.raises(ValidationError, match="Far beyond"):
        ask(actor=admin, requested=absurd, resource="requests.cpu", override_reason="why not")
    assert hard() == "16"


def test_quota_items_kubernetes_never_enforces_are_refused(demo: None) -> None:
    for resource in ("limits.nvidia.com/gpu", "nvidia.com/gpu"):
        with pytest.raises(ValidationError) as caught:
            ask(resource=resource)
        assert "never enforced" in caught.value.message_dict["resource"][0]


def test_one_open_request_per_quota_item_and_the_requester_cancels(demo: None) -> None:
    first = ask()
    with pytest.raises(ValidationError) as caught:
        ask(requested="20")
    assert f"Request #{first.pk} for this quota (24) is still waiting" in str(caught.value)
    with pytest.raises(PermissionDenied):
        cancel_quota_change(request_id=first.pk, actor=User.objects.get(username="member-a"))
    cancel_quota_change(request_id=first.pk, actor=lead())
    first.refresh_from_db()
    assert first.state == "cancelled"
    with pytest.raises(DomainError, match="already decided"):
        approve_quota_change(request_id=first.pk, approver=approver(), comment="ok")
    second = ask(requested="20")
    approve_quota_change(request_id=second.pk, approver=approver(), comment="ok")
    assert hard() == "20"
    events = AuditEvent.objects.filter(event__startswith="quota_change.").values_list(
        "event", flat=True
    )
    assert sorted(events) == [
        "quota_change.approved",
        "quota_change.cancelled",
        "quota_change.requested",
        "quota_change.requested",
    ]


def test_an_approval_after_the_quota_changed_is_refused_and_reassessed(demo: None) -> None:
    from tenants.services import set_namespace_quota

    request = ask(requested="20")  # 16 -> 20, as the approver reads it
    shown = request.assessment["fingerprint"]
    namespace = Namespace.objects.get(name="team-a")
    hard_now = dict(namespace.quota_items.values_list("resource", "hard"))
    set_namespace_quota(
        actor=User.objects.get(username="admin"),
        namespace=namespace,
        hard={**hard_now, "requests.nvidia.com/gpu": "24"},
        source="web",
    )
    with pytest.raises(DomainError) as caught:
        approve_quota_change(request_id=request.pk, approver=approver(), comment="ok", seen=shown)
    assert caught.value.code == "stale_assessment"
    assert "now 24 (it was 16 when this was asked)" in caught.value.message
    assert "24 → 20, a cut" in caught.value.message
    request.refresh_from_db()
    assert (request.state, request.previous) == ("pending", "24")
    assert request.assessment["notes"][0] == "This lowers the quota from 24 to 20."
    assert hard() == "24"  # nothing applied on the stale read
    # The approver read the new assessment: deciding on it goes through.
    approve_quota_change(
        request_id=request.pk,
        approver=approver(),
        comment="yes, lower it",
        seen=request.assessment["fingerprint"],
    )
    assert hard() == "20"


def test_an_approval_on_an_assessment_nobody_showed_is_refused(demo: None) -> None:
    request = ask()
    with pytest.raises(DomainError) as caught:
        approve_quota_change(request_id=request.pk, approver=approver(), comment="", seen="f00")
    assert caught.value.code == "stale_assessment"
    assert hard() == "16"


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_for_one_quota_item_make_exactly_one(demo: None) -> None:
    from changes.models import QuotaChangeRequest

    barrier = threading.Barrier(6)
    results: list[str] = []

    def request(value: str) -> None:
        try:
            barrier.wait()
            ask(requested=value)
            results.append("created")
        except ValidationError:
            results.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=request, args=(str(20 + i),)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["created"] + ["refused"] * 5
    assert QuotaChangeRequest.objects.filter(state="pending").count() == 1


def test_grants_that_ended_before_the_expiry_ran_are_ended_in_the_order_they_ended(
    demo: None,
) -> None:
    start = timezone.now()
    first = ask(requested="20", grant_until=start + dt.timedelta(hours=2))
    approve_quota_change(request_id=first.pk, approver=approver(), comment="ok")
    second = ask(requested="24", grant_until=start + dt.timedelta(hours=30))
    approve_quota_change(request_id=second.pk, approver=approver(), comment="ok")
    # Each end takes back its own +4, whatever the order: one late run ends both, in the
    # order they ended, and the quota is back at 16 (no grant outlives its end).
    expired = expire_quota_grants(now=start + dt.timedelta(days=4))
    assert sorted(expired) == sorted([first.pk, second.pk])
    assert hard() == "16"
    assert list(
        AuditEvent.objects.filter(
            event__in=["quota_change.reverted", "quota_change.revert_skipped"]
        )
        .order_by("id")
        .values_list("event", "target_id")
    ) == [
        ("quota_change.reverted", str(first.pk)),
        ("quota_change.reverted", str(second.pk)),
    ]


def test_an_approval_on_an_assessment_the_request_no_longer_shows_is_refused(
    demo: None,
) -> None:
    from tests.factories import ObservedNodeFactory

    request = ask(requested="20")
    read_first = request.assessment["fingerprint"]
    node = ObservedNodeFactory(mig_config="all-disabled", allocatable={"nvidia.com/gpu": "8"})
    with pytest.raises(DomainError) as caught:
        approve_quota_change(
            request_id=request.pk, approver=approver(), comment="", seen=read_first
        )
    assert caught.value.code == "stale_assessment"
    request.refresh_from_db()
    assert request.assessment["fingerprint"] != read_first  # the fleet's capacity changed
    node.delete()
    # The fleet is as it was at the first read, but the request shows the newer
    # assessment: an approval acts only on the one it shows.
    with pytest.raises(DomainError) as caught:
        approve_quota_change(
            request_id=request.pk, approver=approver(), comment="", seen=read_first
        )
    assert caught.value.code == "stale_assessment"
    assert hard() == "16"
    request.refresh_from_db()
    assert request.assessment["fingerprint"] == read_first  # what it shows now
    approve_quota_change(request_id=request.pk, approver=approver(), comment="ok", seen=read_first)
    assert hard() == "20"


def test_a_grant_that_ended_before_anyone_decided_is_not_approved(demo: None) -> None:
    request = ask(grant_until=timezone.now() + dt.timedelta(hours=2))
    type(request).objects.filter(pk=request.pk).update(  # two hours pass, nobody decides
        grant_until=timezone.now() - dt.timedelta(minutes=1)
    )
    with pytest.raises(DomainError) as lapsed:
        approve_quota_change(
            request_id=request.pk, approver=User.objects.get(username="approver"), comment="ok"
        )
    assert lapsed.value.code == "lapsed"
    assert "there is nothing left to approve" in lapsed.value.message
    assert hard() == "16"
    request.refresh_from_db()
    assert request.state == "pending"
