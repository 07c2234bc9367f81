"""Who may do what: platform roles and team roles in one place."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from portal.models import PlatformRole

User = AbstractBaseUser | AnonymousUser


def has_platform_role(user: User, role: str) -> bool:
    if not user.is_authenticated:
        return False
    if getattr(user, "is_superuser", False):
        return True
    return PlatformRole.objects.filter(user_id=user.pk, role=role).exists()


def is_platform_admin(user: User) -> bool:
    return has_platform_role(user, PlatformRole.Role.ADMIN)


def is_approver(user: User) -> bool:
    return has_platform_role(user, PlatformRole.Role.APPROVER)
