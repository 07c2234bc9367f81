"""Onboarding a team in one go, and offboarding it: team, namespaces on one cluster, their
quota and LimitRange, LocalQueues on existing ClusterQueues, and members.

Every write goes through its app's service (permission, field errors, audit); this module
only orders them, names each step's field errors by where they were given
(``namespaces[0].hard[requests.nvidia.com/gpu]``) and renders what the cluster loop will
apply. A dry run makes every write in a transaction it then rolls back: the same rules
answer, nothing stays. The audit rows of one onboarding share one request id (its
"story"), which the Audit page filters on (``?request=``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import transaction

from cluster.models import Cluster
from loop.desired import collect_manifests, to_yaml_stream
from portal.api.safety import etag_of
from portal.audit.record import Actor
from portal.infra.observability import request_id
from portal.models import AuditEvent
from portal.services import require_platform_admin
from portal.vocabulary.errors import DomainError
from queues.models import ClusterQueue, LocalQueue
from queues.preview import yaml_diff
from queues.services import delete_queue_object, save_local_queue
from tenants.models import Membership, Namespace, Team
from tenants.rules import LimitSpec
from tenants.selectors import NamespaceDeletion, namespace_deletion, namespace_etag
from tenants.services import (
    delete_namespace,
    delete_tenant_object,
    save_namespace,
    save_team,
    set_namespace_limits,
    set_namespace_quota,
    set_team_member_nested,
)
from usage.models import Rollup, Sample

T = TypeVar("T")


@dataclass
class NamespacePlan:
    name: str
    hard: dict[str, str] = field(default_factory=dict)
    limits: list[LimitSpec] = field(default_factory=list)
    local_queues: dict[str, str] = field(default_factory=dict)  # LocalQueue -> ClusterQueue


@dataclass
class OnboardingPlan:
    slug: str
    name: str
    cluster: str
    description: str = ""
    namespaces: list[NamespacePlan] = field(default_factory=list)
    members: dict[str, str] = field(default_factory=dict)  # username -> role


@dataclass
class Onboarded:
    """What an onboarding wrote (or, dry, would write): the team, the rendered objects the
    loop applies for it, the diff against what it applies now, the rules' warnings, and the
    request id its audit rows share."""

    team: Team
    manifests: list[dict[str, Any]]
    yaml: str
    diff: list[tuple[str, str]]
    warnings: list[str]
    story: str
    dry_run: bool


class _DryRun(Exception):
    """Raised inside the transaction to roll a dry run back."""


def _under(prefix: str, call: Callable[[], T]) -> T:
    """Run one service call; its field errors come back named under ``prefix``."""
    try:
        return call()
    except ValidationError as error:
        if not hasattr(error, "error_dict"):
            raise ValidationError({prefix or "__all__": error.messages}) from error
        raise ValidationError(
            {
                (f"{prefix}.{key}" if prefix else key) if key != "__all__" else prefix or key: (
                    [str(m) for e in errors for m in e.messages]
                )
                for key, errors in error.error_dict.items()
            }
        ) from error


@contextmanager
def _story() -> Iterator[str]:
    """The request id the onboarding's audit rows share: the HTTP request's, else a new one."""
    current = request_id.get()
    if current:
        yield current
        return
    token = request_id.set(f"onboarding-{uuid.uuid4().hex[:12]}")
    try:
        yield request_id.get()
    finally:
        request_id.reset(token)


def _cluster_named(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise ValidationError({"cluster": [f"No cluster named {name!r}."]})
    return cluster


def _rendered(slug: str, cluster: Cluster) -> list[dict[str, Any]]:
    return collect_manifests(team_slug=slug, cluster=cluster)


def onboard_team(
    *, actor: Actor, plan: OnboardingPlan, source: str, dry_run: bool = False
) -> Onboarded:
    """Create a team with its namespaces, quotas, limits, LocalQueues and members (platform
    admins). All or nothing: the first refused step's field errors raise and nothing stays;
    ``dry_run`` answers the same without writing."""
    require_platform_admin(actor)
    cluster = _cluster_named(plan.cluster)
    if Team.objects.filter(slug=plan.slug).exists():
        raise ValidationError({"team.slug": [f"A team {plan.slug!r} exists already."]})
    before = to_yaml_stream(_rendered(plan.slug, cluster))
    with _story() as story:
        result: Onboarded | None = None
        try:
            with transaction.atomic():
                result = _write(actor, plan, cluster, source, story, before, dry_run)
                if dry_run:
                    raise _DryRun
        except _DryRun:
            pass
    assert result is not None  # set before the dry run's rollback
    return result


def _write(
    actor: Actor,
    plan: OnboardingPlan,
    cluster: Cluster,
    source: str,
    story: str,
    before: str,
    dry_run: bool,
) -> Onboarded:
    warnings: list[str] = []
    team = Team(slug=plan.slug, name=plan.name, description=plan.description)
    _under("team", partial(save_team, actor=actor, team=team, source=source))
    for i, ns_plan in enumerate(plan.namespaces):
        where = f"namespaces[{i}]"
        ns = Namespace(name=ns_plan.name, team=team, cluster=cluster)
        _under(where, partial(save_namespace, actor=actor, namespace=ns, source=source))
        if ns_plan.hard:
            warnings += _under(
                where,
                partial(
                    set_namespace_quota, actor=actor, namespace=ns, hard=ns_plan.hard, source=source
                ),
            )
        if ns_plan.limits:
            warnings += _under(
                where,
                partial(
                    set_namespace_limits,
                    actor=actor,
                    namespace=ns,
                    limits=ns_plan.limits,
                    source=source,
                ),
            )
        for lq_name, cq_name in ns_plan.local_queues.items():
            _local_queue(actor, ns, lq_name, cq_name, source, f"{where}.local_queues[{lq_name}]")
    for j, (username, role) in enumerate(plan.members.items()):
        _under(
            f"members[{j}]",
            partial(
                set_team_member_nested,
                actor=actor,
                team=team,
                username=username,
                role=role,
                source=source,
            ),
        )
    manifests = _rendered(plan.slug, cluster)
    after = to_yaml_stream(manifests)
    return Onboarded(
        team=team,
        manifests=manifests,
        yaml=after,
        diff=yaml_diff(before, after),
        warnings=list(dict.fromkeys(warnings)),
        story=story,
        dry_run=dry_run,
    )


def _local_queue(
    actor: Actor, ns: Namespace, name: str, cq_name: str, source: str, where: str
) -> None:
    cq = ClusterQueue.objects.on(ns.cluster_id).filter(name=cq_name).first()
    if cq is None:
        raise ValidationError(
            {f"{where}.cluster_queue": [f"No ClusterQueue {cq_name!r} on this cluster."]}
        )
    lq = LocalQueue(name=name, namespace=ns, cluster_queue=cq)
    _under(where, partial(save_local_queue, actor=actor, local_queue=lq, source=source))


@dataclass
class Offboarding:
    """What offboarding a team removes from its clusters and what history stays."""

    team: Team
    namespaces: list[Namespace]
    local_queues: list[LocalQueue]
    members: list[Membership]
    audit_rows: int
    usage_rows: int
    deletions: list[NamespaceDeletion]  # each namespace's own delete page, said again
    version: str  # what was read: the namespaces' versions, queues and members


def offboarding_version(team: Team) -> str:
    """The team's version as offboarding reads it: each namespace's (the namespace delete's
    If-Match), its LocalQueues and its members."""
    return etag_of(
        team.slug,
        sorted(
            namespace_etag(ns)
            for ns in Namespace.objects.on_every_cluster()
            .filter(team=team)
            .prefetch_related("quota_items", "limit_items")
        ),
        sorted(
            LocalQueue.objects.filter(namespace__team=team).values_list(
                "pk", "name", "cluster_queue_id"
            )
        ),
        sorted(team.memberships.values_list("user_id", "role")),
    )


def offboarding_of(team: Team) -> Offboarding:
    """What leaves the cluster (namespaces and what the portal applied in them, LocalQueues)
    and what stays (the audit log, usage history, requests under the team's name)."""
    namespaces = list(
        Namespace.objects.on_every_cluster()
        .filter(team=team)
        .select_related("cluster")
        .prefetch_related("quota_items", "limit_items")
    )
    return Offboarding(
        team=team,
        namespaces=namespaces,
        local_queues=list(
            LocalQueue.objects.filter(namespace__team=team).select_related(
                "namespace", "cluster_queue"
            )
        ),
        members=list(team.memberships.select_related("user")),
        audit_rows=AuditEvent.objects.filter(team=team).count(),
        usage_rows=Rollup.objects.on_every_cluster()
        .filter(kind=Sample.Kind.TEAM, owner=team.slug)
        .count(),
        deletions=[namespace_deletion(ns) for ns in namespaces],
        version=offboarding_version(team),
    )


@transaction.atomic
def offboard_team(*, actor: Actor, team_id: int, typed_slug: str, version: str, source: str) -> str:
    """Remove a team: its LocalQueues, namespaces (and what the portal applied in them) and
    memberships, then the team, each through its service, audited as one story; the audit
    log and usage history stay. Refused, changing nothing, unless the person typed the
    team's slug and the team is still the ``version`` the page showed (as a namespace's
    delete). Returns the story's request id."""
    require_platform_admin(actor)
    team = Team.objects.select_for_update().filter(pk=team_id).first()
    if team is None:
        raise ValidationError({"confirm_slug": ["This team was removed already."]})
    if typed_slug.strip() != team.slug:
        raise ValidationError(
            {"confirm_slug": [f"Type the team's slug, {team.slug}, to offboard it."]}
        )
    if version != offboarding_version(team):
        raise DomainError(
            "The team changed since this page was opened (its namespaces, quotas, limits, "
            "queues or members): read what offboarding does now and confirm again.",
            code="precondition_failed",
        )
    with _story() as story:
        for lq in LocalQueue.objects.filter(namespace__team=team).select_related("namespace"):
            delete_queue_object(actor=actor, obj=lq, source=source)
        for ns in Namespace.objects.on_every_cluster().filter(team=team):
            delete_namespace(actor=actor, namespace=ns, source=source)
        for membership in team.memberships.all():
            delete_tenant_object(actor=actor, obj=membership, source=source)
        delete_tenant_object(actor=actor, obj=team, source=source)
    return story
