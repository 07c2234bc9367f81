"""The Planner page: demand against capacity per resource, the proposed config of each node
with what it offers before and after, the pods it evicts and the ClusterQueue nominal
changes that follow; platform admins turn the plan into MIG change requests (team leads
read it; approvers too)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from changes.planning import make_plan, may_see_planner, plan_for, request_planned_changes
from cluster.scope import cluster_choice
from portal.access.permissions import is_platform_admin
from portal.vocabulary.errors import DomainError, user_message
from tenants.models import Team


@login_required
def planner(request: HttpRequest) -> HttpResponse:
    """GET: the chosen cluster's plan (one cluster at a time: with "all clusters" chosen,
    the page asks which). POST (platform admins): ask for its MIG changes."""
    if not may_see_planner(request.user):
        raise PermissionDenied("The planner is for platform admins, approvers and team leads.")
    choice = cluster_choice(request)
    cluster = choice.chosen
    if request.method == "POST":
        named = request.POST.get("cluster", "")
        cluster = next((c for c in choice.clusters if c.name == named), cluster)
    if cluster is None:
        return render(request, "overview/planner.html", {"choose": choice.clusters})
    admin = is_platform_admin(request.user)
    errors: dict[str, list[str]] = {}
    refusal = ""
    status = 200
    if request.method == "POST":
        team = Team.objects.filter(slug=request.POST.get("team", "")).first()
        try:
            created = request_planned_changes(
                actor=request.user,
                cluster=cluster,
                team=team,
                reason=request.POST.get("reason", ""),
                seen=request.POST.get("fingerprint", ""),
            )
        except ValidationError as exc:
            errors, status = exc.message_dict, 400
        except DomainError as exc:
            refusal, status = user_message(exc), 409
        else:
            ids = ", ".join(f"#{r.pk}" for r in created)
            messages.success(request, f"Requests {ids} are waiting for an approver.")
            return redirect("change-list")
    context = {
        "plan": plan_for(request.user, make_plan(cluster)),
        "cluster": cluster,
        "several": choice.several,
        "is_admin": admin,
        "teams": list(Team.objects.order_by("slug").values_list("slug", flat=True))
        if admin
        else [],
        "errors": errors,
        "refusal": refusal,
        "posted": request.POST if request.method == "POST" else {},
    }
    return render(request, "overview/planner.html", context, status=status)
