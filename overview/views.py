"""The pages that show the loop's two sides together (a team's home is overview.home): the
fleet (nodes by pool, their GPUs, health, drift and the last poll), one node, and the queues
(quotas next to what Kueue reports in use)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from changes.approval import may_request
from changes.facts import shortfalls_now
from changes.selectors import list_mig_changes_for_user
from cluster.models import Drift, ObservedNode, ObservedObject, ObservedPod, ObservedWorkload
from cluster.selectors import api_status, apply_notices, first_in_line, open_drift
from fleet.models import NodePool
from health.selectors import attach_health
from overview import selectors
from overview.forms import NodeSearchForm
from portal.htmx import HtmxHttpRequest
from portal.permissions import is_platform_admin, sees_every_team, user_id
from portal.selectors import pod_names_for
from queues import fairness
from queues.models import ClusterQueue, Cohort, LocalQueue
from queues.selectors import quota_rows
from tenants.models import Namespace, PriorityClass

NODES_PAGE = 50  # nodes on a page of a pool's list
DRIFT_SHOWN = 20  # drift rows on the Fleet page (the rest: counted, and first in the lists)


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
            "sees_all": sees_every_team(request.user),
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
