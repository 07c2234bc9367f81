"""The rules every reviewed change shares: who may ask, who may decide, what each may do
with a request now, and the MIG change's transition table.

Team leads (and platform admins) ask for their teams; approvers and platform admins
decide; nobody decides their own request. Services enforce these rules; pages and the API
ask :func:`mig_change_actions` / :func:`quota_request_actions` what to offer, so a button
is shown exactly when the service would accept it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from changes.models import TERMINAL_STATES, MigChangeRequest, NodeClaim, QuotaChangeRequest
from portal.access.permissions import is_approver, is_platform_admin, user_id
from portal.access.selectors import teams_seen_by
from portal.audit.record import SYSTEM, Actor
from portal.vocabulary.errors import DomainError
from tenants.models import Membership, Team

User = AbstractBaseUser | AnonymousUser
State = MigChangeRequest.State
T = TypeVar("T")

# Every allowed transition of a MIG change or drain; anything else raises, changes nothing.
TRANSITIONS: dict[str, set[str]] = {
    State.PENDING: {State.APPROVED, State.REJECTED, State.CANCELLED},
    State.APPROVED: {State.SCHEDULED, State.RUNNING, State.CANCELLED},
    State.SCHEDULED: {State.RUNNING, State.CANCELLED},
    State.RUNNING: {State.SUCCEEDED, State.FAILED},
    State.FAILED: {State.ROLLING_BACK},
    State.SUCCEEDED: {State.ROLLING_BACK},
    State.ROLLING_BACK: {State.ROLLED_BACK, State.FAILED},
    State.REJECTED: set(),
    State.CANCELLED: set(),
    State.ROLLED_BACK: set(),
}
CANCELLABLE = (State.PENDING, State.APPROVED, State.SCHEDULED)
ROLLBACK_FROM = (State.FAILED, State.SUCCEEDED)


def acting_for(request: MigChangeRequest | QuotaChangeRequest) -> Actor:
    """Who work done because of a decision acts as (its audit rows name them): the person
    who approved the request, or the system when no person did (an auto-approval rule)."""
    approver = request.decided_by if request.decided_by_id is not None else None
    return approver if approver is not None else SYSTEM


def decide_on_fresh(
    *,
    shown: str,
    fresh: str,
    blocked: bool = False,
    approve: Callable[[], object],
    reassess: Callable[[], T],
) -> T | None:
    """The one rule of an approval on a fresh assessment (called with the request locked):
    approve when the assessment made now (``fresh``, its fingerprint) is the one the
    approver was shown (``shown``) and does not block; otherwise store the fresh one
    (``reassess``) and return what it answers, so the caller refuses the approval and the
    approver reads the new assessment and decides again. None: approved."""
    if fresh == shown and not blocked:
        approve()
        return None
    return reassess()


def teams_user_may_request_for(user: User) -> QuerySet[Team]:
    """The teams a user asks changes for: those they lead (every team for an admin)."""
    if is_platform_admin(user):
        return Team.objects.all()
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(
        memberships__user_id=user_id(user), memberships__role=Membership.Role.LEAD
    )


def may_request(user: User) -> bool:
    """Whether the user may ask for any team (pages offer the "Ask for" links by it)."""
    return teams_user_may_request_for(user).exists()


def may_ask_for(user: User, team: Team) -> bool:
    """The one rule of who asks for a team's changes (MIG changes, drains, quota): the
    team's lead, or a platform admin. ``queues.selectors`` spells it in SQL for the home's
    team rows (it sits below this app); a test holds the two to one answer."""
    return teams_user_may_request_for(user).filter(pk=team.pk).exists()


def team_to_ask_for(user: User, slug: str, what: str) -> Team:
    """The team named ``slug`` that ``user`` may ask ``what`` for (the API's create): a team
    they see (theirs; every team for approvers) but may not ask for is refused (403), any
    other slug is no team to them, whether one has it or not (a field error)."""
    team = teams_user_may_request_for(user).filter(slug=slug).first()
    if team is not None:
        return team
    if teams_seen_by(user).filter(slug=slug).exists():
        raise PermissionDenied(f"Only the team's lead or a platform admin can ask for {what}.")
    raise ValidationError({"team": ["No such team."]})


def require_asker(user: User, team: Team, what: str) -> None:
    """Refuse anyone but the team's lead or a platform admin (``what``: what is asked for)."""
    if not may_ask_for(user, team):
        raise PermissionDenied(f"Only the team's lead or a platform admin can ask for {what}.")


def may_decide(user: User) -> bool:
    """Approvers and platform admins decide requests (never their own)."""
    return is_approver(user) or is_platform_admin(user)


def may_preview(user: User) -> bool:
    """An impact preview names other teams' pods: for those who may ask or decide only."""
    return is_approver(user) or may_request(user)


def require_decider(user: User, what: str) -> None:
    if not may_decide(user):
        raise PermissionDenied(f"Only approvers decide {what}.")


def refuse_own(request: MigChangeRequest | QuotaChangeRequest, user: User, message: str) -> None:
    """Nobody decides their own request."""
    if request.requested_by_id == user.pk:
        raise DomainError(message, code="self_approval")


@dataclass(frozen=True)
class Actions:
    """What a user may do with a request in its current state."""

    decide: bool = False  # approve or reject
    cancel: bool = False
    rollback: bool = False
    abort: bool = False

    @property
    def any(self) -> bool:
        return self.decide or self.cancel or self.rollback or self.abort


def mig_change_actions(user: User, change: MigChangeRequest) -> Actions:
    admin = is_platform_admin(user)
    return Actions(
        decide=may_decide(user)
        and change.requested_by_id != user.pk
        and change.state == State.PENDING,
        cancel=(change.requested_by_id == user.pk or admin) and change.state in CANCELLABLE,
        rollback=admin and change.state in ROLLBACK_FROM,
        abort=admin
        and change.state in (State.RUNNING, State.ROLLING_BACK)
        and change.abort_requested_at is None,
    )


def quota_request_actions(user: User, change: QuotaChangeRequest) -> Actions:
    pending = change.state == QuotaChangeRequest.State.PENDING
    return Actions(
        decide=may_decide(user) and change.requested_by_id != user.pk and pending,
        cancel=pending and (change.requested_by_id == user.pk or is_platform_admin(user)),
    )


def transition(request: MigChangeRequest, to: str, **fields: Any) -> MigChangeRequest:
    """Move a request to ``to`` if that is allowed from the state it is in *now* (a
    conditional UPDATE: of two concurrent callers exactly one wins, the other gets a
    DomainError)."""
    allowed_from = [state for state, targets in TRANSITIONS.items() if to in targets]
    if request.state not in allowed_from:
        raise DomainError(
            f"A request that is {request.get_state_display().lower()} cannot become "
            f"{State(to).label.lower()}.",
            code="illegal_transition",
        )
    with transaction.atomic():
        updated = MigChangeRequest.objects.filter(pk=request.pk, state=request.state).update(
            state=to, updated_at=timezone.now(), **fields
        )
        if not updated:
            raise DomainError(
                "Someone else changed this request just now; reload it.", code="conflict"
            )
        if to in TERMINAL_STATES:
            release_nodes(request)
        elif to == State.ROLLING_BACK:
            claim_nodes(request)
    request.refresh_from_db()
    return request


def claim_nodes(request: MigChangeRequest) -> None:
    """Hold the request's nodes (one open change, rollback or drain per node at a time: the
    database refuses a second holder, so of two racing requests exactly one gets them)."""
    claims = NodeClaim.objects.filter(cluster=request.cluster_id, node__in=request.nodes)
    held = dict(claims.values_list("node", "request_id"))
    others = {node: pk for node, pk in held.items() if pk != request.pk}
    if not others:
        try:
            with transaction.atomic():
                NodeClaim.objects.bulk_create(
                    [
                        NodeClaim(cluster_id=request.cluster_id, node=n, request=request)
                        for n in request.nodes
                        if n not in held
                    ]
                )
            return
        except IntegrityError:  # another request claimed one of them just now
            others = dict(claims.exclude(request_id=request.pk).values_list("node", "request_id"))
    raise DomainError(
        "; ".join(f"{node} is held by open request #{pk}" for node, pk in sorted(others.items()))
        + ": one change, rollback or drain per node at a time.",
        code="node_busy",
    )


def record_teams_hit(request: MigChangeRequest, assessment: dict[str, Any]) -> None:
    """The teams the assessment says a change hits (pods evicted, quotas losing backing):
    they read the request from now on and are told of it."""
    request.teams_hit.set(Team.objects.filter(slug__in=assessment.get("teams_hit", [])))


def release_nodes(request: MigChangeRequest) -> None:
    NodeClaim.objects.filter(request_id=request.pk).delete()
