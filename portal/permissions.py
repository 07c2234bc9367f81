"""Who may do what: platform roles and team roles in one place."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied

from portal.models import PlatformRole

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
    roles: set[str]
    if cached is None:  # the first question of this request: one query for all roles
        roles = set(PlatformRole.objects.filter(user_id=user.pk).values_list("role", flat=True))
        setattr(user, "_qm_roles", roles)  # noqa: B010 - the request's cache, on its user
    else:
        roles = cached
    return role in roles


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
