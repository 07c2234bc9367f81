"""The pages that show the loop's two sides together (a team's home is overview.home): the
fleet (nodes by pool, their GPUs, health, drift and the last poll), one node, and the queues
(quotas next to what Kueue reports in use)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from changes.approval import may_request
from changes.facts import fleet_facts
from changes.impact import flavor_shortfalls
from changes.selectors import list_mig_changes_for_user
from cluster.models import Drift, ObservedNode, ObservedObject, ObservedPod
from cluster.selectors import api_status, apply_notices, open_drift
from fleet.models import NodePool
from health.selectors import attach_health
from overview import selectors
from portal.htmx import HtmxHttpRequest
from portal.permissions import is_platform_admin, sees_every_team, user_id
from portal.selectors import pod_names_for
from queues.models import ClusterQueue, Cohort, LocalQueue
from queues.selectors import quota_rows
from tenants.models import PriorityClass

NODES_PER_POOL = 100  # the overview; one pool (?pool=) or a search shows up to MAX_NODES
MAX_NODES = 2000


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
