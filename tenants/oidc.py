"""Single sign-on with OpenID Connect (Keycloak, Dex, a cloud IdP) through mozilla-django-oidc.

The IdP says who someone is (its issuer and subject key the account, ``SsoIdentity``) and
which groups they are in (matched by their exact, whole value); the portal maps groups to
platform roles and team memberships at every sign-in. What the IdP granted it also takes
away (a group removed at the IdP is a role removed at the next sign-in); roles an admin
granted by hand in the portal stay. Local accounts keep working next to it (QM_LOCAL_LOGIN).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import AbstractBaseUser, User
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from portal.audit.record import Event, record_audit
from portal.models import PlatformRole
from portal.vocabulary.text import neutralised
from tenants.models import Membership, SsoIdentity, Team

log = logging.getLogger(__name__)
RANK = {Membership.Role.VIEWER: 0, Membership.Role.MEMBER: 1, Membership.Role.LEAD: 2}
USERNAME = re.compile(r"^[\w.@+-]{1,150}$")


class SignInRefused(SuspiciousOperation):
    """The IdP vouched for someone the portal will not sign in; the message says why."""


def team_roles(groups: Iterable[str], pattern: str) -> dict[str, str]:
    """Team slug -> role from group names like ``quartermaster:team-a:lead`` (the highest
    role wins when someone is in several groups of one team)."""
    if "{team}" not in pattern or "{role}" not in pattern:
        return {}
    regex = re.compile(
        "^"
        + re.escape(pattern)
        .replace(re.escape("{team}"), r"(?P<team>[a-z0-9]([-a-z0-9]*[a-z0-9])?)")
        .replace(re.escape("{role}"), r"(?P<role>lead|member|viewer)")
        + "$"
    )
    roles: dict[str, str] = {}
    for group in groups:
        match = regex.match(group)
        if not match:
            continue
        team, role = match["team"], match["role"]
        if team not in roles or RANK[role] > RANK[roles[team]]:  # type: ignore[index]
            roles[team] = role
    return roles


def platform_roles(groups: Iterable[str]) -> set[str]:
    names = set(groups)
    roles: set[str] = set()
    if names & set(settings.QM_OIDC_ADMIN_GROUPS):
        roles.add(PlatformRole.Role.ADMIN)
    if names & set(settings.QM_OIDC_APPROVER_GROUPS):
        roles.add(PlatformRole.Role.APPROVER)
    return roles


def groups_of(claims: dict[str, Any]) -> list[str]:
    """The groups as the IdP sent them. A group matches by its exact, whole value, path
    included: Keycloak's full paths are configured as such ("/gpu/platform-admins"), since
    a user who may make subgroups could otherwise make ``/users/me/platform-admins``."""
    value = claims.get(settings.QM_OIDC_GROUPS_CLAIM) or []
    if isinstance(value, str):
        value = [value]
    return sorted({str(item) for item in value})


@transaction.atomic
def sync_roles(user: AbstractBaseUser, claims: dict[str, Any]) -> None:
    """Make the IdP-granted roles and memberships match the groups; audit every change."""
    groups = groups_of(claims)
    wanted_platform = platform_roles(groups)
    for role in PlatformRole.objects.select_for_update().filter(user_id=user.pk, granted_by="sso"):
        if role.role not in wanted_platform:
            role.delete()
            record_audit(
                actor=user,
                event=Event.PLATFORM_ROLE_REVOKED,
                source="sso",
                target=user,
                old={"role": role.role},
            )
    held = set(PlatformRole.objects.filter(user_id=user.pk).values_list("role", flat=True))
    for name in sorted(wanted_platform - held):
        PlatformRole.objects.create(user_id=user.pk, role=name, granted_by="sso")
        record_audit(
            actor=user,
            event=Event.PLATFORM_ROLE_GRANTED,
            source="sso",
            target=user,
            new={"role": name, "groups": groups},
        )

    wanted = team_roles(groups, settings.QM_OIDC_TEAM_GROUP_PATTERN)
    teams = {t.slug: t for t in Team.objects.filter(slug__in=wanted)}
    unknown = sorted(set(wanted) - set(teams))
    if unknown:
        log.info("groups name teams the portal does not have: %s", ", ".join(unknown))
    current = {
        m.team.slug: m
        for m in Membership.objects.select_for_update()
        .filter(user_id=user.pk)
        .select_related("team")
    }
    for slug, membership in current.items():
        if membership.granted_by == "sso" and slug not in teams:
            membership.delete()
            record_audit(
                actor=user,
                event=Event.MEMBERSHIP_REVOKED,
                source="sso",
                target=user,
                team=membership.team,
                old={"team": slug, "role": membership.role},
            )
    for slug, team in teams.items():
        team_role = wanted[slug]
        existing = current.get(slug)
        if existing is None:
            Membership.objects.create(user_id=user.pk, team=team, role=team_role, granted_by="sso")
            record_audit(
                actor=user,
                event=Event.MEMBERSHIP_GRANTED,
                source="sso",
                target=user,
                team=team,
                new={"team": slug, "role": team_role},
            )
        elif existing.role != team_role or existing.granted_by != "sso":
            old = {"team": slug, "role": existing.role, "granted_by": existing.granted_by}
            existing.role, existing.granted_by = team_role, "sso"
            existing.save(update_fields=["role", "granted_by"])
            record_audit(
                actor=user,
                event=Event.MEMBERSHIP_CHANGED,
                source="sso",
                target=user,
                team=team,
                old=old,
                new={"team": slug, "role": team_role},
            )


def identity_of(claims: dict[str, Any]) -> tuple[str, str]:
    """The issuer and subject that key an account (from the signed ID token)."""
    issuer, subject = str(claims.get("iss") or ""), str(claims.get("sub") or "")
    if not issuer or not subject:
        raise SignInRefused("The identity provider sent no issuer or subject: sign-in refused.")
    return issuer[:500], subject[:255]


def free_username(wanted: str) -> str:
    """``wanted``, or ``wanted-2``, ``wanted-3``… when another account has it (a username
    only names an account: two people of one name at the IdP are two accounts here)."""
    taken = set(
        User.objects.filter(username__startswith=wanted[:140]).values_list("username", flat=True)
    )
    name, number = wanted, 1
    while name in taken:
        number += 1
        name = f"{wanted[:140]}-{number}"
    return name


class PortalOIDCBackend(OIDCAuthenticationBackend):
    """Accounts keyed by the IdP's issuer and subject; roles from their groups at every
    sign-in. ``preferred_username`` names a new account and nothing else."""

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        try:
            return super().get_or_create_user(access_token, id_token, payload)
        except SignInRefused as exc:  # the library logs it and signs nobody in
            messages.error(self.request, str(exc))
            raise

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        claims = dict(super().get_userinfo(access_token, id_token, payload))
        if "sub" in claims and payload.get("sub") and claims["sub"] != payload["sub"]:
            raise SignInRefused("The identity provider's user info is of another subject.")
        for key, value in payload.items():  # e.g. groups only in the ID token (Dex)
            claims.setdefault(key, value)
        for key in ("iss", "sub"):  # who it is comes from the signed ID token
            if payload.get(key):
                claims[key] = payload[key]
        return claims

    @staticmethod
    def username_of(claims: dict[str, Any]) -> str:
        name = str(claims.get(settings.QM_OIDC_USERNAME_CLAIM) or "")
        if not USERNAME.match(name):
            raise SignInRefused(
                f"The identity provider sent no usable {settings.QM_OIDC_USERNAME_CLAIM!r} "
                "claim (letters, digits and @.+-_ only, at most 150): ask your IdP admin to "
                "map one, or set QM_OIDC_USERNAME_CLAIM."
            )
        return name

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        self.username_of(claims)
        identity_of(claims)
        return True

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        """The account of this issuer and subject; before it has one, an account of the
        same name that no identity holds yet (a local one is refused in ``update_user``;
        one made by single sign-on before accounts were keyed by subject is linked once,
        at its first sign-in since)."""
        issuer, subject = identity_of(claims)
        linked = User.objects.filter(sso_identities__issuer=issuer, sso_identities__subject=subject)
        if linked.exists():
            return linked
        return User.objects.filter(username=self.username_of(claims), sso_identities=None)

    def create_user(self, claims: dict[str, Any]) -> User:
        user = User(username=free_username(self.username_of(claims)))
        user.set_unusable_password()
        self._details(user, claims)
        user.save()
        issuer, subject = identity_of(claims)
        SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
        record_audit(
            actor=user,
            event=Event.USER_CREATED,
            source="sso",
            target=user,
            new={"username": user.username, "email": user.email, "issuer": issuer},
        )
        sync_roles(user, claims)
        return user

    def update_user(self, user: User, claims: dict[str, Any]) -> User:
        if user.has_usable_password():
            # A local account of the same name: handing it to whoever the IdP calls that
            # name would let the IdP take over the portal's own admin, say.
            raise SignInRefused(
                f"A local account named {user.username!r} exists. An admin can hand it to "
                "single sign-on by removing its password (Django admin), or rename it."
            )
        if not user.is_active:
            raise SignInRefused(f"The account {user.username!r} is deactivated in the portal.")
        issuer, subject = identity_of(claims)
        if not SsoIdentity.objects.filter(user=user).exists():
            SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
            record_audit(
                actor=user,
                event=Event.SSO_IDENTITY_LINKED,
                source="sso",
                target=user,
                new={"issuer": issuer},
            )
        self._details(user, claims)
        user.save(update_fields=["email", "first_name", "last_name"])
        sync_roles(user, claims)
        return user

    @staticmethod
    def _details(user: User, claims: dict[str, Any]) -> None:
        # An IdP's words are text nobody typed here: neutralised, not refused.
        user.email = neutralised(str(claims.get("email") or ""))[:254]
        user.first_name = neutralised(str(claims.get("given_name") or ""))[:150]
        user.last_name = neutralised(str(claims.get("family_name") or ""))[:150]
