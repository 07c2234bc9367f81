"""Every notification, in the portal and by e-mail, reads as words: each event of every kind
is made by the code that makes it (the quota and MIG change payloads, the evicted pods'
events) and sent to a person told by default; no line may hold a raw value (an ISO
timestamp, ``None``, ``True``/``False``, a code like ``breaks_quota``, a Python list)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.utils import timezone

from budgets.models import Budget
from budgets.services import (
    decide_budget_extension,
    request_budget_extension,
    save_budget,
)
from changes import notify as mig_notify
from changes.models import MigChangeStep, QuotaChangeRequest
from changes.quota import notice_payload
from cluster.scope import settings_cluster_id
from idle import notify as idle_notify
from idle import policy as idle_policy
from idle.models import IdlePolicy, IdleSpell
from portal.models import Notification, OutboxMessage
from portal.notifications.payloads import EVENT_KINDS, KINDS
from portal.notifications.send import Audience, notify_event
from tenants.models import Namespace
from tests.factories import (
    LocalQueueFactory,
    MembershipFactory,
    MigChangeRequestFactory,
    NamespaceFactory,
    UserFactory,
)
from usage.models import Rollup, SamplingState

pytestmark = pytest.mark.django_db

RAW = {
    "an ISO timestamp": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d"),
    "None": re.compile(r"\bNone\b"),
    "a boolean": re.compile(r"\b(True|False)\b"),
    "a code": re.compile(r"\b[a-z]+_[a-z_]+\b"),
    "a Python list or dict": re.compile(r"[\[\]{}]"),
}
ASSESSMENT = {
    "verdict": "breaks_quota",
    "reasons": ["ClusterQueue cq-train would promise more than the cohort holds."],
    "evictions": [{"namespace": "team-b-train", "pod": "job-1", "node": "gpu-1"}],
}
QUOTA_STATES = {
    "requested": "pending",
    "approved": "approved",
    "rejected": "rejected",
    "cancelled": "cancelled",
    "voided": "cancelled",
    "expiring": "approved",
    "reverted": "expired",
    "revert_held": "approved",
    "revert_skipped": "approved",
}
MIG_STATES = {
    "requested": "pending",
    "approved": "approved",
    "rejected": "rejected",
    "cancelled": "cancelled",
    "succeeded": "succeeded",
    "failed": "failed",
    "aborted": "failed",
    "rolled_back": "rolled_back",
}


def raw_values(text: str) -> list[str]:
    return [f"{what}: {m.group(0)!r}" for what, rx in RAW.items() for m in rx.finditer(text)]


def quota_events(team: Any, lead: Any) -> list[tuple[str, str, dict[str, object]]]:
    namespace = Namespace.objects.create(name="team-a-train", team=team)
    request = QuotaChangeRequest.objects.create(
        team=team,
        requested_by=lead,
        kind="namespace",
        namespace=namespace,
        resource="requests.nvidia.com/gpu",
        previous="",  # no quota item: no limit
        requested="24",
        reason="A deadline.",
        grant_until=timezone.now() + dt.timedelta(days=3),
        decided_by=lead,
        decision_comment="Granted for the deadline.",
    )
    events = []
    for event, state in QUOTA_STATES.items():
        request.state = state
        said = f"Quota request #{request.pk} (team-a): {event.replace('_', ' ')}"
        events.append((f"quota_change.{event}", said, notice_payload(request)))
    return events


def mig_events(team: Any, lead: Any) -> list[tuple[str, str, dict[str, object]]]:
    request = MigChangeRequestFactory(
        team=team,
        requested_by=lead,
        decided_by=lead,
        nodes=["gpu-1"],
        verdict="breaks_quota",
        assessment=ASSESSMENT,
        failure="MIG Manager reported failed on gpu-1.",
    )
    events = []
    for event, state in MIG_STATES.items():
        request.state = state
        said = mig_notify.subject(event, request)
        events.append((f"mig_change.{event}", said, mig_notify.payload(request, event)))
    return events


def budget_events(team: Any, lead: Any, admin: Any) -> None:
    """A budget's every event, each told once to ``lead`` (a member of ``team``): its one
    threshold reached and its queue held at the save, an extension another lead asks for
    granted (the hold lifted), and one ``lead`` asks for refused."""
    now = dt.datetime(2026, 12, 10, tzinfo=dt.UTC)
    LocalQueueFactory(name="train", namespace=NamespaceFactory(name="team-a-work", team=team))
    Rollup.objects.create(
        period="day",
        start=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
        kind="team",
        owner=team.slug,
        resource="nvidia.com/gpu",
        gpu_seconds=120 * 3600,
    )
    SamplingState.objects.create(rolled_up_to=now)
    budget = Budget(team=team, amount=100, thresholds=[100], enforce=True)
    save_budget(actor=admin, budget=budget, source="web", now=now)
    other = UserFactory(username="another-lead")
    MembershipFactory(user=other, team=team, role="lead")
    more = request_budget_extension(
        actor=other, team=team, amount="50", reason="A deadline.", now=now
    )
    decide_budget_extension(actor=admin, extension_id=more.pk, approve=True, now=now)
    mine = request_budget_extension(
        actor=lead, team=team, amount="10", reason="More tests.", now=now
    )
    decide_budget_extension(actor=admin, extension_id=mine.pk, approve=False, comment="No.")


def test_every_kind_of_notification_reads_as_words(
    team_a_admin: Any, team_a: Any, platform_admin: Any, django_capture_on_commit_callbacks: Any
) -> None:
    team_a_admin.email = "lead@example.org"
    team_a_admin.save()
    with django_capture_on_commit_callbacks(execute=True):
        budget_events(team_a, team_a_admin, platform_admin)
    events = quota_events(team_a, team_a_admin) + mig_events(team_a, team_a_admin)
    events += [  # as changes.mig_policy tells them: no team named
        (
            f"mig_policy_change.{event}",
            f"MIG policy change #1 on default: {event}",
            {"id": 1, "state": state, "governed": True},
        )
        for event, state in (
            ("requested", "pending"),
            ("approved", "approved"),
            ("rejected", "rejected"),
        )
    ]
    for event, said, payload in events:
        notify_event(
            event,
            said,
            payload,
            Audience.of(people=[team_a_admin.pk]),
            cluster=settings_cluster_id(),
        )
    change = MigChangeRequestFactory(team=team_a, nodes=["gpu-1"], state="succeeded")
    Namespace.objects.create(name="team-a-dev", team=team_a)
    MigChangeStep.objects.create(
        request=change,
        node="gpu-1",
        step="evict",
        pods=["team-a-dev/job-2"],
        started_at=timezone.now(),
    )
    mig_notify.tell_evictions(change)
    _idle_events(team_a, team_a_admin)

    told = list(Notification.objects.filter(user=team_a_admin).order_by("id"))
    assert {n.kind for n in told} == set(KINDS)  # every kind rendered
    assert sorted(n.event for n in told) == sorted(EVENT_KINDS)  # every event of a kind
    mails = [row.args for row in OutboxMessage.objects.filter(task="portal.notify.mail_task")]
    assert len(mails) == len(told)
    shown = [(n.event, f"{n.title}\n{n.text}") for n in told]
    shown += [(subject, body) for subject, body, _to in mails]
    found = {event: (raw, text) for event, text in shown if (raw := raw_values(text))}
    assert found == {}, "\n\n".join(f"{k}: {v}" for k, v in found.items())
    by_event = {n.event: n.text for n in told}
    assert "Before: no limit" in by_event["quota_change.requested"]
    assert "State: Pending approval" in by_event["quota_change.requested"]
    assert re.search(r"Until: \d{4}-\d\d-\d\d \d\d:\d\d UTC", by_event["quota_change.approved"])
    assert "Verdict: Breaks quota" in by_event["mig_change.requested"]
    assert "State: Rolled back" in by_event["mig_change.rolled_back"]


def _idle_events(team: Any, lead: Any) -> None:
    """An idle workload found and suspended, and an idle policy's switch-on asking its lead."""
    now = timezone.now()
    spell = IdleSpell.objects.create(
        cluster_id=settings_cluster_id(),
        team=team,
        namespace="team-a-dev",
        workload="notebook",
        gpus=2 / 7,
        threshold=5.0,
        pool="train",
        idle_since=now - dt.timedelta(hours=3),
        found_at=now,
        last_seen=now,
    )
    idle_notify.found([spell.pk])
    idle_notify.suspended(spell)
    policy = IdlePolicy.objects.create(team=team, state="awaiting", requested_at=now)
    idle_policy._ask_for_approval(policy)


def test_before_says_what_no_value_means_for_each_kind(team_a: Any) -> None:
    """An absent namespace quota item is no limit; an absent ClusterQueue nominal quota, 0."""
    queue = QuotaChangeRequest(
        team=team_a, kind="queue", cluster_queue_name="cq-train", flavor="a100", requested="8"
    )
    namespace = QuotaChangeRequest(
        team=team_a, kind="namespace", namespace_name="team-a", requested="8"
    )
    assert (notice_payload(queue)["before"], notice_payload(namespace)["before"]) == (
        "0",
        "no limit",
    )
    queue.previous = namespace.previous = "4"
    assert (notice_payload(queue)["before"], notice_payload(namespace)["before"]) == ("4", "4")
