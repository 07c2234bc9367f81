"""Reads of portal-wide data, always scoped to the acting user."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Exists, OuterRef, QuerySet

from portal.models import AuditEvent
from portal.permissions import is_approver, is_platform_admin


def audit_events_for_user(user: AbstractBaseUser | AnonymousUser) -> QuerySet[AuditEvent]:
    """Every event for platform admins and approvers; the events of your teams otherwise."""
    events = AuditEvent.objects.select_related("team").order_by("-time", "-id")
    if not user.is_authenticated:
        return events.none()
    if is_platform_admin(user) or is_approver(user):
        return events
    from tenants.models import Membership

    mine = Membership.objects.filter(team_id=OuterRef("team_id"), user_id=user.pk)
    return events.filter(Exists(mine))
