"""Reads of tenant data, always scoped to the acting user."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Prefetch, QuerySet

from portal.permissions import is_platform_admin, sees_every_team, user_id
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


def member_namespaces(user: AbstractBaseUser | AnonymousUser) -> set[str]:
    """Names of the namespaces of the teams the user is a member of (whatever their
    platform roles): whose pods a page may name."""
    if not user.is_authenticated:
        return set()
    return set(
        Namespace.objects.filter(team__memberships__user_id=user_id(user)).values_list(
            "name", flat=True
        )
    )


POD_REF = re.compile(r"(?<![\w./-])([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)/([a-z0-9][-.a-z0-9]*)")


@dataclass(frozen=True)
class PodNames:
    """Whose pods a user may see by name: their own teams' (every team's for approvers and
    platform admins). Others' pods are counted, never named: the one rule of every page and
    of the API (node pages, impact assessments, execution steps)."""

    everyone: bool
    namespaces: frozenset[str]

    def named(self, namespace: str) -> bool:
        return self.everyone or namespace in self.namespaces

    def redact(self, text: str) -> str:
        """``text`` with every ``namespace/pod`` the user may not name said as "a pod in
        namespace"."""
        if self.everyone or "/" not in text:
            return text
        return POD_REF.sub(
            lambda m: m.group(0) if self.named(m.group(1)) else f"a pod in {m.group(1)}", text
        )


def pod_names_for(user: AbstractBaseUser | AnonymousUser) -> PodNames:
    if sees_every_team(user):
        return PodNames(True, frozenset())
    return PodNames(False, frozenset(member_namespaces(user)))
