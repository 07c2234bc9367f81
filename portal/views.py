"""Portal-wide pages."""

from __future__ import annotations

from collections import defaultdict

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from fleet.explain import explain_pod, explain_workload
from fleet.selectors import explainer_view, last_sync, waiting_in_namespaces
from tenants.models import QuotaChangeRequest
from tenants.selectors import list_teams_for_user


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The signed-in user's teams: quotas, limits, queues, and what waits and why."""
    teams = list(list_teams_for_user(request.user))
    namespaces = [ns for team in teams for ns in team.namespaces.all()]
    workloads, pods = waiting_in_namespaces([ns.name for ns in namespaces])
    if workloads or pods:
        view = explainer_view()
        for pod in pods:
            pod.why = explain_pod(
                namespace=pod.namespace,
                name=pod.name,
                requests=pod.gpu_requests,  # type: ignore[attr-defined]
                message=pod.pending_message,
                fleet=view,
            )
        for workload in workloads:
            if not workload.admitted:
                workload.why = explain_workload(  # type: ignore[attr-defined]
                    namespace=workload.namespace,
                    name=workload.name,
                    queue=workload.queue_name,
                    reason=workload.reason,
                    message=workload.message,
                )
    by_namespace: dict[str, dict[str, list[object]]] = defaultdict(
        lambda: {"workloads": [], "pods": []}
    )
    for workload in workloads:
        by_namespace[workload.namespace]["workloads"].append(workload)
    for pod in pods:
        by_namespace[pod.namespace]["pods"].append(pod)
    for ns in namespaces:
        ns.observed = by_namespace[ns.name]  # type: ignore[attr-defined]
    grants = defaultdict(list)
    for grant in (
        QuotaChangeRequest.objects.filter(
            team__in=teams, state=QuotaChangeRequest.State.APPROVED, grant_until__isnull=False
        )
        .select_related("namespace", "cluster_queue")
        .order_by("grant_until")
    ):
        grants[grant.team_id].append(grant)
    for team in teams:
        team.grants = grants[team.pk]  # type: ignore[attr-defined]
    return render(request, "portal/home.html", {"teams": teams, "sync": last_sync()})


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})
