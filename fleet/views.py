"""The fleet page: nodes by pool with GPU capacity and MIG layout, drift, sync status."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet import selectors
from fleet.changes import fleet_facts
from fleet.impact import flavor_shortfalls


@login_required
def fleet(request: HttpRequest) -> HttpResponse:
    context = {
        "pools": selectors.fleet_by_pool(),
        "drift": list(selectors.open_drift()),
        "sync": selectors.last_sync(),
        "problems": list(selectors.apply_problems()),
        "shortfalls": flavor_shortfalls(fleet_facts()),
    }
    template = "fleet/fleet.html#fleet-body" if request.htmx else "fleet/fleet.html"
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response
