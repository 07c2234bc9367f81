"""System checks: a configuration mistake is reported at start-up, not at the first sign-in."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

SSO_ENDPOINTS = (
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
)


@register("quartermaster")
def check_single_sign_on(**_: Any) -> list[Error]:
    if not settings.QM_OIDC_ENABLED:
        return []
    errors = [
        Error(
            f"{name} is not set but OIDC_RP_CLIENT_ID is.",
            hint="Copy it from your IdP's .well-known/openid-configuration "
            "(see the README, 'Sign in with your IdP').",
            id="quartermaster.E001",
        )
        for name in SSO_ENDPOINTS
        if not getattr(settings, name, "")
    ]
    if not settings.OIDC_RP_CLIENT_SECRET:
        errors.append(
            Error(
                "OIDC_RP_CLIENT_SECRET is not set but OIDC_RP_CLIENT_ID is.",
                hint="The client's secret from your IdP (or OIDC_RP_CLIENT_SECRET_FILE).",
                id="quartermaster.E002",
            )
        )
    if "{team}" not in settings.QM_OIDC_TEAM_GROUP_PATTERN or (
        "{role}" not in settings.QM_OIDC_TEAM_GROUP_PATTERN
    ):
        errors.append(
            Error(
                "QM_OIDC_TEAM_GROUP_PATTERN needs both {team} and {role}.",
                hint="For example quartermaster:{team}:{role} or gpu-{team}-{role}s.",
                id="quartermaster.E003",
            )
        )
    return errors
