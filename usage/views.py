"""Usage reports in the portal (charts and tables) and as CSV; teams see their own teams'
usage, approvers and platform admins everything and the suggestions."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from portal.permissions import sees_every_team
from tenants.selectors import list_teams_for_user
from usage import charts, reports

DAYS = (1, 7, 30, 90)


def _days(request: HttpRequest) -> int:
    try:
        days = int(request.GET.get("days", "7"))
    except ValueError:
        days = 7
    return days if days in DAYS else 7


def team_scope(user: Any) -> list[str] | None:
    """None: every team (approvers and admins); else the slugs of the user's teams."""
    if sees_every_team(user):
        return None
    return list(list_teams_for_user(user).values_list("slug", flat=True))


def _requested_teams(request: HttpRequest) -> list[str] | None:
    """The user's scope, narrowed to ``?team=`` (one team's page) within it; 404 outside."""
    teams = team_scope(request.user)
    team = request.GET.get("team", "")
    if not team:
        return teams
    if teams is not None and team not in teams:
        raise Http404("No such team among yours.")
    return [team]


def report_rows(name: str, period: reports.Period, teams: list[str] | None) -> list[dict[str, Any]]:
    if name not in reports.REPORTS:
        raise Http404(f"No report {name!r}.")
    function: Any = reports.REPORTS[name]
    if name in reports.TEAM_SCOPED:
        return list(function(period, teams=teams))
    return list(function(period))


def as_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()


def _usage_charts(period: reports.Period, teams: list[str]) -> list[dict[str, Any]]:
    out = []
    for team in teams:
        rows = reports.usage_over_time(period, team)
        by_resource: dict[str, dict[Any, tuple[float, float]]] = {}
        for row in rows:
            by_resource.setdefault(row["resource"], {})[row["start"]] = (
                row["average_used"],
                row["quota"],
            )
        for resource, points in sorted(by_resource.items()):
            starts = sorted(points)
            fmt = "%b %d" if period.granularity == "day" else "%H:%M"
            labels = [s.strftime(fmt) for s in starts]
            used = [points[s][0] for s in starts]
            quota = [points[s][1] for s in starts]
            title = f"{team}: {resource} in use against the quota, {period.adjective} averages"
            series = [("in use", used)] + ([("quota", quota)] if any(quota) else [])
            out.append(
                {
                    "team": team,
                    "resource": resource,
                    "svg": mark_safe(charts.line_chart(title, labels, series)),
                }
            )
    return out


@login_required
def reports_page(request: HttpRequest) -> HttpResponse:
    days = _days(request)
    period = reports.Period.last(days)
    team = request.GET.get("team", "")
    teams = _requested_teams(request)
    gpu_hours = reports.gpu_hours(period, teams=teams)
    # Charts for the user's teams, or (approvers, admins) the six that used the most.
    busiest = [r["team"] for r in sorted(gpu_hours, key=lambda r: -r["gpu_hours"])]
    chart_teams = teams if teams is not None else busiest
    waits = reports.wait_times(period)
    idle = reports.idle_capacity(period)
    context = {
        "days": days,
        "choices": DAYS,
        "period": period,
        "gpu_hours": gpu_hours,
        "by_resource": reports.gpu_hours(period, by="resource", teams=teams),
        "by_queue": reports.gpu_hours(period, by="queue"),
        "utilisation": reports.quota_utilisation(period, teams=teams),
        "waits": waits,
        "borrowing": reports.borrowing(period),
        "idle": idle,
        "usage_charts": _usage_charts(period, chart_teams[:6]),
        "wait_chart": mark_safe(
            charts.bar_chart(
                "Wait before admission per ClusterQueue (seconds)",
                [(w["cluster_queue"], [("p50", w["p50_s"]), ("p90", w["p90_s"])]) for w in waits],
                unit=" s",
            )
        )
        if waits
        else "",
        "fleet_chart": mark_safe(
            charts.bar_chart(
                "Fleet: allocated against allocatable per pool and GPU resource (averages)",
                [
                    (
                        f"{r['pool']} {r['resource'].removeprefix('nvidia.com/')}",
                        [
                            ("allocatable", r["average_allocatable"]),
                            ("allocated", r["average_allocated"]),
                        ],
                    )
                    for r in idle
                ],
            )
        )
        if idle
        else "",
        "insights": reports.insights(period) if teams is None else [],
        "sees_all": teams is None,
        "team": team,
    }
    return render(request, "usage/reports.html", context)


@login_required
def report_csv(request: HttpRequest, name: str) -> HttpResponse:
    period = reports.Period.last(_days(request))
    rows = report_rows(name, period, _requested_teams(request))
    response = HttpResponse(as_csv(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="{name}-{period.start:%Y%m%d}-{period.end:%Y%m%d}.csv"'
    )
    return response
