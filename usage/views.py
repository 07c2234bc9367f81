"""Usage reports in the portal (charts and tables) and as CSV; teams see their own teams'
usage, approvers and platform admins everything and the suggestions."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from cluster.scope import chosen_cluster
from portal.access.permissions import sees_every_team
from tenants.models import Team
from tenants.selectors import list_teams_for_user
from usage import charts, reports
from usage.exports import as_csv, cluster_named, report_rows
from usage.forms import DAYS, UsageFilterForm


def team_scope(user: Any) -> list[str] | None:
    """None: every team (approvers and admins); else the slugs of the user's teams."""
    if sees_every_team(user):
        return None
    return list(list_teams_for_user(user).values_list("slug", flat=True))


def requested_teams(user: Any, team: str) -> list[str] | None:
    """The user's scope (None: every team), narrowed to ``team`` (one team's page) within
    it; a team outside it, or none of that name, is a 404."""
    teams = team_scope(user)
    if not team:
        return teams
    if teams is not None and team not in teams:
        raise Http404("No such team among yours.")
    if teams is None and not Team.objects.filter(slug=team).exists():
        raise Http404("No such team.")
    return [team]


def _buckets(period: reports.Period, now: dt.datetime) -> list[charts.Bucket]:
    """The x axis: every day (or hour) of the period, the one still going marked."""
    out = []
    for start in period.buckets():
        if period.granularity == "hour":
            tick, name = f"{start:%H:%M}", f"{start.day} {start:%b}, {start:%H:%M} UTC"
        else:
            year = f" {start.year}" if start.year != now.year else ""
            tick, name = f"{start.day} {start:%b}", f"{start:%a} {start.day} {start:%b}{year}"
        partial = period.is_partial(start)
        if partial:
            upto = period.rolled_up_to
            today = start.date() == now.date()
            tick = "today" if today else tick
            day = "today" if today else "the day"
            if upto is None or upto <= start:
                name += f" ({day}: no hour rolled up yet)"
            else:
                name += f" ({day} so far: to {upto:%H:%M} UTC)"
        out.append(charts.Bucket(tick, name, partial))
    return out


def _averages(rows: Any) -> dict[str, float | None]:
    """A chart's headline: its averages over the hours its buckets cover."""
    hours = used = quota = 0.0
    for row in rows:
        hours += row["covered_hours"]
        used += row["average_used"] * row["covered_hours"]
        quota += row["quota"] * row["covered_hours"]
    if not hours:
        return {"average_used": None, "average_quota": None, "average_share": None}
    return {
        "average_used": used / hours,
        "average_quota": quota / hours or None,
        "average_share": used / quota if quota else None,
    }


def chart_links(days: int, team: str, resource: str) -> dict[str, str]:
    """One chart's data: its CSV, and the API's JSON of the same rows."""
    query = "?" + urlencode({"days": days, "team": team, "resource": resource})
    return {
        "csv": reverse("report-csv", args=["usage-over-time"]) + query,
        "json": reverse("report", args=["usage-over-time"]) + query + "&format=json",
    }


def usage_charts(
    period: reports.Period,
    teams: list[str],
    days: int,
    now: dt.datetime,
    cluster: Any | None = None,
) -> list[dict[str, Any]]:
    """Small multiples: one chart per team and GPU resource over every bucket of the
    period (one query for all of them); charts of one resource share their scale."""
    series: dict[tuple[str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in reports.usage_by_bucket(period, teams=teams, cluster=cluster):
        series[(row["team"], row["resource"])][row["start"]] = row
    peaks: dict[str, float] = defaultdict(float)
    for (_, resource), points in series.items():
        for row in points.values():
            peaks[resource] = max(peaks[resource], row["average_used"], row["quota"])
    buckets, starts = _buckets(period, now), [s.isoformat() for s in period.buckets()]
    out: list[dict[str, Any]] = []
    for team, resource in sorted(series, key=lambda k: (teams.index(k[0]), k[1])):
        points = series[(team, resource)]
        used = [points[s]["average_used"] if s in points else None for s in starts]
        quota = [points[s]["quota"] if s in points else None for s in starts]
        title = f"{team}: {resource} in use against the quota, {period.adjective} averages"
        lines = [("in use", used)] + ([("quota", quota)] if any(quota) else [])
        svg = charts.small_line_chart(
            title,
            buckets,
            lines,
            what=f"{period.adjective.capitalize()} averages",
            peak=peaks[resource],
        )
        out.append(
            {
                "team": team,
                "resource": resource,
                **_averages(points.values()),
                "svg": mark_safe(svg),
                **chart_links(days, team, resource),
            }
        )
    return out


def _wait_chart(waits: list[dict[str, Any]]) -> str:
    if not waits:
        return ""
    return charts.bar_chart(
        "Wait before admission per ClusterQueue (seconds)",
        [(w["cluster_queue"], [("p50", w["p50_s"]), ("p90", w["p90_s"])]) for w in waits],
        unit=" s",
    )


def _fleet_chart(idle: list[dict[str, Any]]) -> str:
    if not idle:
        return ""
    return charts.bar_chart(
        "Fleet: allocated against allocatable per pool and GPU resource (averages)",
        [
            (
                f"{r['pool']} {r['resource'].removeprefix('nvidia.com/')}",
                [("allocatable", r["average_allocatable"]), ("allocated", r["average_allocated"])],
            )
            for r in idle
        ],
    )


def _team_choices(request: HttpRequest) -> list[str]:
    """The teams the page can narrow to: the user's own, or every team for who sees all."""
    teams = team_scope(request.user)
    if teams is not None:
        return teams
    return list(Team.objects.order_by("slug").values_list("slug", flat=True))


def _refused(request: HttpRequest, form: UsageFilterForm) -> HttpResponse:
    """The page with the period and team as asked, each bad one marked, and nothing else."""
    context = {
        "form": form,
        "choices": DAYS,
        "days": None,
        "team": "",
        "sees_all": team_scope(request.user) is None,
        "team_choices": _team_choices(request),
    }
    return render(request, "usage/reports.html", context, status=400)


@login_required
def reports_page(request: HttpRequest) -> HttpResponse:
    """The dashboard: small multiples of use against quota, then the tables. A lead sees
    their teams' numbers (``?team=``: one of them); who sees every team can pick one."""
    form = UsageFilterForm(request.GET)
    if not form.is_valid():
        return _refused(request, form)
    days, team = form.cleaned_data["days"], form.cleaned_data["team"]
    now = timezone.now()
    period = reports.last_days(days, now=now)
    teams = requested_teams(request.user, team)
    cluster = chosen_cluster(request)  # None: summed over every cluster
    gpu_hours = reports.gpu_hours(period, teams=teams, cluster=cluster)
    # Charts for the user's teams, or (approvers, admins) the six that used the most.
    busiest = [r["team"] for r in sorted(gpu_hours, key=lambda r: -r["gpu_hours"])]
    chart_teams = (teams if teams is not None else busiest)[:6]
    waits = reports.wait_times(period, teams=teams, cluster=cluster)
    idle = reports.idle_capacity(period, cluster=cluster)
    since = reports.data_start(period, cluster=cluster)
    context = {
        "form": form,
        "days": days,
        "choices": DAYS,
        "period": period,
        "since": since if since and since > period.start else None,
        "gpu_hours": gpu_hours,
        "by_resource": reports.gpu_hours(period, by="resource", teams=teams, cluster=cluster),
        "by_queue": reports.gpu_hours(period, by="queue", cluster=cluster),
        "utilisation": reports.quota_utilisation(period, teams=teams, cluster=cluster),
        "waits": waits,
        "borrowing": reports.borrowing(period, cluster=cluster),
        "idle": idle,
        "usage_charts": usage_charts(period, chart_teams, days, now, cluster),
        "wait_chart": mark_safe(_wait_chart(waits)),
        "fleet_chart": mark_safe(_fleet_chart(idle)),
        "suggestions": reports.suggestions(period, teams=teams, since=since, cluster=cluster),
        "sees_all": teams is None,
        "team": team,
        "team_choices": _team_choices(request),
    }
    return render(request, "usage/reports.html", context)


@login_required
def report_csv(request: HttpRequest, name: str) -> HttpResponse:
    form = UsageFilterForm(request.GET)
    if not form.is_valid():
        refused = "; ".join(f"{f}: {' '.join(map(str, e))}" for f, e in form.errors.items())
        return HttpResponseBadRequest(refused, content_type="text/plain")
    period = reports.last_days(form.cleaned_data["days"])
    teams = requested_teams(request.user, form.cleaned_data["team"])
    try:
        cluster = cluster_named(request.GET.get("cluster", ""))
        rows = report_rows(name, period, teams, request.GET.get("resource", ""), cluster=cluster)
    except ValidationError as error:
        return HttpResponseBadRequest(" ".join(error.messages), content_type="text/plain")
    response = HttpResponse(as_csv(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="{name}-{period.start:%Y%m%d}-{period.end:%Y%m%d}.csv"'
    )
    return response
