"""Reads of portal-wide data, always scoped to the acting user."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from portal.access.permissions import sees_every_team
from portal.audit.events import Event
from portal.models import AuditEvent
from portal.vocabulary.names import PodNames

User = AbstractBaseUser | AnonymousUser
DEMO_LOADED = Event.DEMO_LOADED  # the audit event the demo loader writes, with its logins


def demo_sign_in() -> dict[str, Any] | None:
    """The demo's logins and password for the sign-in page: only where settings allow it
    (QM_DEMO_LOGINS: the run command's settings, never production's) and only once the demo
    loader has said it loaded them (its audit event). One query, on the sign-in page only."""
    if not settings.QM_DEMO_LOGINS:
        return None
    event = AuditEvent.objects.filter(event=DEMO_LOADED).order_by("-time", "-id").first()
    if event is None or not isinstance(event.new, dict):
        return None
    return {"password": settings.QM_DEMO_PASSWORD, "logins": event.new.get("logins", [])}


def audit_events_for_user(user: User) -> QuerySet[AuditEvent]:
    """Every event for platform admins and approvers; the events of your teams otherwise."""
    events = AuditEvent.objects.select_related("team").order_by("-time", "-id")
    if not user.is_authenticated:
        return events.none()
    if sees_every_team(user):
        return events
    # One membership per user and team: the join keeps one row per event.
    return events.filter(team__memberships__user_id=user.pk)


def teams_seen_by(user: User) -> QuerySet[Any]:
    """The teams whose events and requests the user sees, to filter those by: theirs;
    every team for platform admins and approvers.

    The team model is reached through the audit event's relation: the ground floor does
    not import the tenants app, which is built on it."""
    team_model: Any = AuditEvent._meta.get_field("team").related_model
    teams = team_model.objects.only("slug").order_by("slug")
    if not user.is_authenticated:
        return team_model.objects.none()  # type: ignore[no-any-return]
    if not sees_every_team(user):
        teams = teams.filter(memberships__user_id=user.pk)
    return teams  # type: ignore[no-any-return]


def pod_names_of(user_ids: set[int]) -> dict[int, PodNames]:
    """:func:`pod_names_for` of many users at once (the recipients of one notification):
    their teams' namespaces, each with its cluster, in one query."""
    user_model: Any = AuditEvent._meta.get_field("actor").related_model
    team_model: Any = AuditEvent._meta.get_field("team").related_model
    users = {u.pk: u for u in user_model.objects.filter(pk__in=user_ids)}
    own: dict[int, set[tuple[int, str]]] = {pk: set() for pk in users}
    rows = team_model.objects.filter(memberships__user_id__in=list(users)).values_list(
        "memberships__user_id", "namespaces__cluster_id", "namespaces__name"
    )
    for person, cluster, namespace in rows:
        if namespace:
            own[person].add((cluster, namespace))
    return {
        pk: PodNames(True, frozenset())
        if sees_every_team(user)
        else PodNames(False, frozenset(own[pk]))
        for pk, user in users.items()
    }


def pod_names_for(user: User) -> PodNames:
    """Whose pods ``user`` may see by name (see :class:`portal.vocabulary.names.PodNames`): the
    namespaces of their teams, each on its cluster (a name a team owns on one cluster may be
    another team's on another), reached through the audit event's team relation (the ground
    floor does not import the tenants app)."""
    if sees_every_team(user):
        return PodNames(True, frozenset())
    if not user.is_authenticated:
        return PodNames(False, frozenset())
    team_model: Any = AuditEvent._meta.get_field("team").related_model
    rows = team_model.objects.filter(memberships__user_id=user.pk).values_list(
        "namespaces__cluster_id", "namespaces__name"
    )
    return PodNames(False, frozenset((cluster, name) for cluster, name in rows if name))
