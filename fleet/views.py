"""The fleet page: nodes by pool with GPU capacity and MIG layout, drift, sync status."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet import selectors
from fleet.changes import fleet_facts
from fleet.impact import flavor_shortfalls
from fleet.models import NodePool, ObservedNode

NODES_PER_POOL = 100  # the overview; one pool (?pool=) or a search shows up to MAX_NODES
MAX_NODES = 2000


@login_required
def fleet(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()[:253]
    pool = request.GET.get("pool", "").strip()[:100]
    focused = bool(search or pool)
    context = {
        "pools": selectors.fleet_by_pool(
            search=search, pool=pool, cap=MAX_NODES if focused else NODES_PER_POOL
        ),
        "search": search,
        "pool": pool,
        "focused": focused,
        "pool_names": [*NodePool.objects.order_by("name").values_list("name", flat=True)],
        "drift": list(selectors.open_drift()),
        "sync": selectors.last_sync(),
        "problems": list(selectors.apply_problems()),
        "shortfalls": flavor_shortfalls(fleet_facts()),
    }
    template = "fleet/fleet.html#fleet-body" if request.htmx else "fleet/fleet.html"
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response


@login_required
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    """One node: its GPUs drawn and measured, what needs attention, its pods (your teams'
    by name, others counted), and its history of changes and drift."""
    from django.shortcuts import get_object_or_404

    from fleet import changes as change_service
    from fleet.models import Drift, ObservedPod
    from portal.permissions import is_approver, is_platform_admin
    from tenants.models import Namespace

    node = get_object_or_404(ObservedNode, name=name)
    selectors.attach_health([node])
    pool = next((p for p in NodePool.objects.order_by("name") if p.selects(node.labels)), None)
    sees_all = is_platform_admin(request.user) or is_approver(request.user)
    mine = set(
        Namespace.objects.filter(team__memberships__user_id=request.user.pk).values_list(
            "name", flat=True
        )
    )
    pods = list(ObservedPod.objects.filter(node_name=name).order_by("namespace", "name"))
    shown = [p for p in pods if sees_all or p.namespace in mine]
    history = list(
        change_service.list_mig_changes_for_user(request.user)
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
        "may_request": change_service.teams_user_may_request_for(request.user).exists(),
        "sees_all": sees_all,
        "visible_namespaces": mine,
        "gpu_labels": sorted((k, v) for k, v in node.labels.items() if k.startswith("nvidia.com/")),
    }
    return render(request, "fleet/node_detail.html", context)


@login_required
def troubleshooting(request: HttpRequest) -> HttpResponse:
    """The fault table: symptoms, root causes, how to check, what the portal does."""
    from fleet.knowledge import by_layer

    return render(request, "fleet/troubleshooting.html", {"layers": by_layer()})


@login_required
def operator_check(request: HttpRequest) -> HttpResponse:
    """The GPU Operator post-install checklist, read live from the cluster."""
    from django.conf import settings

    from fleet.operator_check import check_gpu_operator
    from kube import KubeError
    from portal.gateway import get_gateway

    try:
        items = check_gpu_operator(get_gateway(), namespace=settings.QM_GPU_OPERATOR_NAMESPACE)
        error = ""
    except KubeError as exc:
        items, error = [], exc.message
    return render(
        request,
        "fleet/operator_check.html",
        {"items": items, "error": error, "namespace": settings.QM_GPU_OPERATOR_NAMESPACE},
    )
