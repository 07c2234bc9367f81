"""A report's rows as the API and the CSV downloads give them: one report by name, within
the teams and the cluster asked, of one resource if asked; and as CSV, flat (a team's
part on each cluster becomes a column per cluster)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404

from cluster.models import Cluster
from usage import reports


def cluster_named(name: str) -> Cluster | None:
    """The cluster ``?cluster=`` names (empty: None, every cluster); another name is a
    field error."""
    if not name:
        return None
    found = Cluster.objects.filter(name=name).first()
    if found is None:
        raise ValidationError({"cluster": f"No cluster is named {name!r}."})
    return found


def report_rows(
    name: str,
    period: reports.Period,
    teams: list[str] | None,
    resource: str = "",
    *,
    cluster: Cluster | None = None,
) -> list[dict[str, Any]]:
    """A report's rows within the teams (None: every team) and on ``cluster`` (None: every
    cluster), of one resource if asked (for reports with a resource column; a
    ValidationError otherwise)."""
    if name not in reports.REPORTS:
        raise Http404(f"No report {name!r}.")
    if resource and name not in reports.RESOURCE_COLUMN:
        raise ValidationError({"resource": f"The {name} report has no resource column."})
    function: Any = reports.REPORTS[name]
    if name in reports.TEAM_SCOPED:
        rows = list(function(period, teams=teams, cluster=cluster))
    else:
        rows = list(function(period, cluster=cluster))
    return [r for r in rows if r["resource"] == resource] if resource else rows


def flat(row: dict[str, Any]) -> dict[str, Any]:
    """A row with its per-cluster parts (``clusters``) as columns: "gpu-east gpu_hours"."""
    out = {}
    for key, value in row.items():
        if key != "clusters":
            out[key] = value
            continue
        for part in value:
            out.update({f"{part['cluster']} {k}": v for k, v in part.items() if k != "cluster"})
    return out


ISO_MOMENT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:\d{2}|Z)?")


def cell(value: Any) -> Any:
    """A value as a spreadsheet reader reads it: yes/no for a flag (not ``False``), a whole
    number without ``.0`` (``20``, not ``20.0``), a fraction to four places at most, a
    bucket's start as its day (``2026-12-05``) or, within a day, its hour in UTC
    (``2026-12-05 10:00 UTC``), not ISO 8601's ``T`` and offset."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and ISO_MOMENT.fullmatch(value):
        value = dt.datetime.fromisoformat(value)  # a bucket's start as the API gives it
    if isinstance(value, dt.datetime):
        moment = value.astimezone(dt.UTC) if value.tzinfo else value
        if (moment.hour, moment.minute, moment.second) == (0, 0, 0):
            return f"{moment:%Y-%m-%d}"
        return f"{moment:%Y-%m-%d %H:%M} UTC"
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") or "0"
    if value is None:
        return ""
    return value


def as_csv(rows: list[dict[str, Any]]) -> str:
    """The rows as CSV: every row's columns (a cluster a team has no part on counts 0), each
    value as a person reads it (:func:`cell`)."""
    out = io.StringIO()
    if rows:
        flats = [{k: cell(v) for k, v in flat(row).items()} for row in rows]
        columns = list(dict.fromkeys(key for row in flats for key in row))
        writer = csv.DictWriter(out, fieldnames=columns, restval=0)
        writer.writeheader()
        writer.writerows(flats)
    return out.getvalue()
