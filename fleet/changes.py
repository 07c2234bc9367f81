"""MIG change requests: create, assess, decide, cancel, roll back (services) and the facts
the assessment reads (selector). Every write checks permission, validates with field
errors, records an audit row and queues work on commit."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from fleet import impact
from fleet.catalog import model_for_product
from fleet.models import (
    OPEN_STATES,
    MigChangeRequest,
    MigConfig,
    NodePool,
    ObservedNode,
    ObservedPod,
)
from fleet.notify import notify
from portal.audit import record_audit
from portal.errors import DomainError
from portal.permissions import is_approver, is_platform_admin
from queues.models import ClusterQueue, ResourceFlavor
from tenants.models import Membership, Namespace, QuotaItem, Team

log = logging.getLogger(__name__)
State = MigChangeRequest.State
User = AbstractBaseUser | AnonymousUser

# Every allowed transition; anything else raises and changes nothing.
TRANSITIONS: dict[str, set[str]] = {
    State.DRAFT: {State.PENDING, State.CANCELLED},
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
    updated = MigChangeRequest.objects.filter(pk=request.pk, state=request.state).update(
        state=to, updated_at=timezone.now(), **fields
    )
    if not updated:
        raise DomainError("Someone else changed this request just now; reload it.", code="conflict")
    request.refresh_from_db()
    return request


# ----------------------------------------------------------------------------- reads


def fleet_facts(*, exclude_request: int | None = None) -> impact.Fleet:
    """The observed fleet and desired quotas as plain facts (a fixed number of queries)."""
    team_of = dict(Namespace.objects.values_list("name", "team__slug"))
    nodes = [
        impact.NodeFacts(
            name=n.name,
            model=model_for_product(n.gpu_product) if n.gpu_product else None,
            gpu_count=n.gpu_count,
            mig_config=n.mig_config,
            mig_state=n.mig_config_state,
            labels=n.labels,
            allocatable={
                r: int(v)
                for r, v in n.allocatable.items()
                if r.startswith("nvidia.com/") and str(v).isdigit() and int(v) > 0
            },
        )
        for n in ObservedNode.objects.filter(gone_since__isnull=True)
    ]
    pods = [
        impact.PodFacts(
            p.namespace, p.name, p.node_name, p.phase, p.gpu_requests, team_of.get(p.namespace, "")
        )
        for p in ObservedPod.objects.all()
    ]
    queues = []
    for cq in ClusterQueue.objects.all():
        for (flavor, resource), amount in cq.quota().items():
            if resource.startswith("nvidia.com/") and amount.denominator == 1:
                queues.append(impact.QueueQuota(cq.name, flavor, resource, int(amount)))
    quotas = []
    for item in QuotaItem.objects.filter(
        resource__startswith="requests.nvidia.com/"
    ).select_related("namespace__team"):
        if item.hard.isdigit():
            quotas.append(
                impact.NamespaceQuota(
                    item.namespace.name,
                    item.namespace.team.slug,
                    item.resource.removeprefix("requests."),
                    int(item.hard),
                )
            )
    busy = {}
    for request in MigChangeRequest.objects.filter(state__in=OPEN_STATES).exclude(
        pk=exclude_request
    ):
        for node in request.nodes:
            busy[node] = request.pk
    return impact.Fleet(
        nodes=nodes,
        pods=pods,
        queues=queues,
        flavors={f.name: f.node_labels for f in ResourceFlavor.objects.all()},
        quotas=quotas,
        pools=[
            impact.PoolFacts(p.name, p.node_selector, p.mig_config) for p in NodePool.objects.all()
        ],
        busy=busy,
        custom_configs={c.name: (c.gpu_model, c.devices) for c in MigConfig.objects.all()},
    )


def teams_user_may_request_for(user: User) -> QuerySet[Team]:
    if is_platform_admin(user):
        return Team.objects.all()
    return Team.objects.filter(memberships__user_id=user.pk, memberships__role=Membership.Role.LEAD)


def may_preview(user: User) -> bool:
    """An impact preview names other teams' pods: for those who may ask or decide only."""
    return is_approver(user) or teams_user_may_request_for(user).exists()


def list_mig_changes_for_user(user: User) -> QuerySet[MigChangeRequest]:
    """Requests of the user's teams; approvers and admins see every request."""
    requests = MigChangeRequest.objects.select_related("team", "requested_by", "decided_by")
    if is_platform_admin(user) or is_approver(user):
        return requests
    return requests.filter(team__memberships__user_id=user.pk).distinct()


def get_mig_change_for_user(user: User, request_id: int) -> MigChangeRequest:
    """404 for requests of other teams, as if they did not exist."""
    try:
        return list_mig_changes_for_user(user).get(pk=request_id)
    except MigChangeRequest.DoesNotExist:
        raise Http404("No such request.") from None


def preview(*, nodes: list[str], config: str, request_id: int | None = None) -> dict[str, Any]:
    """The assessment without saving anything (for the live preview)."""
    return impact.assess(
        fleet_facts(exclude_request=request_id), targets=nodes, config=config, request_id=request_id
    )


# ----------------------------------------------------------------------------- writes


@transaction.atomic
def request_mig_change(
    *,
    actor: User,
    team: Team,
    nodes: list[str],
    target_config: str,
    reason: str,
    pool: NodePool | None = None,
    window_start: Any = None,
    source: str = "web",
) -> MigChangeRequest:
    """Ask for a MIG change: assessed now, stored with its assessment, pending approval.

    A blocked assessment is refused with the reasons as field errors; nothing is written.
    """
    if not teams_user_may_request_for(actor).filter(pk=team.pk).exists():
        raise PermissionDenied("Only the team's lead or a platform admin can ask for a MIG change.")
    if pool is not None and not nodes:
        nodes = list(
            ObservedNode.objects.filter(
                gone_since__isnull=True, labels__contains=pool.node_selector
            ).values_list("name", flat=True)
        )
    errors: dict[str, list[str]] = {}
    if not reason.strip():
        errors["reason"] = ["Say why: approvers and the teams on these nodes read it."]
    if not nodes:
        errors["nodes"] = ["Choose at least one node (or a pool with nodes)."]
    if not target_config:
        errors["target_config"] = ["Choose the MIG config the nodes should have."]
    if errors:
        raise ValidationError(errors)
    assessment = impact.assess(fleet_facts(), targets=nodes, config=target_config)
    if assessment["verdict"] == "blocked":
        field = (
            "target_config"
            if any("config" in r or "MIG" in r for r in assessment["reasons"])
            else "nodes"
        )
        raise ValidationError({field: assessment["reasons"]})
    request = MigChangeRequest.objects.create(
        team=team,
        requested_by=actor,
        nodes=list(dict.fromkeys(nodes)),
        pool=pool,
        target_config=target_config,
        reason=reason.strip(),
        window_start=window_start,
        state=State.PENDING,
        assessment=assessment,
        verdict=assessment["verdict"],
        previous_configs={n["name"]: n["config_before"] for n in assessment["nodes"]},
        queue_changes=assessment["proposed_queue_changes"],
    )
    record_audit(
        actor=actor,
        event="mig_change.requested",
        source=source,
        target=request,
        team=team,
        new={
            "nodes": request.nodes,
            "target_config": target_config,
            "verdict": request.verdict,
            "reason": request.reason,
        },
    )
    transaction.on_commit(lambda: notify("requested", request))
    return request


def approve_mig_change(
    *, request_id: int, approver: User, comment: str, source: str = "web"
) -> MigChangeRequest:
    """Approve a pending MIG change and queue its execution.

    Nobody approves their own request; the assessment is re-run on fresh observed state and
    the approval refused (with the new assessment stored) if the verdict got worse.
    """
    request = get_mig_change_for_user(approver, request_id)
    if not (is_approver(approver) or is_platform_admin(approver)):
        raise PermissionDenied("Only approvers decide MIG changes.")
    if request.requested_by_id == approver.pk:
        raise DomainError(
            "You cannot approve your own request; another approver must.", code="self_approval"
        )
    if request.state != State.PENDING:
        raise DomainError(
            f"This request is {request.get_state_display().lower()}, not pending approval.",
            code="illegal_transition",
        )
    fresh = impact.assess(
        fleet_facts(exclude_request=request.pk),
        targets=request.nodes,
        config=request.target_config,
        request_id=request.pk,
        drain=request.is_drain,
    )
    if impact.worse(fresh["verdict"], request.verdict):
        MigChangeRequest.objects.filter(pk=request.pk).update(
            assessment=fresh, verdict=fresh["verdict"]
        )
        raise DomainError(
            f"The fleet changed since the request was assessed: the verdict is now "
            f"{fresh['verdict'].replace('_', ' ')} (was {request.verdict.replace('_', ' ')}). "
            "Read the new assessment before deciding.",
            code="stale_assessment",
        )
    now = timezone.now()
    target = (
        State.SCHEDULED if request.window_start and request.window_start > now else State.APPROVED
    )
    with transaction.atomic():
        transition(
            request,
            State.APPROVED,
            decided_by_id=approver.pk,
            decision_comment=comment,
            decided_at=now,
            assessment=fresh,
            verdict=fresh["verdict"],
        )
        if target == State.SCHEDULED:
            transition(request, State.SCHEDULED)
        record_audit(
            actor=approver,
            event="mig_change.approved",
            source=source,
            target=request,
            team=request.team,
            new={"comment": comment, "verdict": fresh["verdict"]},
        )
        if target == State.APPROVED:
            transaction.on_commit(lambda: queue_execution(request.pk))
        transaction.on_commit(lambda: notify("approved", request))
    return request


@transaction.atomic
def reject_mig_change(
    *, request_id: int, approver: User, comment: str, source: str = "web"
) -> MigChangeRequest:
    request = get_mig_change_for_user(approver, request_id)
    if not (is_approver(approver) or is_platform_admin(approver)):
        raise PermissionDenied("Only approvers decide MIG changes.")
    if request.requested_by_id == approver.pk:
        raise DomainError("You cannot decide your own request.", code="self_approval")
    if not comment.strip():
        raise ValidationError({"comment": ["Say why it is rejected."]})
    transition(
        request,
        State.REJECTED,
        decided_by_id=approver.pk,
        decision_comment=comment,
        decided_at=timezone.now(),
    )
    record_audit(
        actor=approver,
        event="mig_change.rejected",
        source=source,
        target=request,
        team=request.team,
        new={"comment": comment},
    )
    transaction.on_commit(lambda: notify("rejected", request))
    return request


@transaction.atomic
def cancel_mig_change(*, request_id: int, actor: User, source: str = "web") -> MigChangeRequest:
    request = get_mig_change_for_user(actor, request_id)
    if request.requested_by_id != actor.pk and not is_platform_admin(actor):
        raise PermissionDenied("Only the requester or a platform admin can cancel a request.")
    transition(request, State.CANCELLED)
    record_audit(
        actor=actor, event="mig_change.cancelled", source=source, target=request, team=request.team
    )
    return request


@transaction.atomic
def rollback_mig_change(*, request_id: int, actor: User, source: str = "web") -> MigChangeRequest:
    """Put the nodes back on their previous configs through the same steps."""
    request = get_mig_change_for_user(actor, request_id)
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins roll back MIG changes.")
    transition(request, State.ROLLING_BACK, failure="")
    record_audit(
        actor=actor,
        event="mig_change.rollback",
        source=source,
        target=request,
        team=request.team,
        new={"configs": request.previous_configs},
    )
    transaction.on_commit(lambda: queue_execution(request.pk))
    return request


def queue_execution(request_id: int) -> None:
    from fleet.tasks import execute_mig_change_task

    try:
        execute_mig_change_task.delay(request_id)
    except Exception as exc:  # the periodic sweep starts it when the broker is back
        log.warning("could not queue MIG change %s: %s", request_id, exc)
