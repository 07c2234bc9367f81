"""Who may do what: platform roles and team roles in one place."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import Exists

from portal.infra.round_trips import Read, read_together
from portal.models import Notification, PlatformRole

User = AbstractBaseUser | AnonymousUser


def user_id(user: User) -> int:
    """The id of a signed-in user (pages and endpoints behind a login, and services acting
    for them: an anonymous user never gets this far)."""
    if user.pk is None:
        raise PermissionDenied("Sign in first.")
    return int(user.pk)


def has_platform_role(user: User, role: str) -> bool:
    if not user.is_authenticated:
        return False
    if getattr(user, "is_superuser", False):
        return True
    cached: Any = getattr(user, "_qm_roles", False)
    if cached is False:  # outside a page request: ask every time
        return PlatformRole.objects.filter(user_id=user.pk, role=role).exists()
    roles: set[str] = _load_request_facts(user) if cached is None else cached
    return role in roles


def _facts_read(user: User) -> Read:
    # Written out: the ORM took longer to build this statement than the database to answer.
    pk = user_id(user)
    return Read(
        f"SELECT ARRAY(SELECT role FROM {PlatformRole._meta.db_table} WHERE user_id = %s), "
        f"(SELECT count(*) FROM {Notification._meta.db_table} "
        "WHERE user_id = %s AND read_at IS NULL)",
        [pk, pk],
    )


def _load_request_facts(user: User) -> set[str]:
    """The first question of a page request: one query for all the user's roles and, for
    the navigation, the count of their unread notifications (every page asks for both)."""
    return request_facts_from(user, read_together(_facts_read(user))[0])


def request_facts_read(user: User) -> Read | None:
    """The read of the request's first question, while this page request has not asked it
    yet (None otherwise, and outside a page request): a page may send it with its own reads
    in one round trip, then hand the rows to ``request_facts_from``."""
    if not user.is_authenticated or getattr(user, "_qm_roles", False) is not None:
        return None
    return _facts_read(user)


def request_facts_from(user: User, rows: list[tuple[Any, ...]]) -> set[str]:
    """The user's roles (and unread count) of ``request_facts_read``'s rows, kept for the
    rest of the request."""
    row = rows[0] if rows else None
    roles = keep_roles(user, (row[0] or []) if row else [])
    setattr(user, "_qm_unread", int(row[1] or 0) if row else 0)  # noqa: B010 - the same cache
    return roles


def roles_of(user: Any) -> Any:
    """The platform roles of ``user`` (an id, or ``OuterRef`` to one), a query of role names
    to read with another (``keep_roles``)."""
    return PlatformRole.objects.filter(user_id=user).values("role")


def keep_roles(user: User, roles: Iterable[str]) -> set[str]:
    """The user's platform roles, read with what began the request (a page's first question,
    an API token's row), kept for the rest of it; returns them."""
    kept = set(roles)
    setattr(user, "_qm_roles", kept)  # noqa: B010 - the request's cache, on its user
    return kept


def unread_notifications(user: User) -> int:
    """How many of the user's notifications are unread: within a page request from the
    query that read their roles, otherwise asked."""
    if not user.is_authenticated:
        return 0
    if getattr(user, "_qm_roles", False) is None:
        _load_request_facts(user)
    cached = getattr(user, "_qm_unread", None)
    if cached is not None:
        return int(cached)
    return Notification.objects.filter(user_id=user.pk, read_at=None).count()


class RoleCacheMiddleware:
    """Within one page request the signed-in user's platform roles are read once (the
    navigation, the view and its permission checks all ask)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        user = request.user
        if user.is_authenticated:
            user._qm_roles = None
        return self.get_response(request)


def is_platform_admin(user: User) -> bool:
    return has_platform_role(user, PlatformRole.Role.ADMIN)


def is_approver(user: User) -> bool:
    return has_platform_role(user, PlatformRole.Role.APPROVER)


def sees_every_team(user: User) -> bool:
    """Platform admins and approvers see every team's requests, pods, events and usage;
    everyone else sees their own teams'."""
    return is_platform_admin(user) or is_approver(user)


# The platform roles that see every team (``sees_every_team``).
EVERY_TEAM_ROLES = (PlatformRole.Role.ADMIN, PlatformRole.Role.APPROVER)


def sees_every_team_known(user: User) -> bool | None:
    """``sees_every_team(user)`` when it is known without a query (a superuser, or a page
    request that has read the user's roles), None otherwise: a read that depends on it may
    then ask it itself (``sees_every_team_sql``)."""
    if not user.is_authenticated:
        return False
    if getattr(user, "is_superuser", False):
        return True
    cached: Any = getattr(user, "_qm_roles", False)
    if isinstance(cached, set):
        return bool(cached.intersection(EVERY_TEAM_ROLES))
    return None


def sees_every_team_sql(user: User) -> Exists:
    """SQL: whether ``user`` holds a role that sees every team (the superuser aside), for a
    read that asks it with its own question."""
    return Exists(PlatformRole.objects.filter(user_id=user_id(user), role__in=EVERY_TEAM_ROLES))
