"""Portal-wide pages."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from tenants.selectors import list_teams_for_user


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The signed-in user's teams, their namespaces, quotas and queues at a glance."""
    return render(request, "portal/home.html", {"teams": list_teams_for_user(request.user)})


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})
