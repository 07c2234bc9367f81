"""A team's idle policy: off by default; a platform admin switches it on, and the first
switch-on waits for its approval by a second person, another platform admin or the team's
lead (nobody approves their own, as with every reviewed change); later switch-ons need none.
The team's lead or a platform admin may switch it off at any time. Every step is audited."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from cluster.scope import settings_cluster_id
from idle.models import IdlePolicy
from portal.access.permissions import is_platform_admin, user_id
from portal.audit.record import Actor, Event, System, record_audit
from portal.notifications.send import Audience, notify_event
from portal.services import require_platform_admin
from portal.vocabulary.errors import DomainError
from portal.vocabulary.names import dns1123_label_errors, dns1123_subdomain_errors
from tenants.models import Membership, Team

User = AbstractBaseUser | AnonymousUser
State = IdlePolicy.State
# A Workload carrying this label is never suspended by the idle policy (Kueue copies a
# Job's labels to its Workload).
EXEMPT_LABEL = "quartermaster.io/idle-exempt"


def policy_of(team: Team) -> IdlePolicy:
    """The team's policy, or an unsaved one that is off."""
    return IdlePolicy.objects.filter(team=team).first() or IdlePolicy(team=team)


def leads(user: User, team: Team) -> bool:
    return (
        bool(user.is_authenticated)
        and Membership.objects.filter(
            team=team, user_id=user_id(user), role=Membership.Role.LEAD
        ).exists()
    )


@dataclass(frozen=True)
class PolicyActions:
    """What a user may do with a team's policy now (the page shows exactly these)."""

    edit: bool = False
    switch_on: bool = False
    approve: bool = False
    switch_off: bool = False


def policy_actions(user: User, policy: IdlePolicy) -> PolicyActions:
    admin = is_platform_admin(user)
    lead = leads(user, policy.team)
    own = policy.requested_by_id is not None and policy.requested_by_id == user.pk
    return PolicyActions(
        edit=admin,
        switch_on=admin and policy.state == State.OFF,
        approve=policy.state == State.AWAITING and (admin or lead) and not own,
        switch_off=policy.state != State.OFF and (admin or lead),
    )


def _names(values: object, field: str, errors: Callable[[str], list[str]]) -> list[str]:
    if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
        raise ValidationError({field: ["Give a list of names."]})
    names = sorted({v.strip() for v in values if v.strip()})
    problems = [f"{n}: {p}" for n in names for p in errors(n)]
    if problems:
        raise ValidationError({field: problems})
    return names


@transaction.atomic
def save_idle_policy(
    *,
    actor: Actor,
    team: Team,
    grace_minutes: int,
    exempt_namespaces: list[str],
    exempt_priority_classes: list[str],
    source: str,
) -> IdlePolicy:
    """A platform admin sets the grace and the exemptions (the state is left as it is)."""
    require_platform_admin(actor)
    policy = policy_of(team)
    old = _said(policy) if policy.pk else None
    policy.grace_minutes = grace_minutes
    policy.exempt_namespaces = _names(exempt_namespaces, "exempt_namespaces", dns1123_label_errors)
    policy.exempt_priority_classes = _names(
        exempt_priority_classes, "exempt_priority_classes", dns1123_subdomain_errors
    )
    policy.full_clean(exclude=["team"])
    policy.save()
    _audited(policy, actor=actor, event=Event.IDLE_POLICY_SAVED, source=source, old=old)
    return policy


@transaction.atomic
def switch_on(*, actor: Actor, team: Team, source: str) -> IdlePolicy:
    """A platform admin switches the policy on: at once if it was approved before, else it
    waits for its approval."""
    require_platform_admin(actor)
    policy = policy_of(team)
    if policy.state != State.OFF:
        raise DomainError(
            f"The idle policy of {team.slug} is already {policy.get_state_display().lower()}."
        )
    old = _said(policy) if policy.pk else None
    policy.requested_by_id = None if isinstance(actor, System) else user_id(actor)
    policy.requested_at = timezone.now()
    policy.state = State.ON if policy.approved_at else State.AWAITING
    policy.save()
    event = Event.IDLE_POLICY_ON if policy.state == State.ON else Event.IDLE_POLICY_REQUESTED
    if policy.state == State.AWAITING:
        transaction.on_commit(lambda: _ask_for_approval(policy))
    _audited(policy, actor=actor, event=event, source=source, old=old)
    return policy


@transaction.atomic
def approve(*, actor: Actor, team: Team, source: str) -> IdlePolicy:
    """The first switch-on's approval: another platform admin, or the team's lead; never the
    person who switched it on."""
    policy = policy_of(team)
    if isinstance(actor, System) or not (is_platform_admin(actor) or leads(actor, team)):
        raise PermissionDenied("Only a platform admin or the team's lead approves the idle policy.")
    if policy.state != State.AWAITING:
        raise DomainError(f"The idle policy of {team.slug} is not waiting for an approval.")
    if policy.requested_by_id == user_id(actor):
        raise DomainError(
            "Nobody approves their own switch-on: another platform admin or the team's lead does.",
            code="self_approval",
        )
    old = _said(policy)
    policy.state, policy.approved_at = State.ON, timezone.now()
    policy.approved_by_id = user_id(actor)
    policy.save()
    _audited(policy, actor=actor, event=Event.IDLE_POLICY_APPROVED, source=source, old=old)
    return policy


@transaction.atomic
def switch_off(*, actor: Actor, team: Team, source: str) -> IdlePolicy:
    """A platform admin or the team's lead switches the policy off (or withdraws a
    switch-on that waits for its approval). Suspended workloads stay as they are."""
    if not isinstance(actor, System) and not (is_platform_admin(actor) or leads(actor, team)):
        raise PermissionDenied("Only a platform admin or the team's lead switches the policy off.")
    policy = policy_of(team)
    if policy.state == State.OFF:
        raise DomainError(f"The idle policy of {team.slug} is already off.")
    old = _said(policy)
    policy.state = State.OFF
    policy.save()
    _audited(policy, actor=actor, event=Event.IDLE_POLICY_OFF, source=source, old=old)
    return policy


def _ask_for_approval(policy: IdlePolicy) -> None:
    """Tell the team's leads (and whoever subscribed to new requests) that the switch-on
    waits for one of them, or another platform admin, to approve it."""
    team = policy.team
    lead_ids = Membership.objects.filter(team=team, role=Membership.Role.LEAD).values_list(
        "user_id", flat=True
    )
    notify_event(
        "idle_policy.requested",
        f"Idle policy of {team.slug} switched on: waiting for approval",
        {
            "team": team.slug,
            "requested_by": policy.requested_by.get_username() if policy.requested_by else None,
            "reason": f"suspends idle workloads {policy.grace_minutes} min after they are found",
        },
        Audience.of(people=list(lead_ids), actor=policy.requested_by_id),
        cluster=settings_cluster_id(),  # a team's policy names no pod: any cluster will do
    )


def _audited(
    policy: IdlePolicy, *, actor: Actor, event: Event, source: str, old: dict[str, object] | None
) -> None:
    """A change of the policy in the audit log: what it was and what it is now."""
    record_audit(
        actor=actor,
        event=event,
        source=source,
        target=policy,
        team=policy.team,
        old=old,
        new=_said(policy),
    )


def _said(policy: IdlePolicy) -> dict[str, object]:
    return {
        "state": policy.state,
        "grace_minutes": policy.grace_minutes,
        "exempt_namespaces": list(policy.exempt_namespaces),
        "exempt_priority_classes": list(policy.exempt_priority_classes),
        "approved": policy.approved_at is not None,
    }
