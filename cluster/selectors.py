"""Reads of what the loop recorded (the same for every signed-in user: the cluster's state is
not team data; team-scoped reads filter by namespace where they use it)."""

from __future__ import annotations

from django.db.models import QuerySet

from cluster.models import AppliedObject, Drift, SyncRun


def open_drift() -> QuerySet[Drift]:
    return Drift.objects.filter(resolved_at__isnull=True).order_by("kind", "subject")


def last_sync() -> SyncRun | None:
    return SyncRun.objects.order_by("-started_at").first()


def apply_problems() -> QuerySet[AppliedObject]:
    return AppliedObject.objects.exclude(outcome=AppliedObject.Outcome.APPLIED).order_by(
        "kind", "name"
    )
