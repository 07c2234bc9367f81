"""The fleet page: nodes by pool with GPU capacity and MIG layout, drift, sync status."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet import selectors
from fleet.changes import fleet_facts
from fleet.impact import flavor_shortfalls
from fleet.models import NodePool

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
