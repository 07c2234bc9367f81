"""The approver's and platform admin's workspace: the decisions waiting for them, what was
decided or finished lately, changes that failed or are stuck, open drift and GPUs that need
attention, each linking to its page. Deciders land here after sign-in (team leads keep their
team's home); the navigation counts the decisions waiting on every page.

Every read is one query whatever the number of rows, so the page costs the same with ten
requests or ten thousand."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import CharField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Cast, Coalesce
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from changes.approval import User, may_decide
from changes.models import MigChangeRequest, MigChangeStep, QuotaChangeRequest
from cluster.models import Drift
from cluster.selectors import FirstRead, cluster_statuses, open_drift
from health.models import NodeHealth
from overview.selectors import pending_counts, pending_counts_from, pending_counts_read
from portal.access.permissions import user_id
from portal.audit.events import Event
from portal.infra.round_trips import Read
from portal.models import AuditEvent
from tenants.models import Membership

RECENT = dt.timedelta(days=7)  # outcomes and failures older than this are history
SHOWN = 10  # rows per list; the list's own page has the rest
LISTED = 25  # decisions waiting, per kind, the oldest first
MigState = MigChangeRequest.State
QuotaState = QuotaChangeRequest.State


def pending_mig_changes() -> QuerySet[MigChangeRequest]:
    return MigChangeRequest.objects.filter(state=MigState.PENDING)


def pending_quota_requests() -> QuerySet[QuotaChangeRequest]:
    return QuotaChangeRequest.objects.filter(state=QuotaState.PENDING)


class NavCounts:
    """What the navigation counts for the signed-in user, read only when a page shows it
    (an htmx fragment never does): the pending requests a decider decides (others') and
    their own (another approver decides those). One statement for every kind of request,
    sent with the page's first reads where the page makes them (``counts_first``)."""

    def __init__(self, user: User, request: HttpRequest | None = None) -> None:
        self.user = user
        self.request = request

    @cached_property
    def decider(self) -> bool:
        return may_decide(self.user)

    @cached_property
    def pending(self) -> dict[str, dict[str, int]]:
        """Per kind of request, the pending ones of others and the user's own: one query
        for both kinds (the navigation asks this on every page a decider opens), none when
        the page's first round trip brought them."""
        if not self.decider:
            return {kind: {"others": 0, "own": 0} for kind in ("mig", "quota", "policy")}
        kept = getattr(self.request, "_qm_pending", None)
        return kept if kept is not None else pending_counts(user_id(self.user))

    @property
    def waiting(self) -> int:
        return sum(row["others"] for row in self.pending.values())

    @property
    def own(self) -> int:
        return sum(row["own"] for row in self.pending.values())


def nav_counts(request: HttpRequest) -> dict[str, Any]:
    """Context processor: ``nav_counts`` for the base template."""
    return {"nav_counts": NavCounts(request.user, request)}


def _counts_read(request: HttpRequest) -> Read | None:
    """The navigation's counts, for a page's first round trip: for a signed-in user on a
    whole page (an htmx fragment draws no navigation), counted only if they decide (their
    roles come in the same round trip)."""
    user = request.user
    if not user.is_authenticated:
        return None
    if request.headers.get("HX-Request") and not request.headers.get("HX-Boosted"):
        return None
    return pending_counts_read(user_id(user), deciders_only=not user.is_superuser)


def _keep_counts(request: HttpRequest, rows: list[Any]) -> None:
    request._qm_pending = pending_counts_from(rows)  # type: ignore[attr-defined]


counts_first = FirstRead(_counts_read, _keep_counts)


def lands_on_workspace(user: User) -> bool:
    """Deciders land on the workspace; a decider who leads a team keeps the team's home."""
    if not may_decide(user):
        return False
    leads = Membership.objects.filter(user_id=user_id(user), role=Membership.Role.LEAD)
    return not leads.exists()


@login_required
def start(request: HttpRequest) -> HttpResponse:
    """Where a sign-in lands without a ``next``: the workspace or the team's home."""
    return redirect("workspace" if lands_on_workspace(request.user) else "home")


@dataclass
class Outcome:
    """A decided or finished request, MIG change and quota request alike; ``by``: who brought
    it to its state, in words, from the actor the audit recorded ("by admin", "aborted by
    admin", "approved by approver"; "" when no person did)."""

    kind: str  # "mig" or "quota"
    request: Any
    at: dt.datetime | None
    by: str = ""


@dataclass
class Workspace:
    to_decide_mig: list[MigChangeRequest] = field(default_factory=list)
    to_decide_quota: list[QuotaChangeRequest] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    failed: list[MigChangeRequest] = field(default_factory=list)
    stuck: list[MigChangeStep] = field(default_factory=list)
    drift: list[Drift] = field(default_factory=list)
    drift_total: int = 0
    unhealthy: list[NodeHealth] = field(default_factory=list)


def workspace_for(user: User, *, now: dt.datetime | None = None) -> Workspace:
    """What a decider looks at first (see the module's docstring): nine queries."""
    now = now or timezone.now()
    ws = Workspace()
    # 1. others' pending requests, the oldest first (the counts come from NavCounts)
    others = {"requested_by_id": user.pk}
    ws.to_decide_mig = list(
        pending_mig_changes()
        .exclude(**others)
        .select_related("team", "requested_by")
        .order_by("created_at")[:LISTED]
    )
    ws.to_decide_quota = list(
        pending_quota_requests()
        .exclude(**others)
        .select_related("team", "namespace", "cluster_queue", "requested_by")
        .order_by("created_at")[:LISTED]
    )
    # 2. recent outcomes of both kinds, newest first
    ws.outcomes = _outcomes(now - RECENT)
    # 3. failed changes, and steps running longer than a step should
    ws.failed = list(
        MigChangeRequest.objects.filter(state=MigState.FAILED, updated_at__gte=now - RECENT)
        .select_related("team")
        .order_by("-updated_at")[:SHOWN]
    )
    stuck_since = now - dt.timedelta(seconds=settings.QM_MIG_STUCK_SECONDS)
    ws.stuck = list(
        MigChangeStep.objects.filter(
            request__state__in=(MigState.RUNNING, MigState.ROLLING_BACK),
            status=MigChangeStep.Status.RUNNING,
            started_at__lt=stuck_since,
        )
        .select_related("request")
        .order_by("started_at")[:SHOWN]
    )
    # 4. open drift and GPUs needing attention, the worst first
    ws.drift = list(open_drift()[:SHOWN])
    ws.drift_total = open_drift().count()
    ws.unhealthy = sorted(
        NodeHealth.objects.filter(worst__in=("warning", "critical")).order_by("node"),
        key=lambda h: h.worst != "critical",
    )
    return ws


def _outcomes(since: dt.datetime) -> list[Outcome]:
    changes = (
        MigChangeRequest.objects.filter(
            state__in=(
                MigState.APPROVED,
                MigState.REJECTED,
                MigState.SUCCEEDED,
                MigState.FAILED,
                MigState.ROLLED_BACK,
            ),
            updated_at__gte=since,
        )
        .select_related("team", "decided_by")
        .annotate(
            rolled_back_by=_last_actor(Event.MIG_CHANGE_ROLLBACK),
            aborted_by=_last_actor(Event.MIG_CHANGE_ABORT_REQUESTED),
        )
        .order_by("-updated_at")[:SHOWN]
    )
    quotas = (
        QuotaChangeRequest.objects.exclude(state__in=(QuotaState.PENDING, QuotaState.CANCELLED))
        .annotate(at=Coalesce("decided_at", "created_at"))
        .filter(at__gte=since)
        .select_related("team", "namespace", "cluster_queue", "decided_by", "auto_rule")
        .order_by("-at")[:SHOWN]
    )
    rows = [Outcome("mig", c, c.updated_at, _mig_by(c)) for c in changes]
    rows += [Outcome("quota", q, q.at, _quota_by(q)) for q in quotas]  # type: ignore[attr-defined]
    rows.sort(key=lambda o: o.at or since, reverse=True)
    return rows[:SHOWN]


def _last_actor(event: Event) -> Subquery:
    """The name of whoever last did ``event`` to the outer MIG change, as the audit has it."""
    return Subquery(
        AuditEvent.objects.filter(
            event=event,
            target_type=MigChangeRequest._meta.label_lower,
            target_id=Cast(OuterRef("pk"), CharField()),
        )
        .order_by("-time", "-id")
        .values("actor_name")[:1]
    )


def _mig_by(change: Any) -> str:
    """Who brought a MIG change to its state: the rollback's actor for a rolled-back one,
    the abort's for an aborted one, the approver's for one that ran, the decider's."""
    decided = change.decided_by.get_username() if change.decided_by_id else ""
    if change.state == MigState.ROLLED_BACK:
        return f"by {change.rolled_back_by}" if change.rolled_back_by else ""
    if change.state == MigState.FAILED:
        return f"aborted by {change.aborted_by}" if change.aborted_by else ""
    if change.state == MigState.SUCCEEDED:
        return f"approved by {decided}" if decided else ""
    return f"by {decided}" if decided else ""


def _quota_by(change: Any) -> str:
    if change.rule_name:
        return f"by the rule “{change.rule_name}”"
    return f"by {change.decided_by.get_username()}" if change.decided_by_id else ""


def name_clusters(ws: Workspace, clusters: list[Any]) -> bool:
    """Each item's cluster as ``item.of_cluster`` when there are several (the page names
    it and links its cluster's pages then; with one cluster nothing is added), and whether
    there are. ``clusters``: every cluster, read once (no query per row)."""
    if len(clusters) < 2:
        return False
    by_pk = {c.pk: c for c in clusters}
    rows: list[Any] = [*ws.to_decide_mig, *ws.to_decide_quota, *ws.failed, *ws.drift]
    rows += [o.request for o in ws.outcomes] + [s.request for s in ws.stuck] + ws.unhealthy
    for row in rows:
        row.of_cluster = by_pk.get(row.cluster_id)
    return True


@login_required
def workspace(request: HttpRequest) -> HttpResponse:
    """The workspace page (approvers and platform admins)."""
    if not may_decide(request.user):
        raise PermissionDenied("The workspace is for approvers and platform admins.")
    counts = NavCounts(request.user, request)  # the page's and the navigation's numbers, read once
    statuses = cluster_statuses()  # the clusters the page names and the freshness shows
    ws = workspace_for(request.user)
    several = name_clusters(ws, [s.cluster for s in statuses])
    context = {
        "ws": ws,
        "nav_counts": counts,
        "counts": counts.pending,
        "cluster_statuses": statuses,
        "several": several,
    }
    return render(request, "overview/workspace.html", context)
