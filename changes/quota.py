"""Self-service quota requests: a team lead asks, an approver (or an auto-approval rule)
decides, the desired state changes and the cluster loop applies it. A grant may end: at its
expiry its own change is taken back through the same path (what was decided since stays),
and the team hears of it a day before. An auto-approval rule bounds the sum of a team's
open grants on a quota item, and every assessment says what the open grants' ends will do.
A request is on the cluster of its namespace or ClusterQueue: assessed on that cluster's
fleet and quotas, applied to that cluster's desired state."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Model, QuerySet
from django.utils import timezone

from changes.approval import User, decide_on_fresh, refuse_own, require_asker, require_decider
from changes.facts import quota_facts
from changes.impact import Fleet, QueueQuota, ceiling, flavor_shortfalls
from changes.models import AutoApprovalRule, QuotaChangeRequest
from changes.selectors import get_quota_request_for_user
from cluster.scope import cluster_id_of, settings_cluster
from portal.access.permissions import is_platform_admin, user_id
from portal.audit.record import SYSTEM, Actor, Event, System, record_audit
from portal.notifications.send import Audience, notify_event
from portal.removal import Consequences
from portal.vocabulary.errors import DomainError
from portal.vocabulary.quantity import MAX_QUANTITY, QuantityError, format_quantity, parse_quantity
from queues.dra import Ceiling, dra_ceilings
from queues.kueue_config import counter_text
from queues.models import ClusterQueue
from queues.rules import quota_entries
from queues.services import save_cluster_queue
from tenants.models import Namespace, Team
from tenants.rules import check_quota_item, spelled_quantity, unenforced_quota_note
from tenants.services import set_namespace_quota

State = QuotaChangeRequest.State
Kind = QuotaChangeRequest.Kind
WARN_BEFORE = dt.timedelta(days=1)


def _amount(text: str) -> Fraction:
    try:
        return parse_quantity(text) if text else Fraction(0)
    except QuantityError:
        return Fraction(0)


def _current(
    kind: str, namespace: Namespace | None, cq: ClusterQueue | None, flavor: str, resource: str
) -> str:
    """The value in desired state now ("" when there is none)."""
    if kind == Kind.NAMESPACE and namespace is not None:
        item = namespace.quota_items.filter(resource=resource).first()
        return item.hard if item else ""
    if cq is not None:
        return cq.nominal_quota(flavor, resource)
    return ""


def _facts_of(namespace: Namespace | None, cq: ClusterQueue | None) -> Fleet:
    """The fleet of the cluster the namespace or ClusterQueue is on (the settings' cluster
    when neither is given)."""
    target = namespace or cq
    return quota_facts(cluster=target.cluster if target is not None else settings_cluster())


# ----------------------------------------------------------------------------- assessment


def assess_quota_change(
    *,
    kind: str,
    namespace: Namespace | None,
    cq: ClusterQueue | None,
    flavor: str,
    resource: str,
    previous: str,
    requested: str,
    override_reason: str = "",
    facts: Fleet | None = None,
) -> QuotaAssessment:
    """Does the fleet (or the cohort) have the capacity, and what it does to others
    (``facts``: the fleet already read for this request, else read now)."""
    facts = facts if facts is not None else _facts_of(namespace, cq)
    delta = _amount(requested) - _amount(previous)
    if kind == Kind.NAMESPACE:
        fits, notes = _namespace_capacity(facts, namespace, resource, requested)
    else:
        assert cq is not None
        fits, notes = _queue_capacity(facts, cq, flavor, resource, requested, delta)
    if delta < 0:
        notes.insert(0, f"This lowers the quota from {previous} to {requested}.")
    if override_reason:
        notes.append(
            "Beyond what the fleet could ever back; a platform admin asked for it: "
            f"“{override_reason}”."
        )
    notes.extend(_grant_notes(open_grants(kind, namespace, cq, flavor, resource), requested))
    return QuotaAssessment(
        previous=previous,
        requested=requested,
        delta=format_quantity(delta)
        if delta.denominator == 1 or (delta * 1000).denominator == 1
        else str(float(delta)),
        fits=fits,
        notes=notes,
    )


def open_grants(
    kind: str, namespace: Namespace | None, cq: ClusterQueue | None, flavor: str, resource: str
) -> list[QuotaChangeRequest]:
    """The approved time-limited grants on one quota item that have not ended, the first to
    end first: each end takes back its own change."""
    grants = QuotaChangeRequest.objects.filter(
        state=State.APPROVED, grant_until__isnull=False, kind=kind, resource=resource
    )
    if kind == Kind.NAMESPACE:
        grants = grants.filter(namespace=namespace) if namespace is not None else grants.none()
    else:
        grants = grants.filter(cluster_queue=cq, flavor=flavor) if cq is not None else grants.none()
    return list(grants.order_by("grant_until", "pk"))


def _grant_notes(grants: list[QuotaChangeRequest], requested: str) -> list[str]:
    """What the ends of the open grants will do to the value this request sets (the team
    of another's grant on a shared ClusterQueue is not named)."""
    if not grants:
        return []
    notes = [
        f"Grant #{g.pk} ({g.granted_delta} until {_when(g.grant_until)}) is open on this "
        f"quota: at its end {g.end_phrase}, whatever else changed."
        for g in grants
        if g.grant_until is not None
    ]
    after = _amount(requested) - sum((g.delta for g in grants), Fraction(0))
    ended = "it has ended" if len(grants) == 1 else "they have all ended"
    if after < 0:
        notes.append(
            f"With this request the quota is {requested}; once {ended} it would be "
            f"{format_quantity(after)}, below zero: a person will decide then."
        )
    else:
        notes.append(
            f"With this request the quota is {requested} until then and "
            f"{format_quantity(after)} once {ended}."
        )
    return notes


# The stored quota assessment's shape: 1 had no "version" (and, before fingerprints, no
# "fingerprint": one is made from its values); 2 adds the version.
QUOTA_ASSESSMENT_VERSION = 2


@dataclass(frozen=True)
class QuotaAssessment:
    """What a quota request's assessment tells its reader, as stored with the request."""

    previous: str
    requested: str
    delta: str
    fits: bool
    notes: list[str]
    version: int = QUOTA_ASSESSMENT_VERSION
    stored_fingerprint: str = ""  # as stored (a version-1 row may have none)

    @property
    def fingerprint(self) -> str:
        """A hash of what it tells a reader (the values, the capacity and the notes): an
        approval acts only on the assessment the approver was shown."""
        if self.stored_fingerprint:
            return self.stored_fingerprint
        shown = [self.previous, self.requested, self.delta, self.fits, self.notes]
        keys = ("previous", "requested", "delta", "fits", "notes")
        text = json.dumps(dict(zip(keys, shown, strict=True)), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        return {
            "previous": self.previous,
            "requested": self.requested,
            "delta": self.delta,
            "fits": self.fits,
            "notes": list(self.notes),
            "fingerprint": self.fingerprint,
            "version": QUOTA_ASSESSMENT_VERSION,
        }

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any] | None, *, request: QuotaChangeRequest
    ) -> QuotaAssessment:
        """The assessment ``request`` stores, of any version (its values fill what an old
        row lacks)."""
        data = data or {}
        return cls(
            previous=str(data.get("previous", request.previous)),
            requested=str(data.get("requested", request.requested)),
            delta=str(data.get("delta") or ""),
            fits=bool(data.get("fits", False)),
            notes=list(data.get("notes") or []),
            version=int(data.get("version") or 1),
            stored_fingerprint=str(data.get("fingerprint") or ""),
        )


def shown_fingerprint(request: QuotaChangeRequest) -> str:
    """The fingerprint of the assessment a request shows (requests stored before
    fingerprints existed get theirs from their stored values)."""
    return QuotaAssessment.from_json(request.assessment, request=request).fingerprint


def _namespace_capacity(
    facts: Fleet, namespace: Namespace | None, resource: str, requested: str
) -> tuple[bool, list[str]]:
    """Namespace quotas of a GPU resource against what the fleet offers of it."""
    bare = resource.removeprefix("requests.").removeprefix("limits.")
    if not bare.startswith("nvidia.com/"):
        return True, []
    capacity = sum(n.allocatable.get(bare, 0) for n in facts.nodes)
    promised = sum(
        q.hard
        for q in facts.quotas
        if q.resource == bare and not (namespace and q.namespace == namespace.name)
    ) + _amount(requested)
    notes = [
        f"The fleet offers {capacity} {bare}; namespace quotas would allow "
        f"{format_quantity(Fraction(promised))} in all."
    ]
    fits = promised <= capacity
    if not fits:
        notes.append(
            "Quotas would be oversubscribed: a quota is a ceiling, not a reservation, so "
            "teams may wait for each other."
        )
    return fits, notes


def _queue_capacity(
    facts: Fleet, cq: ClusterQueue, flavor: str, resource: str, requested: str, delta: Fraction
) -> tuple[bool, list[str]]:
    """The flavor's capacity against every queue's nominal quota on it, and what the other
    queues of the cohort can borrow less of."""
    queues = [
        q
        for q in facts.queues
        if not (q.cluster_queue == cq.name and q.flavor == flavor and q.resource == resource)
    ]
    if _amount(requested).denominator == 1:
        queues.append(QueueQuota(cq.name, flavor, resource, int(_amount(requested))))
    dra = dra_ceilings(cq.cluster_id, [resource]).get(resource)
    if dra is not None:  # Kueue charges DRA devices in it: the cluster's, whatever flavor
        fits, notes = _dra_capacity(cq, flavor, resource, _amount(requested), dra)
        return fits, notes + _cohort_notes(cq, flavor, resource, delta)
    after = dataclasses.replace(facts, queues=queues)  # the facts stay as read
    short = next(
        (s for s in flavor_shortfalls(after) if s.flavor == flavor and s.resource == resource),
        None,
    )
    if short is not None:
        notes = [
            f"Queues would promise {short.nominal} {resource} on flavor {flavor}, but its "
            f"nodes offer {short.capacity}."
        ]
    else:
        notes = [f"Flavor {flavor} has the capacity for it."]
    return short is None, notes + _cohort_notes(cq, flavor, resource, delta)


def _dra_capacity(
    cq: ClusterQueue, flavor: str, resource: str, requested: Fraction, dra: Ceiling
) -> tuple[bool, list[str]]:
    """Every queue's nominal quota of a resource Kueue charges DRA devices in (``cq``'s on
    ``flavor`` as requested), against the most devices of its classes the cluster's DRA
    drivers publish at once (or, for a counter source, the most of the counter they share),
    whatever the flavor."""
    promised = requested + sum(
        (
            amount
            for queue in ClusterQueue.objects.filter(cluster_id=cluster_id_of(cq.cluster_id))
            for (its_flavor, its_resource), amount in queue.quota().items()
            if its_resource == resource and (queue.pk, its_flavor) != (cq.pk, flavor)
        ),
        Fraction(0),
    )
    if dra.counted:
        notes = [
            f"Kueue charges {resource} in the DRA counter {dra.unit}: the cluster's devices of "
            f"{', '.join(dra.classes)} could give {counter_text(dra.amount)} of it at once; "
            f"queues would promise {counter_text(int(promised))}."
        ]
    else:
        notes = [
            f"Kueue charges DRA devices in {resource}: the cluster's drivers publish "
            f"{dra.amount} of its device classes at once; queues would promise "
            f"{format_quantity(promised)}."
        ]
    if promised > dra.amount:
        notes.append(
            "Quotas would be oversubscribed: a quota is a ceiling, not a reservation, so "
            "teams may wait for each other."
        )
    return promised <= dra.amount, notes


def _cohort_notes(cq: ClusterQueue, flavor: str, resource: str, delta: Fraction) -> list[str]:
    """What a raise does to the other queues of ``cq``'s cohort that may borrow it."""
    notes: list[str] = []
    if cq.cohort_id and delta > 0:
        members = _may_borrow_it(cq, flavor, resource)
        if members:
            # Not "they can borrow less": the added quota joins what the cohort lends, so
            # while it is unused the others may borrow more (the what-if's borrowing table
            # says so). What changes is who comes first for it.
            amount = f"{format_quantity(delta)} {resource} on {flavor}"
            if cq.preemption_reclaim_within_cohort == ClusterQueue.ReclaimWithinCohort.NEVER:
                back = (
                    "it gets back what they borrow of it as their workloads end (its "
                    "reclaimWithinCohort is Never: it preempts none of them)"
                )
            else:
                back = (
                    f"Kueue may preempt up to {format_quantity(delta)} of what they borrow "
                    f"to give it back (reclaimWithinCohort: "
                    f"{cq.preemption_reclaim_within_cohort})"
                )
            notes.append(
                f"Cohort {cq.cohort}: {cq.name}'s nominal quota grows by {amount}. While "
                f"{cq.name} leaves it unused, {', '.join(members)} may borrow it (the "
                "borrowing table's room to borrow counts this on the last poll's workloads); "
                f"once {cq.name} needs it, it comes first: {back}."
            )
    return notes


def _may_borrow_it(cq: ClusterQueue, flavor: str, resource: str) -> list[str]:
    """The other queues of ``cq``'s cohort that could borrow ``resource`` on ``flavor``:
    those whose resource groups have it, with a borrowing limit other than 0."""
    if cq.cohort_id is None:
        return []
    names = []
    others = (
        ClusterQueue.objects.filter(cohort_id=cq.cohort_id)
        .exclude(pk=cq.pk)
        .order_by("name")
        .values_list("name", "resource_groups")
    )
    for name, groups in others:
        for _, its_flavor, quota in quota_entries(groups or []):
            if (its_flavor, quota.get("name")) != (flavor, resource):
                continue
            limit = quota.get("borrowingLimit")
            if limit in (None, "") or _amount(str(limit)) > 0:
                names.append(name)
                break
    return names


# ----------------------------------------------------------------------------- writes


# Who a quota request's events reach without subscribing: the person who asked, when it is
# decided and when the grant ends; the members of its team (whose quota moves), when it is
# approved and when the grant ends.
TOLD_REQUESTER = frozenset(
    {
        "approved",
        "rejected",
        "cancelled",
        "voided",
        "expiring",
        "reverted",
        "revert_skipped",
        "revert_held",
    }
)
TOLD_TEAM = frozenset({"approved", "expiring", "reverted", "revert_skipped", "revert_held"})


def notice_payload(request: QuotaChangeRequest, *, where: str = "") -> dict[str, object]:
    """What a quota request's event says: its values as stored (``previous`` "" when the
    quota item was absent) and ``before`` in words ("no limit" for a namespace, "0" for a
    ClusterQueue)."""
    return {
        "id": request.pk,
        "team": request.team.slug,
        "where": where or request.where,
        "resource": request.resource,
        "previous": request.previous,
        "before": request.value_text(request.previous),
        "requested": request.requested,
        "state": request.state,
        "until": request.grant_until.isoformat() if request.grant_until else None,
        "comment": request.decision_comment,
    }


def _notify(
    event: str, request: QuotaChangeRequest, *, where: str = "", actor: Actor | None = None
) -> None:
    """Tell of ``event`` (on commit); ``actor``: who did it (not told of their own act)."""
    audience = Audience.of(
        people=[request.requested_by_id] if event in TOLD_REQUESTER else [],
        teams=[request.team.slug] if event in TOLD_TEAM else [],
        actor=None if actor is None or isinstance(actor, System) else actor.pk,
    )
    payload = notice_payload(request, where=where)
    said = event
    if event == "voided":
        what = "namespace" if request.kind == Kind.NAMESPACE else "ClusterQueue"
        said = f"cancelled (its {what} was deleted)"
    subject = f"Quota request #{request.pk} ({request.team.slug}): {said.replace('_', ' ')}"
    on = cluster_id_of(request.cluster_id)
    transaction.on_commit(
        lambda: notify_event(
            f"quota_change.{event}",
            subject,
            payload,
            audience,
            cluster=on,
        )
    )


def _matching_rule(request: QuotaChangeRequest, fits: bool) -> AutoApprovalRule | None:
    """The rule that grants ``request`` without an approver: a time-limited increase that,
    with the team's open grants on the same quota item, stays within the rule's most (a
    rule bounds what a team holds on loan, not each request alone)."""
    delta, until = request.delta, request.grant_until
    if delta <= 0 or until is None:
        return None
    days = (until - timezone.now()).total_seconds() / 86400
    where = (request.kind, request.namespace, request.cluster_queue, request.flavor)
    held = sum(
        (
            g.delta
            for g in open_grants(*where, request.resource)
            if g.team_id == request.team_id and g.pk != request.pk and g.delta > 0
        ),
        Fraction(0),
    )
    for rule in AutoApprovalRule.objects.filter(
        active=True, kind=request.kind, resource=request.resource
    ):
        if (
            held + delta <= rule.max_increase
            and days <= rule.max_days
            and (fits or not rule.requires_capacity)
        ):
            return rule
    return None


def _request_errors(
    *,
    team: Team,
    kind: str,
    resource: str,
    requested: str,
    reason: str,
    namespace: Namespace | None,
    cluster_queue: ClusterQueue | None,
    flavor: str,
    grant_until: dt.datetime | None,
) -> dict[str, list[str]]:
    """Field errors of where a quota request points and why (empty when it may be asked)."""
    errors: dict[str, list[str]] = {}
    if not reason.strip():
        errors["reason"] = ["Say why the team needs it."]
    if grant_until is not None and grant_until <= timezone.now():
        errors["grant_until"] = ["The end of the grant must be in the future."]
    if kind == Kind.NAMESPACE:
        if namespace is None or namespace.team_id != team.pk:
            errors["namespace"] = ["Choose one of the team's namespaces."]
        check = check_quota_item(resource, requested)
        for message in check.errors:
            field, _, text = message.partition(": ")
            errors.setdefault("requested" if field == "hard" else "resource", []).append(text)
        unenforced = unenforced_quota_note(resource)
        if unenforced:  # asking for a quota item Kubernetes never enforces grants nothing
            errors.setdefault("resource", []).append(unenforced)
    elif kind == Kind.QUEUE:
        served = (
            cluster_queue is not None
            and cluster_queue.local_queues.filter(namespace__team=team).exists()
        )
        if not served:
            errors["cluster_queue"] = ["Choose a ClusterQueue the team's LocalQueues submit to."]
        elif not _current(kind, None, cluster_queue, flavor, resource):
            offered = sorted({f for f, r in cluster_queue.quota() if r == resource})  # type: ignore[union-attr]
            errors["flavor" if offered else "resource"] = [
                f"{cluster_queue} has no quota for {resource} on flavor {flavor or '(none)'}"
                + (f"; it has on {', '.join(offered)}." if offered else ".")
            ]
        try:
            amount = parse_quantity(requested)
            if amount < 0 or ("/" in resource and amount.denominator != 1):
                errors["requested"] = ["A whole number, at least 0."]
        except QuantityError as exc:
            errors["requested"] = [str(exc)]
    else:
        errors["kind"] = ["Choose namespace or queue."]
    if (
        namespace is not None
        and cluster_queue is not None
        and namespace.cluster_id != cluster_queue.cluster_id  # a request is on one cluster
    ):
        errors.setdefault("cluster_queue", []).append(
            f"ClusterQueue {cluster_queue.name} is on the cluster {cluster_queue.cluster.name}, "
            f"namespace {namespace.name} on {namespace.cluster.name}: choose both on one "
            "cluster."
        )
    return errors


def _say_the_fleets_bound(
    errors: dict[str, list[str]],
    *,
    actor: User,
    resource: str,
    requested: str,
    facts: Callable[[], Fleet],
) -> None:
    """A value beyond any count is refused with what the fleet could ever offer, when that
    applies: it tells a lead more than the 32-bit bound does."""
    if errors.get("requested") and all(
        m.startswith("must be at most") for m in errors["requested"]
    ):
        fleet_says = _value_errors(
            actor=actor,
            resource=resource,
            previous="",
            requested=requested,
            override_reason="",
            facts=facts(),
        )
        errors["requested"] = fleet_says.get("requested") or errors["requested"]


def _value_errors(
    *,
    actor: User,
    resource: str,
    previous: str,
    requested: str,
    override_reason: str,
    facts: Fleet,
    dra: Ceiling | None = None,
) -> dict[str, list[str]]:
    """A value that changes nothing, that no Kubernetes quota holds, or that the fleet
    could never back (a platform admin may still ask for the last, with a reason).
    ``dra``: for a queue resource Kueue charges DRA devices (or a DRA counter's units) in,
    the most the cluster's DRA drivers publish at once (the fleet's bound then)."""
    amount = _amount(requested)
    if previous and _amount(previous) == amount:
        return {"requested": [f"The quota is already {previous}: there is nothing to change."]}
    beyond = {"requested": ["Far beyond any quota Kubernetes can hold."]}
    bare = resource.removeprefix("requests.").removeprefix("limits.")
    if dra is None and (
        not bare.startswith("nvidia.com/")
        or not any(n.gpu_count or n.allocatable for n in facts.nodes)
    ):
        # not a GPU, or no GPU node observed yet: nothing to hold it against
        return beyond if amount > MAX_QUANTITY else {}
    most = ceiling(facts, bare) if dra is None else dra.amount
    if amount <= most:
        return {}
    if dra is not None and dra.counted:
        bound = (
            f"The cluster's DRA devices of {', '.join(dra.classes)} could never give more than "
            f"{counter_text(most)} of the counter {dra.unit}, which Kueue charges {bare} in"
        )
        ask = counter_text(most)
    else:
        bound = f"The fleet could never offer more than {most} {bare}, in any MIG layout"
        ask = str(most)
    if not is_platform_admin(actor):
        return {
            "requested": [
                f"{bound}: {format_quantity(amount)} can never be backed. Ask for at most "
                f"{ask}, or ask a platform admin (who can override this with a reason)."
            ]
        }
    if amount > MAX_QUANTITY:
        return beyond
    if not override_reason.strip():
        return {
            "override_reason": [
                f"{bound.split(', in any MIG layout')[0]}: say why the quota should promise "
                f"{format_quantity(amount)} (nodes on order, another cluster)."
            ]
        }
    return {}


def _open_request_error(
    kind: str, namespace: Namespace | None, cq: ClusterQueue | None, flavor: str, resource: str
) -> dict[str, list[str]]:
    """One pending request per quota item (the database enforces it; this says it)."""
    pending = QuotaChangeRequest.objects.filter(state=State.PENDING, kind=kind, resource=resource)
    if kind == Kind.NAMESPACE:
        pending = pending.filter(namespace=namespace)
    else:
        pending = pending.filter(cluster_queue=cq, flavor=flavor)
    other = pending.values_list("pk", "requested").first()
    if other is None:
        return {}
    return {
        "requested": [
            f"Request #{other[0]} for this quota ({other[1]}) is still waiting for a decision: "
            "cancel it to ask for another value, or wait for its decision."
        ]
    }


def request_quota_change(
    *,
    actor: User,
    team: Team,
    kind: str,
    resource: str,
    requested: str,
    reason: str,
    namespace: Namespace | None = None,
    cluster_queue: ClusterQueue | None = None,
    flavor: str = "",
    grant_until: dt.datetime | None = None,
    override_reason: str = "",
    source: str = "web",
) -> QuotaChangeRequest:
    """Ask for a quota change; an auto-approval rule may grant it at once.

    Refused with field errors, writing nothing: a value that changes nothing, one the fleet
    could never back (unless a platform admin overrides it with a reason), and a second
    request for a quota item while one is pending (two approvals could otherwise both act
    on the same old value)."""
    require_asker(actor, team, "quota")
    resource = resource.strip()
    errors = _request_errors(
        team=team,
        kind=kind,
        resource=resource,
        requested=requested,
        reason=reason,
        grant_until=grant_until,
        namespace=namespace,
        cluster_queue=cluster_queue,
        flavor=flavor,
    )
    _say_the_fleets_bound(
        errors,
        actor=actor,
        resource=resource,
        requested=requested,
        facts=lambda: _facts_of(namespace, cluster_queue),
    )
    if errors:
        raise ValidationError(errors)
    requested = spelled_quantity(resource, requested)
    previous = _current(kind, namespace, cluster_queue, flavor, resource)
    facts = _facts_of(namespace, cluster_queue)
    errors = _value_errors(
        actor=actor,
        resource=resource,
        previous=previous,
        requested=requested,
        override_reason=override_reason,
        facts=facts,
        dra=dra_ceilings(cluster_queue.cluster_id, [resource]).get(resource)
        if kind == Kind.QUEUE and cluster_queue is not None
        else None,
    ) or _open_request_error(kind, namespace, cluster_queue, flavor, resource)
    if errors:
        raise ValidationError(errors)
    with transaction.atomic(durable=True):  # an entry point: never inside another
        return _create_request(
            actor=actor,
            team=team,
            kind=kind,
            resource=resource,
            previous=previous,
            requested=requested,
            reason=reason,
            namespace=namespace,
            cluster_queue=cluster_queue,
            flavor=flavor,
            grant_until=grant_until,
            override_reason=override_reason.strip() if is_platform_admin(actor) else "",
            source=source,
            facts=facts,
        )


def _create_request(
    *, actor: User, previous: str, source: str, facts: Fleet, **fields: Any
) -> QuotaChangeRequest:
    assessment = assess_quota_change(
        kind=fields["kind"],
        cq=fields["cluster_queue"],
        namespace=fields["namespace"],
        flavor=fields["flavor"],
        resource=fields["resource"],
        previous=previous,
        requested=fields["requested"],
        override_reason=fields["override_reason"],
        facts=facts,
    )
    fields["reason"] = fields["reason"].strip()
    # The names stay with the request when the namespace or queue is deleted (history).
    fields["namespace_name"] = fields["namespace"].name if fields["namespace"] else ""
    fields["cluster_queue_name"] = fields["cluster_queue"].name if fields["cluster_queue"] else ""
    try:
        with transaction.atomic():
            request = QuotaChangeRequest.objects.create(
                cluster_id=(fields["namespace"] or fields["cluster_queue"]).cluster_id,
                requested_by_id=user_id(actor),
                previous=previous,
                assessment=assessment.to_json(),
                **fields,
            )
    except IntegrityError:  # another request for the same item won the race
        where = (fields["kind"], fields["namespace"], fields["cluster_queue"], fields["flavor"])
        errors = _open_request_error(*where, fields["resource"])
        refused = errors or {"requested": ["Someone asked for this quota just now; reload."]}
        raise ValidationError(refused) from None
    record_audit(
        actor=actor,
        event=Event.QUOTA_CHANGE_REQUESTED,
        source=source,
        target=request,
        team=request.team,
        old={"value": previous},
        new={
            "value": request.requested,
            "until": str(request.grant_until or ""),
            **({"override": request.override_reason} if request.override_reason else {}),
        },
    )
    _notify("requested", request)
    _lock_target(request)  # the team's open grants are read and added to under one lock
    rule = _matching_rule(request, assessment.fits)
    if rule is not None and not request.override_reason:
        comment = f"Approved by rule “{rule.name}”."
        robot = System(f"auto-approval rule “{rule.name}”"[:150])
        _approve(request, approver=robot, comment=comment, rule=rule, source=source)
    return request


def _apply_value(request: QuotaChangeRequest, value: str, *, actor: Actor, source: str) -> None:
    """Write ``value`` into desired state (the cluster loop applies it) as ``actor`` (the
    approver, or the system ending a grant): the write serves ``request``, whose assessment
    bounded it by the fleet's ceiling (an admin's override included), and its audit row
    names the request."""
    if request.kind == Kind.NAMESPACE:
        assert request.namespace is not None
        hard = dict(request.namespace.quota_items.values_list("resource", "hard"))
        if value:
            hard[request.resource] = value
        else:
            hard.pop(request.resource, None)
        set_namespace_quota(
            actor=actor, namespace=request.namespace, hard=hard, source=source, serves=request
        )
        return
    assert request.cluster_queue_id is not None
    cq = ClusterQueue.objects.select_for_update().get(pk=request.cluster_queue_id)
    cq.set_nominal_quota(request.flavor, request.resource, value)
    save_cluster_queue(actor=actor, cluster_queue=cq, source=source, serves=request)


def _approve(
    request: QuotaChangeRequest,
    *,
    approver: Actor,
    comment: str,
    rule: AutoApprovalRule | None = None,
    source: str = "web",
) -> None:
    """Approve and apply (``approver``: a person, or the system for an auto-approval rule)."""
    updated = QuotaChangeRequest.objects.filter(pk=request.pk, state=State.PENDING).update(
        state=State.APPROVED,
        decided_by=approver if not isinstance(approver, System) else None,
        decision_comment=comment,
        decided_at=timezone.now(),
        auto_rule=rule,
        auto_rule_name=rule.name if rule else "",
    )
    if not updated:
        raise DomainError("This request was already decided.", code="conflict")
    request.refresh_from_db()
    _apply_value(request, request.requested, actor=approver, source=source)
    _notify("approved", request, actor=approver)
    record_audit(
        actor=approver,
        event=Event.QUOTA_CHANGE_AUTO_APPROVED if rule else Event.QUOTA_CHANGE_APPROVED,
        source=source,
        target=request,
        team=request.team,
        old={"value": request.previous},
        new={"value": request.requested, "comment": comment},
    )


def approve_quota_change(
    *,
    request_id: int,
    approver: User,
    comment: str,
    seen: str = "",
    source: str = "web",
) -> QuotaChangeRequest:
    """Approve a pending request: what is applied is what the approver was shown.

    At the decision the value in desired state is read again (its row locked) and the
    request assessed anew; when that differs from the assessment the approver saw (``seen``,
    the fingerprint the page or the API showed; by default the stored one) or from the one
    the request shows now, the new assessment is stored and the approval refused, so the
    approver reads it and decides again: a grant never starts from a value that is no
    longer there, and the request's previous value is the one the grant replaced."""
    request = get_quota_request_for_user(approver, request_id)
    require_decider(approver, "quota requests")
    refuse_own(request, approver, "You cannot approve your own request; another approver must.")
    with transaction.atomic(durable=True):  # an entry point: never inside another
        request = QuotaChangeRequest.objects.select_for_update().get(pk=request.pk)
        if request.state != State.PENDING:
            raise DomainError("This request was already decided.", code="conflict")
        if request.grant_until is not None and request.grant_until <= timezone.now():
            raise DomainError(
                f"The grant it asks for ended on {_when(request.grant_until)}: there is "
                "nothing left to approve. Reject it, or the requester asks again.",
                code="lapsed",
            )
        if request.target_deleted:
            raise DomainError(gone_message(request), code="target_deleted")
        _lock_target(request)
        shown = seen or shown_fingerprint(request)
        current = _current(
            request.kind,
            request.namespace,
            request.cluster_queue,
            request.flavor,
            request.resource,
        )
        fresh = assess_quota_change(
            kind=request.kind,
            cq=request.cluster_queue,
            namespace=request.namespace,
            flavor=request.flavor,
            resource=request.resource,
            previous=current,
            requested=request.requested,
            override_reason=request.override_reason,
        )
        # The values shown are part of the fingerprint; what the approver saw must be what
        # the request shows now and what an assessment made now says.
        was = decide_on_fresh(
            shown=shown if shown == shown_fingerprint(request) else "",
            fresh=fresh.fingerprint,
            approve=lambda: _approve(request, approver=approver, comment=comment, source=source),
            reassess=lambda: _reassessed(request, fresh, current, approver, source),
        )
        if was is None:
            return request
    if current != was:
        what = (
            f"The quota is now {request.value_text(current)} (it was "
            f"{request.value_text(was)} when this was asked): approving would change it "
            f"{request.value_text(current)} → {request.requested}"
            + (", a cut." if _amount(request.requested) < _amount(current) else ".")
        )
        if _amount(current) == _amount(request.requested):
            what = f"The quota is already {current}: approving would change nothing."
    else:
        what = "The fleet or the queues changed since you read the assessment."
    raise DomainError(
        f"{what} The assessment is updated: read it and decide again.", code="stale_assessment"
    )


def _reassessed(
    request: QuotaChangeRequest, fresh: QuotaAssessment, current: str, approver: User, source: str
) -> str:
    """Store the fresh assessment an approval was refused on (the request locked); the
    previous value it showed."""
    was = request.previous
    QuotaChangeRequest.objects.filter(pk=request.pk).update(
        previous=current, assessment=fresh.to_json()
    )
    record_audit(
        actor=approver,
        event=Event.QUOTA_CHANGE_REASSESSED,
        source=source,
        target=request,
        team=request.team,
        old={"value": was},
        new={"value": current, "requested": request.requested},
    )
    return was


def gone_message(request: QuotaChangeRequest) -> str:
    """Why a request about a deleted namespace or ClusterQueue can no longer be approved."""
    what = "namespace" if request.kind == Kind.NAMESPACE else "ClusterQueue"
    return (
        f"The {what} {request.target_name} was deleted: there is no quota left to change, "
        "so this request can no longer be approved."
    )


def _when(time: dt.datetime) -> str:
    return timezone.localtime(time).strftime("%b %-d, %Y, %H:%M")


def _lock_target(request: QuotaChangeRequest) -> None:
    """Hold the quota's owner row until the decision commits (the expiry of a grant takes
    the same lock; an admin's direct edit does not take it yet)."""
    if request.kind == Kind.NAMESPACE and request.namespace_id is not None:
        Namespace.objects.select_for_update().filter(pk=request.namespace_id).first()
    elif request.cluster_queue_id is not None:
        ClusterQueue.objects.select_for_update().filter(pk=request.cluster_queue_id).first()


@transaction.atomic(durable=True)  # an entry point: never inside another
def cancel_quota_change(*, request_id: int, actor: User, source: str = "web") -> QuotaChangeRequest:
    """The requester (or a platform admin) withdraws a pending request."""
    request = get_quota_request_for_user(actor, request_id)
    if request.requested_by_id != actor.pk and not is_platform_admin(actor):
        raise PermissionDenied("Only the requester or a platform admin can cancel a request.")
    if not QuotaChangeRequest.objects.filter(pk=request.pk, state=State.PENDING).update(
        state=State.CANCELLED, decided_at=timezone.now()
    ):
        raise DomainError("Only a pending request can be cancelled.", code="conflict")
    request.refresh_from_db()
    _notify("cancelled", request, actor=actor)
    record_audit(
        actor=actor,
        event=Event.QUOTA_CHANGE_CANCELLED,
        source=source,
        target=request,
        team=request.team,
        old={"value": request.previous},
        new={"value": request.previous, "requested": request.requested},
    )
    return request


@transaction.atomic(durable=True)  # an entry point: never inside another
def reject_quota_change(
    *, request_id: int, approver: User, comment: str, source: str = "web"
) -> QuotaChangeRequest:
    request = get_quota_request_for_user(approver, request_id)
    require_decider(approver, "quota requests")
    refuse_own(request, approver, "You cannot decide your own request.")
    if request.state != State.PENDING:  # said before a missing comment: it is decided
        raise DomainError("This request was already decided.", code="conflict")
    if not comment.strip():
        raise ValidationError({"comment": ["Say why it is rejected."]})
    if not QuotaChangeRequest.objects.filter(pk=request.pk, state=State.PENDING).update(
        state=State.REJECTED,
        decided_by=approver,
        decision_comment=comment,
        decided_at=timezone.now(),
    ):
        raise DomainError("This request was already decided.", code="conflict")
    _notify("rejected", request, actor=approver)
    record_audit(
        actor=approver,
        event=Event.QUOTA_CHANGE_REJECTED,
        source=source,
        target=request,
        team=request.team,
        new={"comment": comment},
    )
    request.refresh_from_db()
    return request


# ----------------------------------------------------------------------------- expiry


def expire_quota_grants(*, now: dt.datetime | None = None) -> list[int]:
    """Warn a day before a grant ends; at the end, take back its own change (or, where
    that cannot be right, leave the value, say so on the request and tell a person)."""
    now = now or timezone.now()
    for request in QuotaChangeRequest.objects.filter(
        state=State.APPROVED,
        warned_at__isnull=True,
        grant_until__lte=now + WARN_BEFORE,
        grant_until__gt=now,
    ):
        QuotaChangeRequest.objects.filter(pk=request.pk).update(warned_at=now)
        _notify("expiring", request)
        record_audit(
            actor=SYSTEM,
            event=Event.QUOTA_CHANGE_EXPIRING,
            source="task",
            target=request,
            team=request.team,
            new={"until": request.grant_until.isoformat() if request.grant_until else None},
        )
    expired = []
    # In the order the grants ended (a run that comes late ends them as runs at each end
    # would have); grants that ended together, the latest granted first.
    ended = QuotaChangeRequest.objects.filter(state=State.APPROVED, grant_until__lte=now)
    for request in ended.order_by("grant_until", "-created_at", "-pk"):
        if _revert(request, now=now):
            expired.append(request.pk)
    return expired


@transaction.atomic
def _revert(request: QuotaChangeRequest, *, now: dt.datetime) -> bool:
    """End one grant (once: a conditional UPDATE claims it): take back exactly its own
    change from the value there now, so what was decided since (a later grant, an admin's
    edit) stays. Where that cannot be right (the quota item is gone, or taking back would go
    below zero) the value is left, the request says so and a person is told."""
    if not QuotaChangeRequest.objects.filter(pk=request.pk, state=State.APPROVED).update(
        state=State.EXPIRED, reverted_at=now
    ):
        return False
    _lock_target(request)
    current = _current(
        request.kind, request.namespace, request.cluster_queue, request.flavor, request.resource
    )
    event, new, note = _take_back(request, current)
    held = event == Event.QUOTA_CHANGE_REVERT_HELD
    QuotaChangeRequest.objects.filter(pk=request.pk).update(end_note=note, end_held=held)
    request.end_note, request.end_held = note, held
    record_audit(
        actor=SYSTEM,
        event=event,
        source="task",
        target=request,
        team=request.team,
        old={"value": current},
        new=new,
    )
    _notify(
        {
            Event.QUOTA_CHANGE_REVERTED: "reverted",
            Event.QUOTA_CHANGE_REVERT_HELD: "revert_held",
        }.get(event, "revert_skipped"),
        request,
    )
    return True


def _take_back(request: QuotaChangeRequest, current: str) -> tuple[Event, dict[str, str], str]:
    """Apply the end of one grant (its target locked): the event, the audit's new value and
    the sentence the request shows."""
    delta = request.granted_delta
    if request.target_deleted:  # nothing left to take it back from
        note = f"{request.target_name} was deleted; nothing to put back"
        return Event.QUOTA_CHANGE_REVERT_SKIPPED, {"note": note}, note
    back = _amount(current) - request.delta
    if not current or back < 0:
        note = (
            f"Its end would take back {delta} from {request.value_text(current)}"
            + (" (the quota item was removed since)" if not current else ", below zero")
            + ": the quota is left as it is and a person decides what it should be."
        )
        return Event.QUOTA_CHANGE_REVERT_HELD, {"value": current, "note": note}, note
    # Back to no quota item when it had none and nothing else was added since.
    value = "" if back == 0 and not request.previous else _spelled(request.resource, back)
    _apply_value(request, value, actor=SYSTEM, source="task")
    note = f"Its end took back {delta}: {current} → {request.value_text(value)}."
    return Event.QUOTA_CHANGE_REVERTED, {"value": value, "note": note}, note


def _spelled(resource: str, amount: Fraction) -> str:
    return spelled_quantity(resource, format_quantity(amount))


# ----------------------------------------------------------------------------- deleted targets


def _requests_about(obj: Model) -> tuple[QuerySet[QuotaChangeRequest], str]:
    """The quota requests about a namespace or ClusterQueue, and what it is called."""
    if isinstance(obj, Namespace):
        return QuotaChangeRequest.objects.filter(kind=Kind.NAMESPACE, namespace=obj), "namespace"
    if isinstance(obj, ClusterQueue):
        return QuotaChangeRequest.objects.filter(kind=Kind.QUEUE, cluster_queue=obj), "ClusterQueue"
    return QuotaChangeRequest.objects.none(), ""


def quota_history_about(obj: Model) -> Consequences:
    """What deleting a namespace or ClusterQueue does to the quota requests about it."""
    requests, what = _requests_about(obj)
    if not what:
        return Consequences()
    total = requests.count()
    if not total:
        return Consequences(history=[f"No quota request was made for this {what}."])
    said = [
        f"{_count(total, 'quota request')} about it {'stays' if total == 1 else 'stay'} in the "
        "history, shown as "
        f"“{obj} (deleted)”."
    ]
    pending = list(requests.filter(state=State.PENDING).values_list("pk", flat=True))
    if pending:
        numbers = ", ".join(f"#{pk}" for pk in pending)
        one = len(pending) == 1
        said.append(
            f"Pending request{'' if one else 's'} {numbers} {'is' if one else 'are'} cancelled, "
            "with the reason: there would be no quota left to apply "
            f"{'it' if one else 'them'} to."
        )
    return Consequences(history=said)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def void_quota_requests_about(obj: Model, *, actor: Actor, source: str) -> None:
    """Before a namespace or ClusterQueue is deleted (in its transaction): its requests keep
    its name, and the pending ones are cancelled with the reason, audited and told, since an
    approval could no longer apply them."""
    requests, what = _requests_about(obj)
    if not what:
        return
    name = str(obj)
    requests.filter(**{_name_field(what): ""}).update(**{_name_field(what): name})
    reason = (
        f"Cancelled: the {what} {name} was deleted, so there is no quota left to apply this to."
    )
    for request in requests.filter(state=State.PENDING).select_for_update().order_by("pk"):
        if not QuotaChangeRequest.objects.filter(pk=request.pk, state=State.PENDING).update(
            state=State.CANCELLED, decided_at=timezone.now(), decision_comment=reason
        ):
            continue
        request.refresh_from_db()
        record_audit(
            actor=actor,
            event=Event.QUOTA_CHANGE_VOIDED,
            source=source,
            target=request,
            team=request.team,
            old={"value": request.previous},
            new={"requested": request.requested, "reason": reason},
        )
        gone = f"{name} (deleted)" + (f" / {request.flavor}" if what != "namespace" else "")
        _notify("voided", request, where=gone, actor=actor)


def _name_field(what: str) -> str:
    return "namespace_name" if what == "namespace" else "cluster_queue_name"
