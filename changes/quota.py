"""Self-service quota requests: a team lead asks, an approver (or an auto-approval rule)
decides, the desired state changes and the cluster loop applies it. A grant may end: at its
expiry the previous value comes back through the same path, and the team hears of it a day
before."""

from __future__ import annotations

import datetime as dt
from fractions import Fraction
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from changes.approval import User, refuse_own, require_decider
from changes.facts import fleet_facts
from changes.impact import Fleet, QueueQuota, flavor_shortfalls
from changes.models import AutoApprovalRule, QuotaChangeRequest
from changes.selectors import get_quota_request_for_user
from portal.audit import record_audit
from portal.errors import DomainError
from portal.notify import notify_event
from portal.permissions import is_platform_admin, user_id
from portal.quantity import QuantityError, format_quantity, parse_quantity
from queues.models import ClusterQueue
from queues.services import save_cluster_queue
from tenants.models import Membership, Namespace, Team
from tenants.rules import check_quota_item
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
) -> dict[str, Any]:
    """Does the fleet (or the cohort) have the capacity, and what it does to others."""
    facts = fleet_facts()
    delta = _amount(requested) - _amount(previous)
    if kind == Kind.NAMESPACE:
        fits, notes = _namespace_capacity(facts, namespace, resource, requested)
    else:
        assert cq is not None
        fits, notes = _queue_capacity(facts, cq, flavor, resource, requested, delta)
    return {
        "delta": format_quantity(delta)
        if delta.denominator == 1 or (delta * 1000).denominator == 1
        else str(float(delta)),
        "fits": fits,
        "notes": notes,
    }


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
    facts.queues = queues
    short = next(
        (s for s in flavor_shortfalls(facts) if s.flavor == flavor and s.resource == resource),
        None,
    )
    if short is not None:
        notes = [
            f"Queues would promise {short.nominal} {resource} on flavor {flavor}, but its "
            f"nodes offer {short.capacity}."
        ]
    else:
        notes = [f"Flavor {flavor} has the capacity for it."]
    if cq.cohort_id and delta > 0:
        members = list(
            ClusterQueue.objects.filter(cohort_id=cq.cohort_id)
            .exclude(pk=cq.pk)
            .values_list("name", flat=True)
        )
        if members:
            notes.append(
                f"Cohort {cq.cohort}: {', '.join(members)} can borrow up to "
                f"{format_quantity(delta)} less of it while {cq.name} uses it."
            )
    return short is None, notes


# ----------------------------------------------------------------------------- writes


def _notify(event: str, request: QuotaChangeRequest) -> None:
    where = str(request.namespace or f"{request.cluster_queue}/{request.flavor}")
    payload = {
        "id": request.pk,
        "team": request.team.slug,
        "where": where,
        "resource": request.resource,
        "previous": request.previous,
        "requested": request.requested,
        "state": request.state,
        "until": request.grant_until.isoformat() if request.grant_until else None,
    }
    subject = f"Quota request #{request.pk} ({request.team.slug}): {event.replace('_', ' ')}"
    transaction.on_commit(lambda: notify_event(f"quota_change.{event}", subject, payload))


def _matching_rule(
    kind: str, resource: str, delta: Fraction, grant_until: dt.datetime | None, fits: bool
) -> AutoApprovalRule | None:
    if delta <= 0 or grant_until is None:
        return None
    days = (grant_until - timezone.now()).total_seconds() / 86400
    for rule in AutoApprovalRule.objects.filter(active=True, kind=kind, resource=resource):
        if (
            delta <= rule.max_increase
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
    """Field errors of a quota request (empty when it may be asked for)."""
    errors: dict[str, list[str]] = {}
    if not reason.strip():
        errors["reason"] = ["Say why the team needs it."]
    if grant_until is not None and grant_until <= timezone.now():
        errors["grant_until"] = ["The end of the grant must be in the future."]
    if kind == Kind.NAMESPACE:
        if namespace is None or namespace.team_id != team.pk:
            errors["namespace"] = ["Choose one of the team's namespaces."]
        for message in check_quota_item(resource, requested).errors:
            field, _, text = message.partition(": ")
            errors.setdefault("requested" if field == "hard" else "resource", []).append(text)
    elif kind == Kind.QUEUE:
        served = (
            cluster_queue is not None
            and cluster_queue.local_queues.filter(namespace__team=team).exists()
        )
        if not served:
            errors["cluster_queue"] = ["Choose a ClusterQueue the team's LocalQueues submit to."]
        elif not _current(kind, None, cluster_queue, flavor, resource):
            errors["resource"] = [
                f"{cluster_queue} has no quota for {resource} on flavor {flavor}."
            ]
        try:
            amount = parse_quantity(requested)
            if amount < 0 or ("/" in resource and amount.denominator != 1):
                errors["requested"] = ["A whole number, at least 0."]
        except QuantityError as exc:
            errors["requested"] = [str(exc)]
    else:
        errors["kind"] = ["Choose namespace or queue."]
    return errors


@transaction.atomic
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
    source: str = "web",
) -> QuotaChangeRequest:
    """Ask for a quota change; an auto-approval rule may grant it at once."""
    lead = Membership.objects.filter(
        user_id=user_id(actor), team=team, role=Membership.Role.LEAD
    ).exists()
    if not (lead or is_platform_admin(actor)):
        raise PermissionDenied("Only the team's lead or a platform admin can ask for quota.")
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
    if errors:
        raise ValidationError(errors)
    previous = _current(kind, namespace, cluster_queue, flavor, resource)
    assessment = assess_quota_change(
        kind=kind,
        cq=cluster_queue,
        namespace=namespace,
        flavor=flavor,
        resource=resource,
        previous=previous,
        requested=requested,
    )
    request = QuotaChangeRequest.objects.create(
        team=team,
        requested_by_id=user_id(actor),
        kind=kind,
        resource=resource,
        previous=previous,
        requested=requested,
        reason=reason.strip(),
        grant_until=grant_until,
        assessment=assessment,
        namespace=namespace,
        cluster_queue=cluster_queue,
        flavor=flavor,
    )
    record_audit(
        actor=actor,
        event="quota_change.requested",
        source=source,
        target=request,
        team=team,
        old={"value": previous},
        new={"value": requested, "until": str(grant_until or "")},
    )
    _notify("requested", request)
    rule = _matching_rule(
        kind, resource, _amount(requested) - _amount(previous), grant_until, assessment["fits"]
    )
    if rule is not None:
        comment = f"Approved by rule “{rule.name}”."
        _approve(request, approver=None, comment=comment, rule=rule, source=source)
    return request


def _apply_value(request: QuotaChangeRequest, value: str) -> None:
    """Write ``value`` into desired state (the cluster loop applies it)."""
    if request.kind == Kind.NAMESPACE:
        assert request.namespace is not None
        hard = dict(request.namespace.quota_items.values_list("resource", "hard"))
        if value:
            hard[request.resource] = value
        else:
            hard.pop(request.resource, None)
        set_namespace_quota(actor=None, namespace=request.namespace, hard=hard, source="task")
        return
    assert request.cluster_queue_id is not None
    cq = ClusterQueue.objects.select_for_update().get(pk=request.cluster_queue_id)
    cq.set_nominal_quota(request.flavor, request.resource, value)
    save_cluster_queue(actor=None, cluster_queue=cq, source="task")


def _approve(
    request: QuotaChangeRequest,
    *,
    approver: User | None,
    comment: str,
    rule: AutoApprovalRule | None = None,
    source: str = "web",
) -> None:
    updated = QuotaChangeRequest.objects.filter(pk=request.pk, state=State.PENDING).update(
        state=State.APPROVED,
        decided_by=approver if approver is not None and approver.is_authenticated else None,
        decision_comment=comment,
        decided_at=timezone.now(),
        auto_rule=rule,
    )
    if not updated:
        raise DomainError("This request was already decided.", code="conflict")
    request.refresh_from_db()
    _apply_value(request, request.requested)
    _notify("approved", request)
    record_audit(
        actor=approver,
        event="quota_change.auto_approved" if rule else "quota_change.approved",
        source=source,
        target=request,
        team=request.team,
        old={"value": request.previous},
        new={"value": request.requested, "comment": comment},
    )


@transaction.atomic
def approve_quota_change(
    *, request_id: int, approver: User, comment: str, source: str = "web"
) -> QuotaChangeRequest:
    request = get_quota_request_for_user(approver, request_id)
    require_decider(approver, "quota requests")
    refuse_own(request, approver, "You cannot approve your own request; another approver must.")
    _approve(request, approver=approver, comment=comment, source=source)
    return request


@transaction.atomic
def reject_quota_change(
    *, request_id: int, approver: User, comment: str, source: str = "web"
) -> QuotaChangeRequest:
    request = get_quota_request_for_user(approver, request_id)
    require_decider(approver, "quota requests")
    refuse_own(request, approver, "You cannot decide your own request.")
    if not comment.strip():
        raise ValidationError({"comment": ["Say why it is rejected."]})
    if not QuotaChangeRequest.objects.filter(pk=request.pk, state=State.PENDING).update(
        state=State.REJECTED,
        decided_by=approver,
        decision_comment=comment,
        decided_at=timezone.now(),
    ):
        raise DomainError("This request was already decided.", code="conflict")
    _notify("rejected", request)
    record_audit(
        actor=approver,
        event="quota_change.rejected",
        source=source,
        target=request,
        team=request.team,
        new={"comment": comment},
    )
    request.refresh_from_db()
    return request


# ----------------------------------------------------------------------------- expiry


def expire_quota_grants(*, now: dt.datetime | None = None) -> list[int]:
    """Warn a day before a grant ends; at the end, put the previous value back (unless
    someone changed it since, which is then left alone and said in the audit log)."""
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
            actor=None,
            event="quota_change.expiring",
            source="task",
            target=request,
            team=request.team,
            new={"until": request.grant_until.isoformat() if request.grant_until else None},
        )
    expired = []
    for request in QuotaChangeRequest.objects.filter(state=State.APPROVED, grant_until__lte=now):
        if _revert(request, now=now):
            expired.append(request.pk)
    return expired


@transaction.atomic
def _revert(request: QuotaChangeRequest, *, now: dt.datetime) -> bool:
    """End one grant (once: a conditional UPDATE claims it)."""
    if not QuotaChangeRequest.objects.filter(pk=request.pk, state=State.APPROVED).update(
        state=State.EXPIRED, reverted_at=now
    ):
        return False
    current = _current(
        request.kind, request.namespace, request.cluster_queue, request.flavor, request.resource
    )
    if _amount(current) == _amount(request.requested):
        _apply_value(request, request.previous)
        event, new = "quota_change.reverted", {"value": request.previous}
    else:
        event, new = (
            "quota_change.revert_skipped",
            {"value": current, "note": "changed since the grant; left as it is"},
        )
    record_audit(
        actor=None,
        event=event,
        source="task",
        target=request,
        team=request.team,
        old={"value": current},
        new=new,
    )
    _notify("reverted" if event == "quota_change.reverted" else "revert_skipped", request)
    return True
