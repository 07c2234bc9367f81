"""Time-limited grants are deltas with an owner: an auto-approval rule bounds the sum of a
team's open grants on a quota item, each grant's end takes back exactly its own change
(what was decided since stays), an end that cannot be right is held for a person, and a
later request's assessment says what the open grants' ends will do."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from changes.models import AutoApprovalRule, QuotaChangeRequest
from changes.quota import approve_quota_change, expire_quota_grants
from portal.models import AuditEvent
from tenants.models import Namespace
from tenants.services import set_namespace_quota
from tests.factories import demo_fleet_nodes, demo_quota_request

pytestmark = pytest.mark.django_db

ask = demo_quota_request  # lead-a asks for team-a's requests.nvidia.com/gpu (16 in the demo)


def hard() -> str:
    return Namespace.objects.get(name="team-a").quota_items.get(resource=GPU).hard


GPU = "requests.nvidia.com/gpu"


def approver() -> User:
    return User.objects.get(username="approver")


def test_stacked_requests_are_auto_approved_only_up_to_the_rules_sum(demo: None) -> None:
    """+2 GPUs for at most 7 days: twelve stacked requests get +2 in all, not +24; after
    every grant ends the quota is back at its first value."""
    demo_fleet_nodes()
    AutoApprovalRule.objects.create(
        name="two GPUs for a week",
        kind="namespace",
        resource=GPU,
        max_increase=2,
        max_days=7,
        requires_capacity=False,
    )
    start = timezone.now()
    first = hard()
    auto = []
    for n in range(12):
        request = ask(requested=str(int(hard()) + 1), grant_until=start + dt.timedelta(days=6))
        request.refresh_from_db()
        if request.state == "pending":
            approve_quota_change(request_id=request.pk, approver=approver(), comment="ok")
        else:
            auto.append(request.pk)
        assert n < 2 or request.rule_name == "", "the rule granted beyond its sum"
    assert len(auto) == 2
    assert hard() == str(int(first) + 12)
    expire_quota_grants(now=start + dt.timedelta(days=7))
    assert hard() == first
    assert not QuotaChangeRequest.objects.filter(end_held=True).exists()


def test_a_grants_end_takes_back_its_own_increase_and_a_later_one_stays(demo: None) -> None:
    """An approved 2-day +8 grant, then a permanent +1: at the grant's end the quota is the
    original + 1 (the later approval does not make the grant permanent), and the +1's
    assessment said so before anyone approved it."""
    demo_fleet_nodes()
    start = timezone.now()
    grant = ask(requested="24", grant_until=start + dt.timedelta(days=2))
    approve_quota_change(request_id=grant.pk, approver=approver(), comment="for the run")
    later = ask(requested="25")
    notes = later.assessment["notes"]
    assert any(f"Grant #{grant.pk} (+8 until" in n for n in notes), notes
    assert any("quota is 25 until then and 17 once it has ended" in n for n in notes), notes
    approve_quota_change(request_id=later.pk, approver=approver(), comment="ok")
    assert hard() == "25"
    assert expire_quota_grants(now=start + dt.timedelta(days=2, minutes=1)) == [grant.pk]
    assert hard() == "17"
    grant.refresh_from_db()
    assert (grant.state, grant.end_held) == ("expired", False)
    assert grant.end_note == "Its end took back +8: 25 → 17."


def test_an_end_that_cannot_be_right_is_held_for_a_person(demo: None) -> None:
    """The admin cut the quota below the grant's increase: taking back +8 would go below
    zero, so the value stays, the request says so (page and API) and the audit log too."""
    demo_fleet_nodes()
    start = timezone.now()
    grant = ask(requested="24", grant_until=start + dt.timedelta(days=2))
    approve_quota_change(request_id=grant.pk, approver=approver(), comment="ok")
    namespace = Namespace.objects.get(name="team-a")
    hard_now = dict(namespace.quota_items.values_list("resource", "hard"))
    set_namespace_quota(
        actor=User.objects.get(username="admin"),
        namespace=namespace,
        hard={**hard_now, GPU: "4"},
        source="web",
    )
    expire_quota_grants(now=start + dt.timedelta(days=3))
    assert hard() == "4"
    grant.refresh_from_db()
    assert grant.end_held
    assert "a person decides" in grant.end_note
    assert AuditEvent.objects.filter(
        event="quota_change.revert_held", target_id=str(grant.pk)
    ).exists()
