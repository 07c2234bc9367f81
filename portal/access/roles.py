"""Granting and revoking platform roles (who is a platform admin, who an approver): the one
door for every such write made by a person, the admin's included. Platform admins only; a
user holds a role once; the last platform admin keeps the role (else nobody could grant it
again but from the command line); one audit row per change naming who made it. The roles
single sign-on grants follow the IdP's groups (``tenants.oidc``), audited there."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from portal.access.permissions import is_platform_admin
from portal.audit.record import Actor, Event, System, record_audit
from portal.models import PlatformRole

LAST_ADMIN = (
    "The last platform admin, {user}, keeps the role: grant it to someone else first, or "
    "nobody could grant it again."
)


def _require_platform_admin(actor: Actor) -> None:
    if not isinstance(actor, System) and not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins can grant or revoke platform roles.")


@transaction.atomic
def grant_platform_role(*, actor: Actor, user: Any, role: str, source: str) -> PlatformRole:
    """Give ``user`` the platform ``role``: refused (field errors, nothing written) for an
    unknown role, a user who is not there or holds it already."""
    _require_platform_admin(actor)
    if role not in PlatformRole.Role.values:
        labels = ", ".join(PlatformRole.Role.values)
        raise ValidationError({"role": [f"Unknown platform role {role!r} (one of {labels})."]})
    if user is None or not get_user_model().objects.filter(pk=user.pk).exists():
        raise ValidationError({"user": ["Choose a user who is signed up."]})
    if PlatformRole.objects.filter(user_id=user.pk, role=role).exists():
        label = PlatformRole.Role(role).label
        raise ValidationError({"role": [f"{user} is a {label.lower()} already."]})
    granted = PlatformRole.objects.create(user=user, role=role, granted_by="portal")
    record_audit(
        actor=actor,
        event=Event.PLATFORM_ROLE_GRANTED,
        source=source,
        target=user,
        new={"user": user.get_username(), "role": role},
    )
    return granted


@transaction.atomic
def revoke_platform_role(*, actor: Actor, platform_role: PlatformRole, source: str) -> None:
    """Take the role ``platform_role`` grants back: refused (a field error, nothing
    written) for the last platform admin's admin role."""
    _require_platform_admin(actor)
    held = (
        PlatformRole.objects.select_for_update()
        .select_related("user")
        .filter(pk=platform_role.pk)
        .first()
    )
    if held is None:
        raise ValidationError({"role": ["This role was revoked already."]})
    if held.role == PlatformRole.Role.ADMIN:
        admins = list(
            PlatformRole.objects.select_for_update()
            .filter(role=PlatformRole.Role.ADMIN, user__is_active=True)
            .exclude(pk=held.pk)
            .values_list("pk", flat=True)
        )
        if not admins:
            raise ValidationError({"role": [LAST_ADMIN.format(user=held.user.get_username())]})
    held.delete()
    record_audit(
        actor=actor,
        event=Event.PLATFORM_ROLE_REVOKED,
        source=source,
        target=held.user,
        old={"user": held.user.get_username(), "role": held.role},
    )
