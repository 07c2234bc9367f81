"""The Workloads pages: every Kueue Workload the user may see, filtered and found (50 a
page, the newest first), and one workload's page: its state and story, why it waits and
when it could start, its pods, the GPU-hours it used and what the poll kept of it."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from cluster.scope import cluster_choice
from diagnostics.selectors import shown_for
from overview.filters import WorkloadFilter
from overview.workload_rows import workload_rows
from overview.workloads import (
    STATE_ALIASES,
    STATE_MEANS,
    STATES,
    as_yaml,
    events_of,
    named,
    newest_first,
    page_of,
    pods_of,
    reason_words,
    story,
    visible_workloads,
)
from portal.access.permissions import sees_every_team
from portal.access.selectors import pod_names_for, teams_seen_by
from portal.infra.htmx import HtmxHttpRequest
from portal.infra.round_trips import page_together
from usage.runs import gpu_hours

WORKLOADS_PAGE = 50
TEAMS_SUGGESTED = 50
LIVE_SECONDS = 15  # how often an open workload's page asks for its live part again


@login_required
def workloads(request: HttpRequest) -> HttpResponse:
    """Every workload the user may see (their teams' namespaces'; every one for approvers
    and platform admins) on the chosen cluster or every cluster, filtered by team,
    namespace, queue, state and priority, found by name, 50 a page, the newest first. Two
    round trips besides the session's, whatever the number of workloads: the clusters, and
    the count with the page."""
    choice = cluster_choice(request)
    sees_all = sees_every_team(request.user)
    data = request.GET.copy()
    data.pop("page", None)
    data.pop("cluster", None)  # the cluster is the pages' choice (kept in the session)
    if choice.chosen is not None:
        data["cluster"] = choice.chosen.name
    rows = visible_workloads(request.user, [c.pk for c in choice.clusters]).only("pk")
    shown = WorkloadFilter(data, queryset=rows, request=request)
    errors = {name: str(messages[0]) for name, messages in shown.errors.items()}
    found = newest_first(shown.qs) if not errors else rows.none()
    page = page_together(found, WORKLOADS_PAGE, request.GET.get("page"), rows=page_of)
    clusters = {c.pk: c for c in choice.clusters}
    for workload in page.object_list:
        workload.of_cluster = clusters[workload.cluster_id]
    filters = {
        key: request.GET.get(key, "").strip()
        for key in WorkloadFilter.base_filters
        if key != "cluster"
    }
    filters["state"] = STATE_ALIASES.get(filters["state"], filters["state"])  # Kueue's words
    context = {
        "page": page,
        "workloads": page.object_list,
        "rows": workload_rows(
            list(page.object_list), cluster_column=choice.chosen is None and choice.several
        ),
        "filters": filters,
        "errors": errors,
        "states": STATES,
        # the teams to suggest: a person's own few (every team of a thousand is a page's
        # worth of options: who sees them all types the slug)
        "teams": []
        if sees_all
        else list(teams_seen_by(request.user).only("slug")[:TEAMS_SUGGESTED]),
        "sees_all": sees_all,
        "cluster_column": choice.chosen is None and choice.several,
        "filtered": any(filters.values()),
    }
    return render(request, "overview/workloads.html", context, status=400 if errors else 200)


def workload_of(request: HttpRequest, cluster: str, namespace: str, name: str) -> Any:
    """The workload at this address, if the user may see it: another team's, one of a
    cluster the user may not see, and none at all are the same 404."""
    seen = [c for c in cluster_choice(request).clusters if c.name == cluster]
    found = (
        named(visible_workloads(request.user, [c.pk for c in seen]))
        .filter(namespace=namespace, name=name)
        .first()
        if seen
        else None
    )
    if found is None:
        raise Http404("There is no workload at this address that you may see.")
    found.of_cluster = seen[0]
    return found


@login_required
def workload_detail(
    request: HtmxHttpRequest, cluster: str, namespace: str, name: str
) -> HttpResponse:
    """One workload: its state in words, its story from Kueue's events and conditions, its
    place in line and estimated wait while it waits, why it waits (the explainer's words,
    redacted for the viewer), its pods with their nodes and GPUs, the GPU-hours it used,
    and what the poll kept of it as YAML; the live part asked for again every LIVE_SECONDS
    while open."""
    workload = workload_of(request, cluster, namespace, name)
    names = pod_names_for(request.user)
    shown_for(workload, names)
    now = timezone.now()
    context = {
        "w": workload,
        "cluster": workload.of_cluster,
        "several": cluster_choice(request).several,
        "means": STATE_MEANS[workload.state],
        "evicted_because": reason_words(workload.evicted_reason),
        "story": story(workload, events_of(workload), names),
        "pods": pods_of(workload),
        "gpu_hours": gpu_hours(
            cluster_id=workload.cluster_id,
            namespace=workload.namespace,
            name=workload.name,
            created_at=workload.created_at,
            now=now,
        ),
        "yaml": as_yaml(workload, workload.of_cluster.name),
        "live_seconds": LIVE_SECONDS,
        "now": now,
    }
    template = (
        "overview/workload_detail.html#workload-live"
        if request.htmx
        else "overview/workload_detail.html"
    )
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response
