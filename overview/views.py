"""The pages that show the loop's two sides together: a team's home (quotas, limits, queues,
and what waits and why), the fleet (nodes by pool, their GPUs, health, drift and the last
poll), one node, and the queues (quotas next to what Kueue reports in use)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from changes.approval import may_request, teams_user_may_request_for
from changes.facts import shortfalls_now
from changes.models import OPEN_STATES, MigChangeRequest, QuotaChangeRequest
from changes.selectors import list_mig_changes_for_user
from cluster.models import Drift, ObservedNode, ObservedObject, ObservedPod
from cluster.selectors import api_status, apply_notices, open_drift
from diagnostics.selectors import explain_waiting
from fleet.models import NodePool
from health.selectors import attach_health
from overview import selectors
from overview.forms import NodeSearchForm
from portal.htmx import HtmxHttpRequest
from portal.permissions import is_platform_admin, sees_every_team, user_id
from portal.quantity import QuantityError, parse_quantity
from portal.selectors import pod_names_for
from queues.models import ClusterQueue, Cohort, LocalQueue
from queues.selectors import quota_rows
from tenants.models import PriorityClass, Team
from tenants.selectors import list_teams_for_user

NODES_PAGE = 50  # nodes on a page of a pool's list
DRIFT_SHOWN = 20  # drift rows on the Fleet page (the rest: counted, and first in the lists)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The signed-in user's teams: quotas, limits, queues, and what waits and why."""
    leads = teams_user_may_request_for(request.user).filter(pk=OuterRef("pk"))
    teams = list(list_teams_for_user(request.user).annotate(may_ask=Exists(leads)))
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
    for team in teams:
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


def _changes_hitting(teams: Sequence[Team]) -> dict[int, list[MigChangeRequest]]:
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
    """The fleet: each pool summed up (capacity and allocation per GPU resource, the MIG
    layouts in use, the nodes needing attention, drift and health), what the cluster did not
    take, and queues promising more than it has. Each pool's nodes open on demand
    (``fleet_nodes``). The same queries for 40 nodes or 5,000."""
    if request.GET.get("q") or request.GET.get("pool"):  # the node search's old address
        return redirect(f"{reverse('fleet-nodes')}?{request.GET.urlencode()}")
    api = api_status()
    problems, warned = apply_notices()
    drift = list(open_drift()[:DRIFT_SHOWN])
    pools = selectors.Pools.load()
    context = {
        "pools": bool(pools.rows) or ObservedNode.objects.filter(gone_since__isnull=True).exists(),
        "pool_cards": _pool_cards(pools),
        "drift": drift,
        "drift_total": open_drift().count() if len(drift) == DRIFT_SHOWN else len(drift),
        "api": api,
        "sync": api.latest,
        "problems": problems,
        "warned": warned,
        "shortfalls": shortfalls_now(),
        "form": NodeSearchForm(pools=pools),
    }
    template = "overview/fleet.html#fleet-body" if request.htmx else "overview/fleet.html"
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response


_CARDS: dict[str, Any] = {}  # this process's pool cards, and what they were summed from


def _pool_cards(pools: selectors.Pools) -> SafeString:
    """The pools summed up, as the Fleet page shows them: summed and drawn again only when
    the nodes, their health or the pools changed since this process last did (one small
    query tells; the poll and the health collection change them every minute or so, the
    pages are read far more often)."""
    version = selectors.summed_from(pools)
    if _CARDS.get("version") != version:
        summaries = selectors.sum_pools(pools)
        _CARDS["html"] = render_to_string("overview/fleet.html#pool-cards", {"pools": summaries})
        _CARDS["version"] = version
    return mark_safe(_CARDS["html"])


@login_required
def fleet_nodes(request: HtmxHttpRequest) -> HttpResponse:
    """Nodes of one pool (or of the whole fleet) found by name or label, NODES_PAGE at a
    time, those needing attention first; htmx gets the list alone (the Fleet page opens a
    pool's list in place)."""
    pools = selectors.Pools.load()
    form = NodeSearchForm(request.GET, pools=pools)
    valid = form.is_valid()
    index = form.pool_index() if valid else None
    found = (
        selectors.fleet_nodes(pools, pool=index, **form.cleaned_data["q"])
        if valid
        else ObservedNode.objects.none()
    )
    page = Paginator(found, NODES_PAGE).get_page(request.GET.get("page"))
    nodes = list(page.object_list)
    attach_health(nodes)
    for node in nodes:
        node.pool_name = pools.name_of(node.pool_index)  # type: ignore[attr-defined]
        node.intended = (  # type: ignore[attr-defined]
            pools.rows[node.pool_index].mig_config if node.pool_index >= 0 else ""  # type: ignore[attr-defined]
        )
    chosen = form.cleaned_data.get("pool", "") if valid else ""
    if index is None:
        list_id = "fleet-node-list"
    else:
        list_id = f"pool-{pools.rows[index].pk if index >= 0 else 'none'}-node-list"
    context = {
        "form": form,
        "page": page,
        "nodes": nodes,
        "pool": chosen,
        "pool_pk": pools.rows[index].pk if index is not None and index >= 0 else None,
        "list_id": list_id,
        "query": urlencode(
            {k: request.GET.get(k, "") for k in ("q", "pool") if request.GET.get(k)}
        ),
    }
    template = (
        "overview/fleet_nodes.html#node-list" if request.htmx else "overview/fleet_nodes.html"
    )
    response = render(request, template, context, status=200 if valid else 400)
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
    """ClusterQueues by cohort with their quotas and use, LocalQueues of your teams (every
    team's for approvers and admins), and the PriorityClass catalog."""
    statuses = {
        o.name: o.status
        for o in ObservedObject.objects.filter(kind="ClusterQueue").only("name", "status")
    }
    cohorts = {c.pk: c for c in Cohort.objects.all()}
    by_cohort: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for cq in ClusterQueue.objects.order_by("name"):
        status = statuses.get(cq.name, {})
        by_cohort[cohorts[cq.cohort_id].name if cq.cohort_id else ""].append(
            {
                "cq": cq,
                "rows": quota_rows(cq, status),
                "pending": status.get("pendingWorkloads"),
                "admitted": status.get("admittedWorkloads"),
            }
        )
    parents = {c.name: cohorts[c.parent_id].name for c in cohorts.values() if c.parent_id}
    local_queues = LocalQueue.objects.select_related("namespace__team", "cluster_queue").order_by(
        "namespace__team__slug", "namespace__name", "name"
    )
    if not sees_every_team(request.user):
        local_queues = local_queues.filter(
            namespace__team__memberships__user_id=user_id(request.user)
        )
    return render(
        request,
        "overview/queues.html",
        {
            "cohorts": [
                (name, parents.get(name, ""), entries)
                for name, entries in sorted(by_cohort.items(), key=lambda i: (i[0] == "", i[0]))
            ],
            "local_queues": list(local_queues),
            "priority_classes": PriorityClass.objects.prefetch_related("teams").order_by("-value"),
            "is_admin": is_platform_admin(request.user),
        },
    )
