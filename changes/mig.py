"""MIG change requests: ask, preview, approve, reject, cancel, roll back. Every write
checks permission, validates with field errors, records an audit row and queues work on
commit; the rules shared with quota requests and drains are in ``changes.approval``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from changes import impact
from changes.approval import (
    User,
    claim_nodes,
    decide_on_fresh,
    record_teams_hit,
    refuse_own,
    require_asker,
    require_decider,
    transition,
)
from changes.facts import fleet_facts
from changes.models import MigChangeRequest, MigChangeStep
from changes.notify import notify
from changes.selectors import assessment_for, get_mig_change_for_user
from changes.tasks import queue_execution
from cluster.models import Cluster, ObservedNode, ObservedResourceSlice
from cluster.scope import visible_clusters
from fleet.membership import holds
from fleet.models import NodePool
from portal.access.permissions import is_platform_admin, user_id
from portal.access.selectors import pod_names_for
from portal.audit.record import Event, record_audit
from portal.vocabulary.errors import DomainError
from tenants.models import Team

State = MigChangeRequest.State


def preview(
    *,
    viewer: User,
    nodes: list[str],
    config: str,
    request_id: int | None = None,
    cluster: Cluster,
) -> dict[str, Any]:
    """The assessment on ``cluster`` without saving anything
    (for the live preview), as ``viewer`` may read it: other teams' pods counted, never
    named."""
    nodes = checked_nodes(cluster, nodes, viewer=viewer)
    assessed = impact.assess(
        fleet_facts(cluster=cluster, exclude_request=request_id, nodes=nodes),
        targets=nodes,
        config=config,
        request_id=request_id,
    )
    return assessment_for(pod_names_for(viewer), assessed.as_json(), cluster.pk)


def request_mig_change(
    *,
    actor: User,
    team: Team,
    nodes: list[str],
    target_config: str,
    reason: str,
    pool: NodePool | None = None,
    cluster: Cluster | None = None,
    window_start: dt.datetime | None = None,
    source: str = "web",
) -> MigChangeRequest:
    """Ask for a MIG change on one cluster: assessed now on that cluster's facts, stored
    with its assessment, pending approval.

    The cluster is the pool's (pools are per cluster), else ``cluster``; left out, the only
    cluster, or the one every named node is on. A blocked assessment, or a node that is not on the
    cluster, is refused with field errors; nothing is written.
    """
    require_asker(actor, team, "a MIG change")
    cluster = change_cluster(pool, cluster, nodes, viewer=actor)
    if pool is not None and not nodes:
        nodes = list(
            holds(
                ObservedNode.objects.on(cluster).filter(gone_since__isnull=True),
                pool,
                NodePool.objects.on(cluster),
            ).values_list("name", flat=True)
        )
    nodes = bounded_nodes(cluster, nodes)
    _check_request(cluster, nodes, target_config, reason, viewer=actor)
    assessment = impact.assess(
        fleet_facts(cluster=cluster, nodes=nodes), targets=nodes, config=target_config
    )
    if assessment.verdict == "blocked":
        field = (
            "target_config"
            if any("config" in r or "MIG" in r for r in assessment.reasons)
            else "nodes"
        )
        raise ValidationError({field: assessment.reasons})
    # The cluster was read above, outside the transaction (the planner asks for several
    # changes in its own: all or none).
    with transaction.atomic():
        request = _create_request(
            actor=actor,
            cluster=cluster,
            team=team,
            nodes=nodes,
            pool=pool,
            target_config=target_config,
            reason=reason,
            window_start=window_start,
            assessment=assessment,
            source=source,
        )
        transaction.on_commit(lambda: notify("requested", request))
    return request


def _create_request(
    *,
    actor: User,
    cluster: Cluster,
    team: Team,
    nodes: list[str],
    pool: NodePool | None,
    target_config: str,
    reason: str,
    window_start: dt.datetime | None,
    assessment: impact.Assessment,
    source: str,
) -> MigChangeRequest:
    """The request row, its nodes claimed, the teams it hits and its audit row."""
    request = MigChangeRequest.objects.create(
        cluster=cluster,
        team=team,
        requested_by_id=user_id(actor),
        nodes=list(dict.fromkeys(nodes)),
        pool=pool,
        pool_name=pool.name if pool else "",
        target_config=target_config,
        reason=reason.strip(),
        window_start=window_start,
        state=State.PENDING,
        assessment=assessment.as_json(),
        verdict=assessment.verdict,
        previous_configs={n.name: n.config_before for n in assessment.nodes},
        queue_changes=[q.as_json() for q in assessment.proposed_queue_changes],
    )
    try:
        claim_nodes(request)
    except DomainError as exc:  # another request took a node since the assessment
        raise ValidationError({"nodes": [exc.message]}) from None
    record_teams_hit(request, request.assessment)
    record_audit(
        actor=actor,
        event=Event.MIG_CHANGE_REQUESTED,
        source=source,
        target=request,
        team=team,
        new={
            "cluster": cluster.name,
            "nodes": request.nodes,
            "target_config": target_config,
            "verdict": request.verdict,
            "reason": request.reason,
        },
    )
    return request


def _check_request(
    cluster: Cluster, nodes: list[str], target_config: str, reason: str, *, viewer: User
) -> None:
    """Field errors for what a request must say (nodes of its cluster, a config, why)."""
    errors = _node_errors(cluster, nodes, viewer=viewer)
    by_dra = served_by_dra(cluster, nodes)
    if by_dra:
        errors.setdefault("nodes", []).append(
            f"{', '.join(by_dra[:5])}{' and more' if len(by_dra) > 5 else ''} "
            f"{'serves its' if len(by_dra) == 1 else 'serve their'} GPUs through DRA: MIG "
            "devices there are the DRA driver's, carved per claim, and a MIG config does not "
            "change them. Leave them out of the change."
        )
    if not reason.strip():
        errors["reason"] = ["Say why: approvers and the teams on these nodes read it."]
    if not nodes:
        errors["nodes"] = ["Choose at least one node (or a pool with nodes)."]
    if not target_config:
        errors["target_config"] = ["Choose the MIG config the nodes should have."]
    if errors:
        raise ValidationError(errors)


def change_cluster(
    pool: NodePool | None,
    cluster: Cluster | None,
    nodes: list[str] | None = None,
    *,
    viewer: User,
) -> Cluster:
    """The cluster a change is on: the pool's, else the one chosen, else the only one there
    is, else the only one ``viewer`` may see, else the one cluster they may see that every
    named node is on (a field error when that leaves several or none, or for a pool of
    another one). The error names only the clusters ``viewer`` may see."""
    if pool is not None:
        if cluster is not None and cluster.pk != pool.cluster_id:
            raise ValidationError(
                {"pool": [f"Pool {pool.name} is on cluster {pool.cluster.name}, not {cluster}."]}
            )
        return pool.cluster
    if cluster is not None:
        return cluster
    every = list(Cluster.objects.order_by("name")[:2])
    if len(every) == 1:
        return every[0]
    visible = visible_clusters(viewer)
    mine = list(visible[:2])
    if len(mine) == 1:
        return mine[0]
    if nodes:
        holding = _clusters_holding(set(nodes), visible)
        if len(holding) == 1:
            return holding[0]
    names = ", ".join(cluster.name for cluster in visible)
    raise ValidationError(
        {"cluster": [f"Choose the cluster the nodes are on ({names or 'none of yours'})."]}
    )


# Up to this many node names are looked up one by one (one query, milliseconds), so an
# error names the wrong ones; more than the cluster has nodes beyond it are refused by count.
NAMES_CHECKED = 100


def bounded_nodes(cluster: Cluster, nodes: list[str]) -> list[str]:
    """``nodes`` once each, in their order; refused with a field error, before any work,
    when there are more names than the cluster has nodes (one count: a request naming
    60,000 nodes costs milliseconds, not a minute of assessing)."""
    names = list(dict.fromkeys(nodes))
    if len(names) <= NAMES_CHECKED:  # few: the name check says which one is wrong
        return names
    most = ObservedNode.objects.on(cluster).filter(gone_since__isnull=True).count()
    if len(names) > most:
        raise ValidationError(
            {
                "nodes": [
                    f"{len(names)} node names, but cluster {cluster.name} has {most} "
                    f"node{'' if most == 1 else 's'}: name each node once."
                ]
            }
        )
    return names


def checked_nodes(cluster: Cluster, nodes: list[str], *, viewer: User) -> list[str]:
    """:func:`bounded_nodes`, and a name that is no node of the cluster refused too, before
    the assessment reads the fleet."""
    names = bounded_nodes(cluster, nodes)
    errors = _node_errors(cluster, names, viewer=viewer)
    if errors:
        raise ValidationError(errors)
    return names


def _clusters_holding(nodes: set[str], among: QuerySet[Cluster]) -> list[Cluster]:
    """The clusters of ``among`` on which every one of ``nodes`` is observed now."""
    on: dict[int, set[str]] = {}
    for cluster_id, name in (
        ObservedNode.objects.on_every_cluster()
        .filter(name__in=nodes, gone_since__isnull=True, cluster__in=among)
        .values_list("cluster_id", "name")
    ):
        on.setdefault(cluster_id, set()).add(name)
    ids = [cluster_id for cluster_id, names in on.items() if names == nodes]
    return list(among.filter(pk__in=ids))


def served_by_dra(cluster: Cluster, nodes: Sequence[str]) -> list[str]:
    """Those of ``nodes`` whose GPUs a DRA driver publishes and no device plugin offers, by
    name (two queries; none when no slice is published for them)."""
    published = set(
        ObservedResourceSlice.objects.on(cluster)
        .filter(node_name__in=list(nodes))
        .values_list("node_name", flat=True)
    )
    if not published:
        return []
    offered = {
        name
        for name, allocatable in ObservedNode.objects.on(cluster)
        .filter(name__in=published)
        .values_list("name", "allocatable")
        if any(
            k.startswith("nvidia.com/") and str(v) not in ("0", "") for k, v in allocatable.items()
        )
    }
    return sorted(published - offered)


def _node_errors(cluster: Cluster, nodes: list[str], *, viewer: User) -> dict[str, list[str]]:
    """A node that is not on ``cluster`` but on another one ``viewer`` may see is a field
    error naming where it is; a node known nowhere else they may see is one too (at most
    five named): a cluster they may not see is never named, nor its nodes told apart."""
    here = set(
        ObservedNode.objects.on(cluster)
        .filter(name__in=nodes, gone_since__isnull=True)
        .values_list("name", flat=True)
    )
    elsewhere: dict[str, list[str]] = {}
    for name, where in (
        ObservedNode.objects.on_every_cluster()
        .filter(name__in=set(nodes) - here, gone_since__isnull=True)
        .exclude(cluster=cluster)
        .filter(cluster__in=visible_clusters(viewer))
        .order_by("name", "cluster__name")
        .values_list("name", "cluster__name")
    ):
        elsewhere.setdefault(name, []).append(where)
    unknown = [n for n in nodes if n not in here and n not in elsewhere]
    said = [
        f"{name} is not on cluster {cluster.name}: it is on {', '.join(others)}. A change "
        "is on one cluster: ask on the cluster the node is on."
        for name, others in sorted(elsewhere.items())
    ]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        said.append(
            f"No such node on cluster {cluster.name} (or gone): {', '.join(unknown[:5])}{more}."
        )
    return {"nodes": said} if said else {}


def approve_mig_change(
    *, request_id: int, approver: User, comment: str, seen: str = "", source: str = "web"
) -> MigChangeRequest:
    """Approve a pending MIG change (or drain) and queue its execution: what runs is what
    the approver was shown.

    Nobody approves their own request. At the decision the request is assessed anew on
    fresh desired and observed state; when that assessment differs from the one the
    approver saw (``seen``, the fingerprint the page or the API showed; by default the
    stored one), the new assessment is stored and the approval refused, so the approver
    reads it and decides again. An approval stores the configs to roll back to and the
    queue changes to carry as computed now, and the execution uses exactly those.

    The cluster is read (its pods, budgets and Jobs: seconds, at worst) before the
    request's row is locked; under the lock only what the database holds is checked
    again: the request still pending, and still showing the assessment read before."""
    request = get_mig_change_for_user(approver, request_id)
    require_decider(approver, "MIG changes")
    refuse_own(request, approver, "You cannot approve your own request; another approver must.")
    _require_pending(request)
    assessed = impact.assess(
        fleet_facts(cluster=request.cluster, exclude_request=request.pk, nodes=request.nodes),
        targets=request.nodes,
        config=request.target_config,
        request_id=request.pk,
        drain=request.is_drain,
    )
    read = request.impact.fingerprint
    shown = seen or read
    now = timezone.now()
    with transaction.atomic(durable=True):
        # Decisions on one request take turns: a second approver finds it decided.
        request = MigChangeRequest.objects.select_for_update(no_key=True).get(pk=request.pk)
        _require_pending(request)
        if request.impact.fingerprint != read:
            shown = ""  # re-assessed by another decision meanwhile: what was seen is gone
        was = decide_on_fresh(
            shown=shown,
            fresh=assessed.fingerprint,
            blocked=assessed.verdict == "blocked",
            approve=lambda: _approve(
                request,
                approver,
                comment,
                assessed.as_json(),
                _computed_at(assessed),
                now=now,
                source=source,
            ),
            reassess=lambda: _reassessed(request, assessed, shown, approver, now, source),
        )
        if was is None:
            return request
    raise DomainError(
        f"{impact.what_changed(was, assessed.as_json())} The assessment is updated: read it "
        "and decide again.",
        code="stale_assessment",
    )


def _reassessed(
    request: MigChangeRequest,
    assessed: impact.Assessment,
    shown: str,
    approver: User,
    now: dt.datetime,
    source: str,
) -> dict[str, Any]:
    """Store the fresh assessment an approval was refused on (the request locked); the
    assessment it replaced."""
    was = dict(request.assessment)
    fresh = assessed.as_json()
    MigChangeRequest.objects.filter(pk=request.pk).update(
        assessment=fresh, verdict=assessed.verdict, updated_at=now, **_computed_at(assessed)
    )
    record_teams_hit(request, fresh)
    record_audit(
        actor=approver,
        event=Event.MIG_CHANGE_REASSESSED,
        source=source,
        target=request,
        team=request.team,
        old={"verdict": request.verdict, "fingerprint": shown},
        new={"verdict": assessed.verdict, "fingerprint": assessed.fingerprint},
    )
    return was


def _computed_at(assessed: impact.Assessment) -> dict[str, Any]:
    """What an approval executes, from the assessment it was decided on."""
    if assessed.drain:
        return {"previous_configs": {}, "queue_changes": []}
    return {
        "previous_configs": {n.name: n.config_before for n in assessed.nodes},
        "queue_changes": [q.as_json() for q in assessed.proposed_queue_changes],
    }


def _approve(
    request: MigChangeRequest,
    approver: User,
    comment: str,
    fresh: dict[str, Any],
    computed: dict[str, Any],
    *,
    now: dt.datetime,
    source: str,
) -> None:
    """The decision itself (inside the caller's transaction, the request locked)."""
    later = request.window_start is not None and request.window_start > now
    transition(
        request,
        State.APPROVED,
        decided_by_id=approver.pk,
        decision_comment=comment,
        decided_at=now,
        assessment=fresh,
        verdict=fresh["verdict"],
        **computed,
    )
    record_teams_hit(request, fresh)
    if later:
        transition(request, State.SCHEDULED)
    record_audit(
        actor=approver,
        event=Event.MIG_CHANGE_APPROVED,
        source=source,
        target=request,
        team=request.team,
        new={
            "comment": comment,
            "verdict": fresh["verdict"],
            "fingerprint": fresh["fingerprint"],
            "queue_changes": computed["queue_changes"],
        },
    )
    if not later:
        queue_execution(request.pk)  # through the outbox: published on commit
    transaction.on_commit(lambda: notify("approved", request))


@transaction.atomic(durable=True)  # an entry point: never inside another
def reject_mig_change(
    *, request_id: int, approver: User, comment: str, source: str = "web"
) -> MigChangeRequest:
    request = get_mig_change_for_user(approver, request_id)
    require_decider(approver, "MIG changes")
    refuse_own(request, approver, "You cannot decide your own request.")
    _require_pending(request)  # said before a missing comment: it is decided
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
        event=Event.MIG_CHANGE_REJECTED,
        source=source,
        target=request,
        team=request.team,
        new={"comment": comment},
    )
    transaction.on_commit(lambda: notify("rejected", request))
    return request


@transaction.atomic(durable=True)  # an entry point: never inside another
def cancel_mig_change(*, request_id: int, actor: User, source: str = "web") -> MigChangeRequest:
    request = get_mig_change_for_user(actor, request_id)
    if request.requested_by_id != actor.pk and not is_platform_admin(actor):
        raise PermissionDenied("Only the requester or a platform admin can cancel a request.")
    transition(request, State.CANCELLED)
    record_audit(
        actor=actor,
        event=Event.MIG_CHANGE_CANCELLED,
        source=source,
        target=request,
        team=request.team,
    )
    transaction.on_commit(lambda: notify("cancelled", request, actor=actor.pk))
    return request


@transaction.atomic(durable=True)  # an entry point: never inside another
def rollback_mig_change(*, request_id: int, actor: User, source: str = "web") -> MigChangeRequest:
    """Put the nodes back on their previous configs through the same steps."""
    request = get_mig_change_for_user(actor, request_id)
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins roll back MIG changes.")
    # A retried rollback starts its steps afresh (fresh deadlines; the audit keeps the
    # first attempt's steps).
    MigChangeStep.objects.filter(request=request, round="rollback").delete()
    transition(
        request,
        State.ROLLING_BACK,
        failure="",
        abort_requested_by=None,
        abort_requested_at=None,
    )
    record_audit(
        actor=actor,
        event=Event.MIG_CHANGE_ROLLBACK,
        source=source,
        target=request,
        team=request.team,
        new={"configs": request.previous_configs, "queues": request.queues_moved},
    )
    queue_execution(request.pk)  # through the outbox: published on commit
    return request


@transaction.atomic(durable=True)  # an entry point: never inside another
def abort_mig_change(*, request_id: int, actor: User, source: str = "web") -> MigChangeRequest:
    """Ask a running change (or rollback) to stop at its next step boundary: it then fails
    with the node left cordoned, and an admin may roll it back."""
    request = get_mig_change_for_user(actor, request_id)
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins abort a running change.")
    if not MigChangeRequest.objects.filter(
        pk=request.pk,
        state__in=[State.RUNNING, State.ROLLING_BACK],
        abort_requested_at__isnull=True,
    ).update(abort_requested_by_id=actor.pk, abort_requested_at=timezone.now()):
        raise DomainError(
            "Only a running change or rollback can be aborted (once).", code="illegal_transition"
        )
    request.refresh_from_db()
    record_audit(
        actor=actor,
        event=Event.MIG_CHANGE_ABORT_REQUESTED,
        source=source,
        target=request,
        team=request.team,
        new={"state": request.state},
    )
    queue_execution(request.pk)  # through the outbox: published on commit
    return request


def _require_pending(request: MigChangeRequest) -> None:
    if request.state != State.PENDING:
        raise DomainError(
            f"This request is {request.get_state_display().lower()}, not pending approval.",
            code="illegal_transition",
        )
