"""A stateful property test of quota requests and their decisions (hypothesis).

Random sequences of requests (increases, cuts, no-ops, absurd values, odd spellings,
time-limited or not: grants stacked on one item, overlapping and ending interleaved with
later decisions and edits), approvals on the assessment the approver read (sometimes a stale
read), rejections, cancellations, time passing with the expiry of grants, admin edits of
the values and a node joining or leaving the fleet, on the demo's team-a namespace quota
(GPUs and pods) and cq-train's H100 nominal quota. A model of plain dicts says what each
step must do; after every step the desired state equals the model, every request is in the
state and shows the assessment the model says, no item has two pending requests, and the
audit log holds exactly the rows the model expects: one change row per effective change.
A grant is a delta with an owner: the auto-approval rule bounds the sum of the open grants
on its item, each grant's end takes back exactly its own change from whatever the value is
then (or, below zero or with the item gone, holds it for a person), and an assessment
names the open grants on its item (so a grant's approval or end makes a read one stale).

Each example runs in a savepoint rolled back at its end. ``transaction.on_commit``
callbacks (the cluster loop's apply, notifications) never run: they are not desired state,
and the savepoint never commits.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from changes.models import AutoApprovalRule, QuotaChangeRequest
from changes.quota import (
    WARN_BEFORE,
    approve_quota_change,
    cancel_quota_change,
    expire_quota_grants,
    reject_quota_change,
    request_quota_change,
)
from cluster.models import ObservedNode
from portal.models import AuditEvent
from portal.vocabulary.errors import DomainError
from portal.vocabulary.quantity import MAX_QUANTITY, parse_quantity
from queues.models import ClusterQueue
from queues.rules import quota_entries
from queues.services import save_cluster_queue
from tenants.models import Namespace, Team
from tenants.rules import spelled_quantity
from tenants.services import set_namespace_quota
from tests.factories import ObservedNodeFactory, demo_fleet_nodes

pytestmark = pytest.mark.django_db

# The most of a GPU the demo fleet could ever offer (its five nodes of 8 GPUs, and one
# more node when it joined): what a lead asks for at most without an override.
BACKED = 40
AUTO_MAX_INCREASE = 4
AUTO_MAX_DAYS = 7
EXTRA_NODE = "gpu-a100-04"  # whole A100 GPUs: more nvidia.com/gpu, no flavor's node

DECISION_EVENTS = (
    "quota_change.requested",
    "quota_change.approved",
    "quota_change.auto_approved",
    "quota_change.rejected",
    "quota_change.cancelled",
    "quota_change.reassessed",
    "quota_change.expiring",
    "quota_change.reverted",
    "quota_change.revert_skipped",
    "quota_change.revert_held",
)
CHANGE_EVENTS = ("quota.changed", "cluster_queue.saved")


@dataclass(frozen=True)
class Item:
    """One quota item: a namespace's ``hard`` entry or a ClusterQueue's nominal quota."""

    key: str
    kind: str
    resource: str
    flavor: str = ""
    gpu: bool = False  # held against what the fleet could ever back
    reads_fleet: bool = False  # its assessment names the fleet's capacity


NS_GPU = Item("ns-gpu", "namespace", "requests.nvidia.com/gpu", gpu=True, reads_fleet=True)
NS_PODS = Item("ns-pods", "namespace", "pods")
CQ_GPU = Item("cq-gpu", "queue", "nvidia.com/gpu", "h100-80gb", gpu=True)
ITEMS = (NS_GPU, NS_PODS, CQ_GPU)


@dataclass
class Asked:
    """The model of one request."""

    item: Item
    requested: str
    until: dt.datetime | None
    seq: int
    state: str = "pending"
    previous: str = ""
    inputs: tuple[Any, ...] = ()  # what its stored assessment read
    fingerprint: str = ""  # of its stored assessment
    warned: bool = False
    read: list[str] = field(default_factory=list)
    delta: Fraction = Fraction(0)  # what its approval changed: what its end takes back
    held: bool = False  # its end could not take it back: a person decides


def amount(value: str | None) -> Fraction:
    """A value the way the services compare them (none is 0)."""
    return parse_quantity(value) if value else Fraction(0)


def spellings(n: int) -> list[str]:
    """Ways to write ``n`` that mean ``n``."""
    return [str(n), f"+{n}", f"{n}e0", f"{n}000m", *([f"{n // 10}e1"] if n % 10 == 0 else [])]


# A value as a lead types it: a number near the current value or anywhere up to what is
# backed, in one of its spellings; or an absurd or malformed text.
NEAR = st.tuples(st.just("near"), st.integers(-3, AUTO_MAX_INCREASE + 1), st.integers(0, 4))
ANYWHERE = st.tuples(st.just("anywhere"), st.integers(0, BACKED), st.integers(0, 4))
ODD = st.sampled_from(
    [
        ("1e3", 1000),
        ("99999999999999999999999", 10**23),
        ("1.5", None),
        ("-3", None),
        (" 7", None),
        ("", None),
        ("abc", None),
        ("0x10", None),
    ]
).map(lambda odd: ("odd", odd, 0))
VALUES = st.one_of(NEAR, NEAR, NEAR, ANYWHERE, ODD)
GRANT_HOURS = st.sampled_from([None, 2, 20, 30, 72, 72, 24 * 10])
# What an admin writes: the value as it is (perhaps spelled otherwise), a pending request's
# value, any value, or (a namespace item) nothing.
ADMIN_VALUES = st.one_of(
    st.tuples(st.sampled_from(["same", "pending"]), st.just(0)),
    st.tuples(st.just("anywhere"), st.integers(0, BACKED + 8)),
    st.tuples(st.just("remove"), st.just(0)),
)
ACTIONS = st.sampled_from(
    [
        "read",
        "approve as read",
        "approve as first read",
        "approve unread",
        "approve unread",
        "approve bogus",
        "approve as read for another",
        "reject",
        "cancel",
    ]
)
HOURS = st.sampled_from([0, 1, 12, 25, 24 * 4, 24 * 12])
ITEM = st.sampled_from([NS_GPU, NS_GPU, NS_GPU, NS_PODS, CQ_GPU, CQ_GPU])
CHANGES = st.one_of(
    st.tuples(st.just("time passes"), HOURS),
    st.tuples(st.just("time passes"), HOURS),
    st.tuples(st.just("admin edits"), ITEM, ADMIN_VALUES, st.booleans()),
    st.tuples(st.just("admin edits"), ITEM, ADMIN_VALUES, st.booleans()),
    st.just(("fleet changes",)),
    st.just(("fleet changes",)),
)


class QuotaDecisions(RuleBasedStateMachine):
    """Requests, decisions, expiry and admin edits against a model of the desired state."""

    def __init__(self) -> None:
        super().__init__()
        self._savepoint = transaction.atomic()
        # The services a page calls run in durable transactions of their own; marked as
        # Django's TestCase marks its own, the example's savepoint lets them (it stands in
        # for the test's database, not for a caller's transaction).
        self._savepoint._from_testcase = True  # type: ignore[attr-defined]
        self._savepoint.__enter__()
        self.clock = timezone.now().replace(microsecond=0)
        self._clock = mock.patch("django.utils.timezone.now", lambda: self.clock)
        self._clock.start()
        self.lead = User.objects.get(username="lead-a")
        self.approver = User.objects.get(username="approver")
        self.admin = User.objects.get(username="admin")
        self.team = Team.objects.get(slug="team-a")
        self.namespace = Namespace.objects.get(name="team-a")
        self.cq = ClusterQueue.objects.get(name="cq-train")
        self.values = self._desired()
        self.extra_node = False
        self.requests: dict[int, Asked] = {}
        self.events: Counter[str] = Counter()
        self.changes = 0
        self.last_audit = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first()
        self.before = set(QuotaChangeRequest.objects.values_list("pk", flat=True))

    def teardown(self) -> None:
        self._clock.stop()
        transaction.set_rollback(True)
        self._savepoint.__exit__(None, None, None)

    # ------------------------------------------------------------------------- helpers

    def _tick(self) -> None:
        """A minute between steps: requests are made one after another."""
        self.clock += dt.timedelta(minutes=1)

    def _desired(self) -> dict[str, str | None]:
        """Each item's value in the portal's desired state (None: no such quota item), in
        two queries: the invariant reads it after every step."""
        hard = dict(
            self.namespace.quota_items.filter(
                resource__in=[i.resource for i in ITEMS if i.kind == "namespace"]
            ).values_list("resource", "hard")
        )
        groups = ClusterQueue.objects.filter(pk=self.cq.pk).values_list(
            "resource_groups", flat=True
        )
        nominal = {
            (flavor, quota["name"]): str(quota["nominalQuota"])
            for _, flavor, quota in quota_entries(groups.get())
        }
        return {
            item.key: hard.get(item.resource)
            if item.kind == "namespace"
            else nominal.get((item.flavor, item.resource)) or None
            for item in ITEMS
        }

    def _inputs(self, item: Item) -> tuple[Any, ...]:
        """What an assessment of ``item`` reads that the steps change: the value, the
        fleet, and the open grants on the item (its notes say what their ends will do)."""
        return self.values[item.key], item.reads_fleet and self.extra_node, self._grants(item)

    def _grants(self, item: Item) -> tuple[tuple[int, Fraction], ...]:
        """The open grants on ``item``: approved, time-limited, not ended."""
        return tuple(
            sorted(
                (pk, r.delta)
                for pk, r in self.requests.items()
                if r.item == item and r.state == "approved" and r.until is not None
            )
        )

    def _set(self, item: Item, value: str | None) -> None:
        if value != self.values[item.key]:
            self.values[item.key] = value
            self.changes += 1

    def _pending(self, item: Item) -> Asked | None:
        return next(
            (r for r in self.requests.values() if r.item == item and r.state == "pending"), None
        )

    def _open(self) -> list[int]:
        return [pk for pk, r in self.requests.items() if r.state == "pending"]

    def _stored(self, pk: int) -> QuotaChangeRequest:
        return QuotaChangeRequest.objects.get(pk=pk)

    # ------------------------------------------------------------------------- rules

    @rule(data=st.data(), who=st.sampled_from(["lead", "approver", "meanwhile"]))
    def step(self, data: st.DataObject, who: str) -> None:
        """One step: the lead asks, the approver (or the lead) acts on a request, or the
        world moves on. One rule with weighted choices, not one rule each: swarm testing
        switches whole rules off per example, which in a CI-sized run leaves most examples
        without a single decision."""
        self._tick()
        if who == "lead":
            free = [item for item in ITEMS if self._pending(item) is None]
            mostly_free = st.sampled_from(free) if free and data.draw(st.integers(0, 3)) else ITEM
            self.lead_asks(data.draw(mostly_free), data.draw(VALUES), data.draw(GRANT_HOURS))
        elif who == "approver":
            self.decide(data, data.draw(ACTIONS))
        else:
            self.meanwhile(data.draw(CHANGES))

    def lead_asks(self, item: Item, value: tuple[str, Any, int], hours: int | None) -> None:
        """A no-op, a value no quota holds, a malformed one or a second open request is
        refused and writes nothing; anything else waits, or a rule grants it at once."""
        current = self.values[item.key]
        how, number, spelling = value
        meant: int | None
        if how == "odd":
            text, meant = number
        else:
            meant = max(0, int(amount(current)) + number) if how == "near" else number
            options = spellings(meant)
            text = options[spelling % len(options)]
        until = self.clock + dt.timedelta(hours=hours) if hours else None
        refused = (
            meant is None
            or (current is not None and amount(current) == meant)
            or self._pending(item) is not None
            or (item.gpu and meant > BACKED + 8 * self.extra_node)
            or meant > MAX_QUANTITY
        )
        where: dict[str, Any] = (
            {"namespace": self.namespace}
            if item.kind == "namespace"
            else {"cluster_queue": ClusterQueue.objects.get(pk=self.cq.pk), "flavor": item.flavor}
        )
        try:
            request = request_quota_change(
                actor=self.lead,
                team=self.team,
                kind=item.kind,
                resource=item.resource,
                requested=text,
                reason="A deadline.",
                grant_until=until,
                **where,
            )
        except ValidationError:
            assert refused, f"{text!r} for {item.key} at {current} was refused"
            return
        assert not refused, f"{text!r} for {item.key} at {current} was accepted"
        assert meant is not None
        stored = self._stored(request.pk)
        asked = Asked(
            item=item,
            requested=str(meant),
            until=until,
            seq=len(self.requests),
            previous=current or "",
            inputs=self._inputs(item),
            fingerprint=stored.assessment["fingerprint"],
            read=[stored.assessment["fingerprint"]],  # the approver opens it when notified
        )
        self.requests[request.pk] = asked
        self.events["quota_change.requested"] += 1
        increase = meant - amount(current)
        on_loan = sum((d for _, d in self._grants(item) if d > 0), Fraction(0))
        if (
            item == NS_GPU
            and until is not None
            and increase > 0
            and on_loan + increase <= AUTO_MAX_INCREASE  # the rule bounds the sum
            and until - self.clock <= dt.timedelta(days=AUTO_MAX_DAYS)
        ):
            asked.state = "approved"
            asked.delta = increase
            self.events["quota_change.auto_approved"] += 1
            self._set(item, asked.requested)

    def decide(self, data: st.DataObject, action: str) -> None:
        """The approver reads a request's assessment, or approves it (on a fingerprint read
        earlier, perhaps before something changed; on none, which is the stored one; on
        one nobody showed; on one read for another request), or rejects it; or the lead
        cancels it. A request no longer pending is neither approved, rejected nor
        cancelled."""
        if not self.requests:
            return
        pk = data.draw(
            st.sampled_from(
                self._open()
                if self._open() and data.draw(st.integers(0, 4))
                else list(self.requests)
            )
        )
        asked = self.requests[pk]
        if action == "read":
            asked.read.append(str(self._stored(pk).assessment["fingerprint"]))
            return
        if asked.state != "pending":
            with pytest.raises(DomainError) as caught:
                if action == "reject":
                    reject_quota_change(request_id=pk, approver=self.approver, comment="No.")
                elif action == "cancel":
                    cancel_quota_change(request_id=pk, actor=self.lead)
                else:
                    approve_quota_change(request_id=pk, approver=self.approver, comment="ok")
            assert caught.value.code == "conflict"
        elif action == "reject":
            reject_quota_change(request_id=pk, approver=self.approver, comment="No.")
            asked.state = "rejected"
            self.events["quota_change.rejected"] += 1
        elif action == "cancel":
            cancel_quota_change(request_id=pk, actor=self.lead)
            asked.state = "cancelled"
            self.events["quota_change.cancelled"] += 1
        else:
            others = [f for other, r in self.requests.items() if other != pk for f in r.read]
            seen = ""  # approve unread
            if action == "approve as read" and asked.read:
                seen = data.draw(st.sampled_from(asked.read))
            elif action == "approve as first read" and asked.read:
                seen = asked.read[0]
            elif action == "approve bogus":
                seen = "0" * 16
            elif action == "approve as read for another" and others:
                seen = data.draw(st.sampled_from(others))
            self._approve(pk, seen, data.draw(st.sampled_from([self.approver, self.admin])))

    def _approve(self, pk: int, seen: str, approver: User) -> None:
        """Only the assessment stored now is approved, and only while it still says what
        an assessment made now would say; else the fresh one is stored."""
        asked = self.requests[pk]
        if asked.until is not None and asked.until <= self.clock:  # the grant ended unapproved
            with pytest.raises(DomainError) as lapsed:
                approve_quota_change(request_id=pk, approver=approver, comment="ok", seen=seen)
            assert lapsed.value.code == "lapsed"
            return
        shown = seen or asked.fingerprint
        inputs = self._inputs(asked.item)
        if shown == asked.fingerprint and inputs == asked.inputs:
            approved = approve_quota_change(
                request_id=pk, approver=approver, comment="ok", seen=seen
            )
            assert (approved.state, approved.previous) == ("approved", asked.previous)
            assert approved.assessment["fingerprint"] == shown  # what was shown was applied
            asked.state = "approved"
            asked.delta = amount(asked.requested) - amount(asked.previous)
            self.events["quota_change.approved"] += 1
            self._set(asked.item, asked.requested)
            return
        with pytest.raises(DomainError) as caught:
            approve_quota_change(request_id=pk, approver=approver, comment="ok", seen=seen)
        assert caught.value.code == "stale_assessment"
        stored = self._stored(pk)
        assert stored.state == "pending"
        fresh = str(stored.assessment["fingerprint"])
        assert (fresh == asked.fingerprint) == (inputs == asked.inputs)
        asked.previous = self.values[asked.item.key] or ""
        asked.inputs = inputs
        asked.fingerprint = fresh
        self.events["quota_change.reassessed"] += 1

    def meanwhile(self, change: tuple[Any, ...]) -> None:
        """Time passes and the expiry task runs; a platform admin edits a value; a node
        joins or leaves the fleet."""
        what, *arguments = change
        {
            "time passes": self._time_passes,
            "admin edits": self._admin_edits,
            "fleet changes": self._fleet_changes,
        }[what](*arguments)

    def _time_passes(self, hours: int) -> None:
        """The expiry task runs ``hours`` later: a day's warning, then each ended grant
        takes back its own change from the value there is then (what was decided since
        stays), or is held for a person where that would go below zero or the item is
        gone. The outcome is the same as if the task had run at each grant's end, in the
        order they ended."""
        self.clock += dt.timedelta(hours=hours)
        now = self.clock
        approved = [(pk, r) for pk, r in self.requests.items() if r.state == "approved"]
        for _, asked in approved:
            if asked.until and not asked.warned and now < asked.until <= now + WARN_BEFORE:
                asked.warned = True
                self.events["quota_change.expiring"] += 1
        ended = sorted(
            ((pk, r) for pk, r in approved if r.until and r.until <= now),
            key=lambda pair: (pair[1].until, -pair[1].seq),
        )
        for _, asked in ended:
            asked.state = "expired"
            value = self.values[asked.item.key]
            back = amount(value) - asked.delta
            if value is None or back < 0:
                asked.held = True
                self.events["quota_change.revert_held"] += 1
                continue
            self._set(asked.item, None if back == 0 and not asked.previous else str(back))
            self.events["quota_change.reverted"] += 1
        assert sorted(expire_quota_grants(now=now)) == sorted(pk for pk, _ in ended)

    def _admin_edits(self, item: Item, edit: tuple[str, int], as_number: bool) -> None:
        """A platform admin saves the value directly (a namespace item may be removed; a
        ClusterQueue's quota comes as a JSON number or a string, as API clients send it)."""
        how, number = edit
        pending = self._pending(item)
        written: str | None = {
            "same": self.values[item.key],
            "pending": pending.requested if pending else self.values[item.key],
            "anywhere": str(number),
            "remove": None,
        }[how]
        if (
            how == "same"
            and written
            and written.isdigit()
            and item.kind == "namespace"
            and as_number
        ):
            written = f"{written}e0"  # the same value in another spelling
        if item.kind == "namespace":
            hard = dict(self.namespace.quota_items.values_list("resource", "hard"))
            if written is None:
                hard.pop(item.resource, None)
            else:
                hard[item.resource] = written
                written = spelled_quantity(item.resource, written)  # stored in one spelling
            set_namespace_quota(
                actor=self.admin,
                namespace=self.namespace,
                hard=hard,
                source="api",
                # beyond what the fleet could ever offer needs a reason: the admin gives one
                # (its refusal without one has a test of its own)
                override_reason="the stateful test's admin",
            )
            self._set(item, written)
            return
        if written is None:
            return
        cq = ClusterQueue.objects.get(pk=self.cq.pk)
        for group in cq.resource_groups:
            for flavor in group["flavors"]:
                for quota in flavor["resources"]:
                    if flavor["name"] == item.flavor and quota["name"] == item.resource:
                        quota["nominalQuota"] = int(written) if as_number else written
        save_cluster_queue(
            actor=self.admin,
            cluster_queue=cq,
            source="api",
            # beyond the fleet needs the tick and a reason, as for the namespace above
            override_reason="the stateful test's admin",
            promise_more_than_exists=True,
        )
        self._set(item, written)

    def _fleet_changes(self) -> None:
        """A node of whole A100 GPUs joins or leaves: the namespace GPU quota's assessment
        names the fleet's capacity, so an assessment read before is stale."""
        if self.extra_node:
            ObservedNode.objects.filter(name=EXTRA_NODE).delete()
        else:
            ObservedNodeFactory(
                name=EXTRA_NODE, mig_config="all-disabled", allocatable={"nvidia.com/gpu": "8"}
            )
        self.extra_node = not self.extra_node

    # ------------------------------------------------------------------------- invariants

    @invariant()
    def desired_state_is_the_last_effective_decision(self) -> None:
        assert self._desired() == self.values

    @invariant()
    def requests_are_as_decided_and_one_pending_per_item(self) -> None:
        """Every request in the state the model says, showing the assessment it says; no
        quota item with two pending requests (one query: it runs after every step)."""
        rows = list(
            QuotaChangeRequest.objects.values_list(
                "pk",
                "state",
                "previous",
                "requested",
                "assessment__fingerprint",
                "end_held",
                "namespace_id",
                "cluster_queue_id",
                "flavor",
                "resource",
            )
        )
        stored = {r[0]: r[1:6] for r in rows if r[0] not in self.before}
        assert stored == {
            pk: (r.state, r.previous, r.requested, r.fingerprint, r.held)
            for pk, r in self.requests.items()
        }
        pending = Counter(r[6:] for r in rows if r[1] == "pending")
        assert all(n == 1 for n in pending.values())

    @invariant()
    def one_audit_row_per_effective_change(self) -> None:
        rows = list(
            AuditEvent.objects.filter(id__gt=self.last_audit or 0).values_list(
                "event", "target_type", "target_id"
            )
        )  # one query: the invariant runs after every step
        decisions = Counter(event for event, _, _ in rows if event in DECISION_EVENTS)
        assert decisions == +self.events
        targets = {
            ("tenants.namespace", str(self.namespace.pk)),
            ("queues.clusterqueue", str(self.cq.pk)),
        }
        changed = [r for r in rows if r[0] in CHANGE_EVENTS and (r[1], r[2]) in targets]
        assert len(changed) == self.changes
        assert len([r for r in rows if r[0] not in DECISION_EVENTS]) == self.changes


# Random sequences of up to 30 steps: 20 in the suite (the same 20 on every run:
# derandomized), QM_STATEFUL_EXAMPLES=200 for a long run with more of them.
EXAMPLES = int(os.environ.get("QM_STATEFUL_EXAMPLES", "20"))


def test_quota_decisions_keep_desired_state_and_audit_in_step(demo: None) -> None:
    demo_fleet_nodes()
    AutoApprovalRule.objects.create(
        name="small GPU bumps",
        kind="namespace",
        resource=NS_GPU.resource,
        max_increase=AUTO_MAX_INCREASE,
        max_days=AUTO_MAX_DAYS,
        requires_capacity=False,
    )
    run_state_machine_as_test(
        QuotaDecisions,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=30,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            report_multiple_bugs=False,
        ),
    )
