"""Reads of reviewed changes, always for the acting user: another team's request is a 404,
never a 403. Approvers and platform admins see every request."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet
from django.http import Http404

from changes.approval import (
    Actions,
    User,
    may_decide,
    mig_change_actions,
    quota_request_actions,
)
from changes.impact import verdict_label
from changes.models import MigChangeRequest, MigChangeStep, QuotaChangeRequest
from cluster.scope import cluster_id_of
from portal.access.permissions import sees_every_team
from portal.access.selectors import pod_names_for
from portal.audit.events import Event
from portal.models import AuditEvent
from portal.vocabulary.names import PodNames
from portal.vocabulary.quantity import QuantityError
from queues.selectors import (
    cluster_queue_what_if,
    namespace_quota_what_if,
    simulates_kueue,
    with_nominal,
)
from tenants.models import Membership

R = TypeVar("R", bound=Model)


def _visible(requests: QuerySet[R], user: User) -> QuerySet[R]:
    """``requests`` of the user's teams (every one for those who see every team): the teams
    as a subquery, not a join, so that no DISTINCT has to compare whole rows (the
    assessments' JSON among them: 15 ms a list page on the demo's rows)."""
    if sees_every_team(user):
        return requests
    if user.pk is None:  # nobody signed in (the schema's generation): no team's requests
        return requests.none()
    return requests.filter(
        team_id__in=Membership.objects.filter(user_id=int(user.pk)).values("team_id")
    )


def list_mig_changes_for_user(user: User) -> QuerySet[MigChangeRequest]:
    """MIG changes and drains of the user's teams, and those that hit them (evict their
    pods, take their quotas' backing); all of them for approvers and admins."""
    changes = MigChangeRequest.objects.select_related(
        "cluster", "team", "requested_by", "decided_by", "pool"
    )
    if sees_every_team(user):
        return changes
    mine = Q(team__memberships__user_id=user.pk) | Q(teams_hit__memberships__user_id=user.pk)
    return changes.filter(pk__in=MigChangeRequest.objects.filter(mine).values("pk"))


def get_mig_change_for_user(user: User, request_id: int) -> MigChangeRequest:
    """404 for requests of other teams, as if they did not exist."""
    try:
        return list_mig_changes_for_user(user).get(pk=request_id)
    except MigChangeRequest.DoesNotExist:
        raise Http404("No such request.") from None


def get_mig_change_with_actions(user: User, request_id: int) -> tuple[MigChangeRequest, Actions]:
    """The request and what the user may do with it now."""
    change = get_mig_change_for_user(user, request_id)
    return change, mig_change_actions(user, change)


def list_quota_requests_for_user(user: User) -> QuerySet[QuotaChangeRequest]:
    """Quota requests of the user's teams (all of them for approvers and admins)."""
    return _visible(
        QuotaChangeRequest.objects.select_related(
            "cluster",
            "team",
            "namespace",
            "cluster_queue",
            "requested_by",
            "decided_by",
            "auto_rule",
        ),
        user,
    )


def get_quota_request_for_user(user: User, request_id: int) -> QuotaChangeRequest:
    try:
        return list_quota_requests_for_user(user).get(pk=request_id)
    except QuotaChangeRequest.DoesNotExist:
        raise Http404("No such request.") from None


def get_quota_request_with_actions(
    user: User, request_id: int
) -> tuple[QuotaChangeRequest, Actions]:
    change = get_quota_request_for_user(user, request_id)
    return change, quota_request_actions(user, change)


def quota_request_what_if(user: User, change: QuotaChangeRequest) -> dict[str, Any] | None:
    """Before the decision: what Kueue would do with the requested ClusterQueue quota, or
    which waiting workloads' pods the requested namespace quota lets in (None once decided,
    or when its target is gone)."""
    if change.state != QuotaChangeRequest.State.PENDING or change.target_deleted:
        return None
    try:
        if change.kind == QuotaChangeRequest.Kind.NAMESPACE:
            assert change.namespace is not None
            return {
                "namespace": namespace_quota_what_if(
                    change.namespace, change.resource, change.requested
                )
            }
        if change.cluster_queue is None or not simulates_kueue():
            return None
        edited = with_nominal(
            change.cluster_queue, change.flavor, change.resource, change.requested
        )
        return {"queue": cluster_queue_what_if(user, edited)}
    except (QuantityError, ValueError):  # a queue saved before its values were checked
        return None


@dataclass
class InboxLine:
    """What a line of the MIG change inbox shows of a pending request (read as plain values:
    an approver's inbox holds hundreds, and three models a line cost more than its drawing)."""

    pk: int
    kind: str
    nodes: list[str]
    target_config: str
    verdict: str
    cluster_id: int
    team_slug: str
    requested_by: str
    of_cluster: Any = None  # the views set it when the page names each line's cluster

    @property
    def is_drain(self) -> bool:
        return self.kind == MigChangeRequest.Kind.DRAIN

    @property
    def verdict_label(self) -> str:
        return verdict_label(self.verdict)


def mig_inbox(user: User, visible: QuerySet[MigChangeRequest]) -> list[InboxLine]:
    """The pending MIG changes a user may decide (:func:`inbox`), as :class:`InboxLine`s."""
    decidable = _decidable(user, visible)
    if decidable is None:
        return []
    rows = decidable.values_list(
        "pk",
        "kind",
        "nodes",
        "target_config",
        "verdict",
        "cluster_id",
        "team__slug",
        "requested_by__username",
    )
    return [
        InboxLine(pk, kind, nodes or [], target, verdict, cluster, team or "", by or "")
        for pk, kind, nodes, target, verdict, cluster, team, by in rows
    ]


def inbox(user: User, visible: QuerySet[R]) -> list[R]:
    """The pending requests a user may decide: others' requests, for deciders only."""
    decidable = _decidable(user, visible)
    return [] if decidable is None else list(decidable)


def _decidable(user: User, visible: QuerySet[R]) -> QuerySet[R] | None:
    """Of ``visible``, the pending requests of others (None: the user decides none)."""
    if not may_decide(user):
        return None
    return visible.filter(state="pending").exclude(requested_by_id=user.pk)


def assessment_for(names: PodNames, assessment: dict[str, Any], cluster: int) -> dict[str, Any]:
    """An assessment (of a change on ``cluster``) as a user may read it: pods of teams they
    are not in are counted per namespace (``evictions_hidden`` / ``schedulable_hidden``),
    never named."""
    if names.everyone or not assessment:
        return assessment
    shown = dict(assessment)
    for key in ("evictions", "schedulable"):
        rows = assessment.get(key) or []
        shown[key] = [r for r in rows if names.named(cluster, r.get("namespace", ""))]
        hidden = Counter(
            r.get("namespace", "") for r in rows if not names.named(cluster, r.get("namespace", ""))
        )
        shown[f"{key}_hidden"] = [{"namespace": ns, "count": n} for ns, n in sorted(hidden.items())]
    shown["reasons"] = [names.redact(r, cluster) for r in assessment.get("reasons", [])]
    shown["notes"] = [names.redact(n, cluster) for n in assessment.get("notes", [])]
    return shown


def change_for(user: User, change: MigChangeRequest, steps: list[MigChangeStep]) -> dict[str, Any]:
    """What a page shows of a change to ``user``: its assessment, step messages, evicted pods
    and failure with other teams' pods counted, never named."""
    names = pod_names_for(user)
    on = cluster_id_of(change.cluster_id)
    for step in steps:
        step.message = names.redact(step.message, on)
        step.pods = [names.redact(pod, on) for pod in step.pods]
    return {
        "assessment": assessment_for(names, change.assessment, on),
        "failure": names.redact(change.failure, on),
        "steps": steps,
        "acted": acted_on(change),
    }


# What an admin did to a change after its decision, in the page's words.
ACTED: dict[str, str] = {
    Event.MIG_CHANGE_ABORT_REQUESTED: "Abort asked",
    Event.MIG_CHANGE_ROLLBACK: "Rollback asked",
}


def acted_on(change: MigChangeRequest) -> list[dict[str, Any]]:
    """Who aborted or rolled back ``change`` and when, as the audit recorded it (the pages
    name the actor recorded, never the approver for them)."""
    return [
        {"said": ACTED[event], "actor": actor or "system", "at": at}
        for event, actor, at in AuditEvent.objects.filter(
            target_type=MigChangeRequest._meta.label_lower,
            target_id=str(change.pk),
            event__in=list(ACTED),
        )
        .order_by("time", "id")
        .values_list("event", "actor_name", "time")
    ]
