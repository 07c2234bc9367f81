"""The pages that show the loop's two sides together: a team's home (quotas, limits, queues,
and what waits and why), the fleet (nodes by pool, their GPUs, health, drift and the last
poll), one node, and the queues (quotas next to what Kueue reports in use)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from changes.approval import may_request, teams_user_may_request_for
from changes.facts import fleet_facts
from changes.impact import flavor_shortfalls
from changes.models import OPEN_STATES, MigChangeRequest, QuotaChangeRequest
from changes.selectors import list_mig_changes_for_user
from cluster.models import Drift, ObservedNode, ObservedObject, ObservedPod, ObservedWorkload
from cluster.selectors import api_status, apply_notices, first_in_line, open_drift
from diagnostics.selectors import explain_waiting
from fleet.models import NodePool
from health.selectors import attach_health
from overview import selectors
from portal.htmx import HtmxHttpRequest
from portal.permissions import is_platform_admin, sees_every_team, user_id
from portal.quantity import QuantityError, parse_quantity
from portal.selectors import pod_names_for
from queues import fairness
from queues.models import ClusterQueue, Cohort, LocalQueue
from queues.selectors import quota_rows
from tenants.models import Namespace, PriorityClass, Team
from tenants.selectors import list_teams_for_user

NODES_PER_POOL = 100  # the overview; one pool (?pool=) or a search shows up to MAX_NODES
MAX_NODES = 2000


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The signed-in user's teams: quotas, limits, queues, and what waits and why."""
    teams = list(list_teams_for_user(request.user))
    namespaces = [ns for team in teams for ns in team.namespaces.all()]
    workloads, pods, failures = explain_waiting([ns.name for ns in namespaces])
    by_namespace: dict[str, dict[str, list[object]]] = defaultdict(
        lambda: {"workloads": [], "pods": [], "failures": []}
    )
    for failure in failures:
        by_namespace[failure.namespace]["failures"].append(failure)
    for workload in workloads:
        by_namespace[workload.namespace]["workloads"].append(workload)
    for pod in pods:
        by_namespace[pod.namespace]["pods"].append(pod)
    for ns in namespaces:
        ns.observed = by_namespace[ns.name]  # type: ignore[attr-defined]
    _quota_use(namespaces)
    grants = defaultdict(list)
    for grant in (
        QuotaChangeRequest.objects.filter(
            team__in=teams, state=QuotaChangeRequest.State.APPROVED, grant_until__isnull=False
        )
        # a grant whose namespace or queue was deleted grants nothing any more
        .exclude(kind=QuotaChangeRequest.Kind.NAMESPACE, namespace__isnull=True)
        .exclude(kind=QuotaChangeRequest.Kind.QUEUE, cluster_queue__isnull=True)
        .select_related("namespace", "cluster_queue")
        .order_by("grant_until")
    ):
        grants[grant.team_id].append(grant)
    hits = _changes_hitting(teams)
    asking = set(teams_user_may_request_for(request.user).values_list("pk", flat=True))
    for team in teams:
        team.may_ask = team.pk in asking  # type: ignore[attr-defined]
        team.grants = grants[team.pk]  # type: ignore[attr-defined]
        team.hits = hits[team.pk]  # type: ignore[attr-defined]
    api = api_status()
    return render(request, "overview/home.html", {"teams": teams, "sync": api.latest, "api": api})


def _quota_use(namespaces: list[Any]) -> None:
    """Each quota item's use as the cluster counts it (the ResourceQuota's ``status.used``,
    from the last poll; one query for every namespace): ``item.used`` is None when the
    cluster has not counted it yet, ``item.fill`` the bar's share (at most 100) and
    ``item.over`` whether the use is above the hard limit (a quota lowered under its use)."""
    seen = {
        (o.namespace, o.name): (o.status or {}).get("used") or {}
        for o in ObservedObject.objects.filter(
            kind="ResourceQuota", namespace__in=[ns.name for ns in namespaces]
        ).only("namespace", "name", "status")
    }
    for ns in namespaces:
        used = seen.get((ns.name, ns.quota_name))
        for item in ns.quota_items.all():
            item.used = None if used is None else used.get(item.resource, "0")
            item.fill, item.over = 0, False
            try:
                amount, hard = parse_quantity(item.used or "0"), parse_quantity(item.hard)
            except QuantityError:
                continue
            item.fill = 100 if hard <= 0 else min(100, round(100 * amount / hard))
            item.over = amount > hard


def _changes_hitting(teams: list[Team]) -> dict[int, list[MigChangeRequest]]:
    """Per team, the MIG changes and drains of other teams that hit it (its pods evicted,
    its quotas' backing taken): open ones, and those that ran and ended in the last three
    days (a rejected or cancelled one changed nothing)."""
    recent = timezone.now() - dt.timedelta(days=3)
    hits: dict[int, list[MigChangeRequest]] = defaultdict(list)
    rows = (
        MigChangeRequest.teams_hit.through.objects.filter(team__in=teams)
        .filter(
            Q(migchangerequest__state__in=OPEN_STATES) | Q(migchangerequest__updated_at__gte=recent)
        )
        .exclude(migchangerequest__state__in=["rejected", "cancelled"])
        .select_related("migchangerequest__team", "team")
        .order_by("-migchangerequest__created_at")
    )
    for row in rows:
        change = row.migchangerequest
        if change.team_id != row.team_id:
            change.pods_of_team = sum(  # type: ignore[attr-defined]
                1 for e in change.assessment.get("evictions", []) if e.get("team") == row.team.slug
            )
            hits[row.team_id].append(change)
    return hits


@login_required
def fleet(request: HtmxHttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()[:253]
    pool = request.GET.get("pool", "").strip()[:100]
    focused = bool(search or pool)
    api = api_status()
    problems, warned = apply_notices()
    context = {
        "pools": selectors.fleet_by_pool(
            search=search, pool=pool, cap=MAX_NODES if focused else NODES_PER_POOL
        ),
        "search": search,
        "pool": pool,
        "focused": focused,
        "pool_names": [*NodePool.objects.order_by("name").values_list("name", flat=True)],
        "drift": list(open_drift()),
        "api": api,
        "sync": api.latest,
        "problems": problems,
        "warned": warned,
        "shortfalls": flavor_shortfalls(fleet_facts()),
    }
    template = "overview/fleet.html#fleet-body" if request.htmx else "overview/fleet.html"
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response


@login_required
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    """One node: its GPUs drawn and measured, what needs attention, its pods (your teams'
    by name, others counted), and its history of changes and drift."""
    node = get_object_or_404(ObservedNode, name=name)
    attach_health([node])
    pool = next((p for p in NodePool.objects.order_by("name") if p.selects(node.labels)), None)
    names = pod_names_for(request.user)
    pods = list(ObservedPod.objects.filter(node_name=name).order_by("namespace", "name"))
    shown = [p for p in pods if names.named(p.namespace)]
    history = list(
        list_mig_changes_for_user(request.user)
        .filter(nodes__contains=[name])
        .order_by("-created_at")[:20]
    )
    drift = list(Drift.objects.filter(subject=name).order_by("-first_seen")[:20])
    context = {
        "node": node,
        "pool": pool,
        "pods": shown,
        "hidden_pods": len(pods) - len(shown),
        "history": history,
        "drift": drift,
        "may_request": may_request(request.user),
        "sees_all": names.everyone,
        "visible_namespaces": names.namespaces,
        "gpu_labels": sorted((k, v) for k, v in node.labels.items() if k.startswith("nvidia.com/")),
    }
    return render(request, "overview/node_detail.html", context)


@login_required
def queues(request: HttpRequest) -> HttpResponse:
    """ClusterQueues by cohort (a tree when cohorts nest) with their quotas and use, what
    each lends, cohort totals, fair-sharing weights and Kueue's shares, the first waiting
    workloads of each queue (another team's unnamed), LocalQueues of your teams (every
    team's for approvers and admins), and the PriorityClass catalog."""
    statuses: dict[tuple[str, str], Any] = {}
    local: dict[tuple[str, str], Any] = {}  # a LocalQueue's status, by (namespace, name)
    for o in ObservedObject.objects.filter(kind__in=["ClusterQueue", "Cohort", "LocalQueue"]).only(
        "kind", "namespace", "name", "status"
    ):
        if o.kind == "LocalQueue":
            local[(o.namespace, o.name)] = o.status
        else:
            statuses[(o.kind, o.name)] = o.status
    cohorts: dict[int | None, Cohort] = {c.pk: c for c in Cohort.objects.all()}
    cqs = list(ClusterQueue.objects.order_by("name"))
    facts = [_facts(cq, cohorts.get(cq.cohort_id), statuses) for cq in cqs]
    lent = {f.name: fairness.queue_rows(f) for f in facts}
    roots = fairness.cohort_tree(
        [_facts(c, cohorts.get(c.parent_id), statuses) for c in cohorts.values()], facts, lent
    )
    in_line = first_in_line(PENDING_SHOWN)
    mine = _my_namespaces(request.user)
    entries = {
        cq.name: _queue_entry(cq, fact, lent[cq.name], in_line.get(cq.name, []), mine)
        for cq, fact in zip(cqs, facts, strict=True)
    }
    sections = [(node, [entries[name] for name in node.queues]) for node in fairness.walk(roots)]
    alone = [entries[f.name] for f in facts if not f.parent]
    return render(
        request,
        "overview/queues.html",
        {
            "sections": sections,
            "alone": alone,
            "roots": roots,
            "nested": any(root.children for root in roots),
            "fair_sharing": any("fairSharing" in status for status in statuses.values()),
            "shown": PENDING_SHOWN,
            "local_queues": _local_queues(request.user, local),
            "priority_classes": PriorityClass.objects.prefetch_related("teams").order_by("-value"),
            "is_admin": is_platform_admin(request.user),
        },
    )


PENDING_SHOWN = 3  # waiting workloads named per ClusterQueue on the Queues page


def _facts(
    obj: ClusterQueue | Cohort, parent: Cohort | None, statuses: dict[tuple[str, str], Any]
) -> fairness.Facts:
    """A queue (``parent``: its cohort) or a cohort with the status the poll saw of it."""
    return fairness.Facts(
        obj.name,
        parent.name if parent else "",
        obj.fair_sharing_weight,
        obj.resource_groups,
        statuses.get((type(obj).__name__, obj.name), {}),
    )


def _my_namespaces(user: Any) -> set[str] | None:
    """The namespaces whose workloads the user may see by name (None: every one)."""
    if sees_every_team(user):
        return None
    return set(
        Namespace.objects.filter(team__memberships__user_id=user_id(user)).values_list(
            "name", flat=True
        )
    )


def _queue_entry(
    cq: ClusterQueue,
    fact: fairness.Facts,
    rows: list[fairness.Row],
    waiting: list[ObservedWorkload],
    mine: set[str] | None,
) -> dict[str, Any]:
    status = fact.status
    quota = quota_rows(cq, dict(status))
    for row, lends in zip(quota, rows, strict=True):
        row["lent"] = lends.lent
    for workload in waiting:
        workload.shown = mine is None or workload.namespace in mine  # type: ignore[attr-defined]
    return {
        "cq": cq,
        "rows": quota,
        "share": fairness.share_of(cq.fair_sharing_weight, status),
        "pending": status.get("pendingWorkloads"),
        "admitted": status.get("admittedWorkloads"),
        "waiting": waiting,
        "waiting_count": waiting[0].waiting_in_queue if waiting else 0,  # type: ignore[attr-defined]
    }


def _local_queues(user: Any, statuses: dict[tuple[str, str], Any]) -> list[LocalQueue]:
    """The user's teams' LocalQueues (every team's for approvers and admins), each with
    ``observed``: Kueue's status of it from the last poll ({} before)."""
    local_queues = LocalQueue.objects.select_related("namespace__team", "cluster_queue").order_by(
        "namespace__team__slug", "namespace__name", "name"
    )
    if not sees_every_team(user):
        local_queues = local_queues.filter(namespace__team__memberships__user_id=user_id(user))
    out = list(local_queues)
    for lq in out:
        lq.observed = statuses.get((lq.namespace.name, lq.name), {})  # type: ignore[attr-defined]
    return out
