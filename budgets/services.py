"""Writes of budgets, each through one door: a platform admin sets (or removes) a team's
budget, from the page, the API, the admin or the demo loader; the team's lead asks for an
extension and a platform admin grants or refuses it; the periodic check warns at each
threshold once per period and, where a platform admin turned enforcement on, holds the
team's LocalQueues when the budget is spent (``queues.services.hold_for_budget``: desired
state, which the loop renders as ``stopPolicy: Hold`` and applies) and lifts the hold once
it is not (a new period, an extension, enforcement turned off, the budget removed).
Every write is audited with its actor; the team is told of warnings, holds and
decisions."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from budgets.models import Budget, BudgetExtension, BudgetWarning, threshold_problem
from budgets.selectors import queues_of, standings, unit_words
from budgets.standing import Standing
from changes.approval import User, require_asker
from portal.access.permissions import is_platform_admin, user_id
from portal.audit.record import SYSTEM, Actor, Event, System, record_audit
from portal.notifications.send import Audience, notify_event
from portal.services import require_platform_admin, save_validated, snapshot
from portal.vocabulary.errors import DomainError
from portal.vocabulary.names import CLUSTER_UNKNOWN
from queues.models import LocalQueue
from queues.services import hold_for_budget
from tenants.models import Team

State = BudgetExtension.State


def _number(text: str) -> str:
    return f"{float(text):,.1f}".removesuffix(".0")


def _queue_names(queues: Sequence[LocalQueue]) -> list[str]:
    return [f"{lq.namespace.name}/{lq.name}" for lq in queues]


def _tell(
    event: str,
    subject: str,
    budget: Budget,
    facts: dict[str, Any],
    *,
    people: Sequence[int | None] = (),
    actor: Actor | None = None,
) -> None:
    """Tell the team's members (and ``people``) of ``event`` on commit; never the actor."""
    audience = Audience.of(
        people=people,
        teams=[budget.team.slug],
        actor=None if actor is None or isinstance(actor, System) else actor.pk,
    )
    payload = {"team": budget.team.slug, "budget_id": budget.pk, **facts}
    transaction.on_commit(
        lambda: notify_event(event, subject, payload, audience, cluster=CLUSTER_UNKNOWN)
    )


def _said(standing: Standing) -> dict[str, Any]:
    return {
        "period": standing.window.label,
        "spent": f"{standing.spent:,.1f} {standing.unit}",
        "limit": f"{standing.limit:,.1f} {standing.unit}",
    }


# ----------------------------------------------------------------------------- budgets


@transaction.atomic
def save_budget(
    *, actor: Actor, budget: Budget, source: str, now: dt.datetime | None = None
) -> Budget:
    """Set a team's budget (platform admins): validated (a money budget is refused until
    the portal has prices), audited old -> new, then checked at once, so turning enforcement
    on holds a spent budget's queues now and turning it off lifts the hold now."""
    require_platform_admin(actor)
    if isinstance(budget.amount, Decimal) and budget.amount.is_finite():
        budget.amount = budget.amount.quantize(Decimal("0.01"))  # as stored: 100 is 100.00
    if not threshold_problem(budget.thresholds):
        budget.thresholds = sorted(budget.thresholds)
    save_validated(budget, actor=actor, source=source, team=budget.team, event=Event.BUDGET_SAVED)
    check_budgets(budgets=[budget], actor=actor, source=source, now=now)
    return budget


@transaction.atomic
def delete_budget(*, actor: Actor, budget: Budget, source: str, confirmed: bool) -> None:
    """Remove a team's budget (platform admins): its hold is lifted first. Only once
    confirmed: the page first says what it does (``budgets.selectors.budget_deletion``);
    the API's call and the admin's own confirmation page are the confirmation."""
    require_platform_admin(actor)
    if not confirmed:
        raise DomainError(
            "Not removed: confirm the removal, having read what it changes.",
            code="confirmation_needed",
        )
    queues = queues_of([budget.team])[budget.team_id]
    if hold_for_budget(actor=actor, local_queues=queues, held=False, source=source, cause=budget):
        _tell(
            "budget.released",
            f"Budget of {budget.team.slug} removed: queues admit again",
            budget,
            {"queues": _queue_names(queues)},
            actor=actor,
        )
    record_audit(
        actor=actor,
        event=Event.BUDGET_DELETED,
        source=source,
        target=budget,
        team=budget.team,
        old=snapshot(budget),
    )
    budget.delete()


def check_budgets(
    *,
    budgets: Sequence[Budget] | None = None,
    actor: Actor = SYSTEM,
    source: str = "task",
    now: dt.datetime | None = None,
) -> list[int]:
    """Warn and hold (the periodic task's work; a budget's save and an extension's grant
    check theirs at once): 1. each threshold reached in the current period is told once
    (a ``BudgetWarning`` row per threshold and period: a second run finds it); 2. a budget
    with enforcement on, in its period and spent, holds the team's LocalQueues, and any
    other budget's held queues are released. Returns the ids of the budgets that warned or
    whose queues moved."""
    now = now or timezone.now()
    rows = list(budgets) if budgets is not None else list(Budget.objects.select_related("team"))
    stand = standings(rows, now)
    queues = queues_of([b.team for b in rows])
    moved = []
    for budget in rows:
        with transaction.atomic():
            warned = _warn(budget, stand[budget.pk], now, source)
            held = _hold(budget, stand[budget.pk], queues[budget.team_id], now, actor, source)
        if warned or held:
            moved.append(budget.pk)
    return moved


def _warn(budget: Budget, standing: Standing, now: dt.datetime, source: str) -> bool:
    """Tell each threshold reached in the period, once (the row's uniqueness decides)."""
    if not standing.window.holds(now):
        return False
    told = False
    for threshold in standing.reached:
        try:
            with transaction.atomic():
                BudgetWarning.objects.create(
                    budget=budget,
                    period_start=standing.window.start,
                    threshold=threshold,
                    spent=standing.spent,
                    limit=standing.limit,
                )
        except IntegrityError:  # told already this period
            continue
        told = True
        facts = {**_said(standing), "threshold": f"{threshold} %"}
        record_audit(
            actor=SYSTEM,
            event=Event.BUDGET_THRESHOLD,
            source=source,
            target=budget,
            team=budget.team,
            new=facts,
        )
        _tell(
            "budget.threshold",
            f"Budget of {budget.team.slug}: {threshold} % used ({standing.window.label})",
            budget,
            facts,
        )
    return told


def _hold(
    budget: Budget,
    standing: Standing,
    queues: list[LocalQueue],
    now: dt.datetime,
    actor: Actor,
    source: str,
) -> bool:
    """Hold the team's queues while enforcement is on and the period's budget is spent;
    release them otherwise."""
    hold = budget.enforce and standing.window.holds(now) and standing.spent_out
    changed = hold_for_budget(
        actor=actor,
        local_queues=queues,
        held=hold,
        source=source,
        cause=budget,
    )
    if not changed:
        return False
    facts = {**_said(standing), "queues": _queue_names(changed)}
    event = Event.BUDGET_HELD if hold else Event.BUDGET_RELEASED
    record_audit(
        actor=actor, event=event, source=source, target=budget, team=budget.team, new=facts
    )
    if hold:
        subject = f"Budget of {budget.team.slug} spent: its queues admit nothing new"
    else:
        subject = f"Budget of {budget.team.slug}: its queues admit work again"
    _tell(str(event), subject, budget, facts, actor=actor)
    return True


# ----------------------------------------------------------------------------- extensions


def _amount(text: Any) -> Decimal:
    try:
        value = Decimal(str(text).strip())
    except (InvalidOperation, ValueError):
        raise ValidationError({"amount": ["Give a number, e.g. 50."]}) from None
    if not value.is_finite() or value <= 0:
        raise ValidationError({"amount": ["Give a number above 0."]})
    if value >= Decimal("1e12"):
        raise ValidationError({"amount": ["That is more than a budget can hold."]})
    return value.quantize(Decimal("0.01"))


@transaction.atomic
def request_budget_extension(
    *,
    actor: User,
    team: Team,
    amount: Any,
    reason: str,
    source: str = "web",
    now: dt.datetime | None = None,
) -> BudgetExtension:
    """The team's lead (or a platform admin) asks for more of this period's budget; one
    request waits at a time. A platform admin decides."""
    require_asker(actor, team, "a budget extension")
    budget = Budget.objects.filter(team=team).select_related("team").first()
    if budget is None:
        raise ValidationError({"team": ["This team has no budget to extend."]})
    value = _amount(amount)
    if not reason.strip():
        raise ValidationError({"reason": ["Say what the extension is for."]})
    window = standings([budget], now)[budget.pk].window
    try:
        with transaction.atomic():
            extension = BudgetExtension.objects.create(
                budget=budget,
                period_start=window.start,
                amount=value,
                reason=reason.strip(),
                requested_by_id=user_id(actor),
            )
    except IntegrityError:
        raise ValidationError(
            {"amount": ["This budget already has an extension waiting for a decision."]}
        ) from None
    facts = {
        "amount": f"{_number(str(value))} {unit_words([budget])[budget.pk]}",
        "period": window.label,
        "reason": extension.reason,
    }
    record_audit(
        actor=actor,
        event=Event.BUDGET_EXTENSION_REQUESTED,
        source=source,
        target=extension,
        team=team,
        new=facts,
    )
    _tell(
        "budget_extension.requested",
        f"Budget extension #{extension.pk} ({team.slug}) asked for",
        budget,
        facts,
        actor=actor,
    )
    return extension


def _pending(extension_id: int) -> BudgetExtension:
    extension = (
        BudgetExtension.objects.select_for_update(no_key=True, of=("self",))
        .select_related("budget__team")
        .filter(pk=extension_id)
        .first()
    )
    if extension is None:
        raise DomainError("No such budget extension.", code="not_found")
    if extension.state != State.PENDING:
        raise DomainError("This extension was already decided.", code="conflict")
    return extension


@transaction.atomic
def decide_budget_extension(
    *,
    actor: User,
    extension_id: int,
    approve: bool,
    comment: str = "",
    source: str = "web",
    now: dt.datetime | None = None,
) -> BudgetExtension:
    """A platform admin grants (the period's limit grows by it, and a hold it ends is
    lifted at once) or refuses (with a reason) an extension; nobody decides their own."""
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins decide budget extensions.")
    extension = _pending(extension_id)
    if extension.requested_by_id == actor.pk:
        raise DomainError("You cannot decide your own request.", code="self_approval")
    if not approve and not comment.strip():
        raise ValidationError({"comment": ["Say why it is refused."]})
    extension.state = State.APPROVED if approve else State.REJECTED
    extension.decided_by_id = user_id(actor)
    extension.decided_at = timezone.now()
    extension.decision_comment = comment.strip()
    extension.save(update_fields=["state", "decided_by", "decided_at", "decision_comment"])
    budget = extension.budget
    facts = {
        "amount": f"{_number(str(extension.amount))} {unit_words([budget])[budget.pk]}",
        "comment": extension.decision_comment,
    }
    event = Event.BUDGET_EXTENSION_APPROVED if approve else Event.BUDGET_EXTENSION_REJECTED
    record_audit(
        actor=actor, event=event, source=source, target=extension, team=budget.team, new=facts
    )
    said = "granted" if approve else "refused"
    _tell(
        str(event),
        f"Budget extension #{extension.pk} ({budget.team.slug}) {said}",
        budget,
        facts,
        people=[extension.requested_by_id],
        actor=actor,
    )
    if approve:
        check_budgets(budgets=[budget], actor=actor, source=source, now=now)
    return extension


@transaction.atomic
def cancel_budget_extension(
    *, actor: User, extension_id: int, source: str = "web"
) -> BudgetExtension:
    """The person who asked (or a platform admin) withdraws a waiting extension."""
    extension = _pending(extension_id)
    if extension.requested_by_id != actor.pk and not is_platform_admin(actor):
        raise PermissionDenied("Only the person who asked or a platform admin can withdraw it.")
    extension.state = State.CANCELLED
    extension.decided_at = timezone.now()
    extension.save(update_fields=["state", "decided_at"])
    record_audit(
        actor=actor,
        event=Event.BUDGET_EXTENSION_CANCELLED,
        source=source,
        target=extension,
        team=extension.budget.team,
        new={
            "amount": f"{_number(str(extension.amount))} "
            f"{unit_words([extension.budget])[extension.budget_id]}"
        },
    )
    return extension
