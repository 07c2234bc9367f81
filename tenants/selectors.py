"""Reads of tenant data, always scoped to the acting user."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Prefetch, QuerySet

from portal.permissions import is_platform_admin
from tenants.models import Namespace, Team


def list_teams_for_user(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Team]:
    """Teams the user belongs to (every team for a platform admin), with what a page shows.

    A fixed number of queries whatever the number of teams, namespaces or queues.
    """
    if not user.is_authenticated:
        return Team.objects.none()
    teams = Team.objects.all()
    if not is_platform_admin(user):
        teams = teams.filter(memberships__user_id=user.pk)
    return teams.prefetch_related(
        Prefetch(
            "namespaces",
            queryset=Namespace.objects.prefetch_related(
                "quota_items", "limit_items", "local_queues__cluster_queue"
            ),
        ),
        "allowed_priority_classes",
    ).order_by("slug")
