"""Reads of what the loop recorded (the same for every signed-in user: the cluster's state is
not team data; team-scoped reads filter by namespace where they use it)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from cluster.models import AppliedObject, Drift, SyncRun


def amount_sql(value: str) -> str:
    """SQL: the JSON value ``value`` of a node's allocatable or allocated (a number, or a
    string of digits) as a bigint; anything else is 0, as ``cluster.decode.gpu_offer``
    counts it. For sums over the fleet in the database."""
    text = f"({value} #>> '{{}}')"
    return f"(CASE WHEN {text} ~ '^[0-9]{{1,18}}$' THEN {text}::bigint ELSE 0 END)"


def open_drift() -> QuerySet[Drift]:
    return Drift.objects.filter(resolved_at__isnull=True).order_by("kind", "subject")


def last_sync() -> SyncRun | None:
    return SyncRun.objects.order_by("-started_at").first()


def apply_problems() -> QuerySet[AppliedObject]:
    return AppliedObject.objects.exclude(outcome=AppliedObject.Outcome.APPLIED).order_by(
        "kind", "name"
    )


def apply_warnings() -> QuerySet[AppliedObject]:
    """The objects whose last apply the API server warned about."""
    return AppliedObject.objects.exclude(warnings=[]).order_by("kind", "name")


def apply_notices() -> tuple[list[AppliedObject], list[AppliedObject]]:
    """The objects not applied, and those whose last apply the API server warned about
    (one query)."""
    rows = list(
        AppliedObject.objects.filter(
            ~Q(outcome=AppliedObject.Outcome.APPLIED) | ~Q(warnings=[])
        ).order_by("kind", "name")
    )
    problems = [r for r in rows if r.outcome != AppliedObject.Outcome.APPLIED]
    return problems, [r for r in rows if r.warnings]


@dataclass(frozen=True)
class ApiStatus:
    """What the polls tell of the Kubernetes API: reachable or since when not."""

    state: str  # "ok", "unreachable", "stale" (nobody polls), "never" (no poll yet)
    since: dt.datetime | None  # unreachable: the first poll that got no answer
    last_ok: dt.datetime | None  # the state on the pages is as of this poll
    message: str
    latest: SyncRun | None = None  # the newest poll, whatever its outcome

    @property
    def ok(self) -> bool:
        return self.state == "ok"


# How many recent polls are read to find where an outage began.
RECENT_POLLS = 50


def api_status(*, now: dt.datetime | None = None) -> ApiStatus:
    """From the recent polls alone (never a call to the API): a poll that failed, or one
    still without an answer after a poll interval, makes the API unreachable since the first
    such poll after the last good one."""
    now = now or timezone.now()
    interval = dt.timedelta(seconds=settings.QM_POLL_SECONDS)
    runs = list(SyncRun.objects.order_by("-started_at")[:RECENT_POLLS])
    latest = runs[0] if runs else None
    last_ok = next((run for run in runs if run.ok), None)
    ok_at = last_ok.started_at if last_ok else None
    failing = [
        run
        for run in runs
        if (ok_at is None or run.started_at > ok_at)
        and (run.error or (run.finished_at is None and now - run.started_at > interval))
    ]
    if failing:
        first, newest = failing[-1], failing[0]
        waited = int((now - newest.started_at).total_seconds())
        why = newest.error or f"no answer for {waited} s"
        return ApiStatus("unreachable", first.started_at, ok_at, why, latest)
    if last_ok is None:
        return ApiStatus("never", None, None, "the cluster has not been polled yet", latest)
    if now - last_ok.started_at > 3 * interval:
        return ApiStatus(
            "stale",
            None,
            ok_at,
            f"no poll for {int((now - last_ok.started_at).total_seconds())} s "
            "(are the worker and beat running?)",
            latest,
        )
    age = int((now - last_ok.started_at).total_seconds())
    return ApiStatus("ok", None, ok_at, f"polled {age} s ago", latest)
