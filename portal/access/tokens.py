"""Personal API tokens: ``qm_<prefix>_<secret>``; only a SHA-256 of the whole is stored."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.postgres.expressions import ArraySubquery
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import OuterRef, Q
from django.http import Http404
from django.utils import timezone
from rest_framework import authentication, exceptions, throttling

from portal.access import ratelimit
from portal.access.permissions import User, keep_roles, roles_of, user_id
from portal.audit.record import Event, record_audit
from portal.models import ApiToken


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def create_token(
    *, user: User, name: str, days: int | None = 90, source: str = "web"
) -> tuple[ApiToken, str]:
    """A new token and its text (shown once, never stored)."""
    errors = {}
    longest = ApiToken._meta.get_field("name").max_length or 100
    if not name.strip():
        errors["name"] = ["Name the token after where it is used, e.g. ci-pipeline."]
    elif len(name.strip()) > longest:
        errors["name"] = [f"At most {longest} characters (this one has {len(name.strip())})."]
    if days is not None and not 1 <= days <= 366:
        errors["days"] = ["Between 1 and 366 days (or no expiry)."]
    if errors:
        raise ValidationError(errors)
    _refuse_beyond_the_cap(user)
    prefix = secrets.token_hex(4)
    text = f"qm_{prefix}_{secrets.token_urlsafe(32)}"
    token = ApiToken.objects.create(
        user_id=user_id(user),
        name=name.strip(),
        prefix=prefix,
        digest=_digest(text),
        expires_at=timezone.now() + dt.timedelta(days=days) if days else None,
    )
    record_audit(
        actor=user,
        event=Event.API_TOKEN_CREATED,
        source=source,
        target=token,
        new={"name": token.name, "expires_at": str(token.expires_at or "")},
    )
    return token, text


def _refuse_beyond_the_cap(user: User) -> None:
    """At most ``QM_API_TOKENS_PER_USER`` live tokens (neither revoked nor expired) per
    person; the user's row is locked so two creations at once cannot both pass."""
    get_user_model().objects.select_for_update().filter(pk=user_id(user)).first()
    live = ApiToken.objects.filter(user_id=user_id(user), revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )
    most = settings.QM_API_TOKENS_PER_USER
    if live.count() >= most:
        raise ValidationError(
            {
                "name": [
                    f"You have {most} live tokens, the most one person may hold: revoke one "
                    "you no longer use, then create this one."
                ]
            }
        )


@transaction.atomic
def revoke_token(*, user: User, token_id: int, source: str = "web") -> ApiToken:
    token = ApiToken.objects.filter(pk=token_id, user_id=user_id(user)).first()
    if token is None:
        raise Http404("No such token.")
    if token.revoked_at is None:
        ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
        record_audit(actor=user, event=Event.API_TOKEN_REVOKED, source=source, target=token)
    token.refresh_from_db()
    return token


class TokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer qm_…`` (or ``Token qm_…``)."""

    keyword = ("bearer", "token")

    def authenticate(self, request: Any) -> tuple[AbstractBaseUser, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace").split()
        if len(header) != 2 or header[0].lower() not in self.keyword:
            return None
        text = header[1]
        parts = text.split("_")
        if len(parts) < 3 or parts[0] != "qm":
            raise exceptions.AuthenticationFailed("Malformed token.")
        # The user's platform roles come with the token, kept for the request: every check
        # of the request (permissions, the scope of each list) then asks no query of its own.
        token = (
            ApiToken.objects.select_related("user")
            .annotate(roles=ArraySubquery(roles_of(OuterRef("user_id"))))
            .filter(prefix=parts[1])
            .first()
        )
        if token is None or not hmac.compare_digest(token.digest, _digest(text)):
            raise exceptions.AuthenticationFailed("Invalid token.")
        now = timezone.now()
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This token was revoked.")
        if token.expires_at is not None and token.expires_at <= now:
            raise exceptions.AuthenticationFailed("This token has expired.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("The token's user is inactive.")
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        keep_roles(token.user, token.roles)
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="api"'


try:
    from drf_spectacular.extensions import OpenApiAuthenticationExtension

    class TokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
        """Documents the bearer token in the OpenAPI schema."""

        target_class = "portal.access.tokens.TokenAuthentication"
        name = "bearerAuth"

        def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
            return {"type": "http", "scheme": "bearer", "bearerFormat": "qm_<prefix>_<secret>"}
except ImportError:  # pragma: no cover - drf-spectacular is a dependency
    pass


class _SharedRateThrottle(throttling.SimpleRateThrottle):
    """A DRF throttle counted atomically in Redis (``portal.access.ratelimit``); with Redis
    down requests go through, logged."""

    retry_after = 0

    def allow_request(self, request: Any, view: Any) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        limit, window = self.parse_rate(self.rate)
        assert limit is not None and window is not None  # a rate was set
        verdict = ratelimit.hit(
            settings.CACHES["default"]["LOCATION"], key, limit=limit, window_seconds=window
        )
        self.retry_after = verdict.retry_after
        return verdict.allowed

    def wait(self) -> float | None:
        return self.retry_after or None


class TokenRateThrottle(_SharedRateThrottle):
    """Rate limit per API token (each token its own budget), per user for browser sessions.

    Anonymous callers are keyed by address. The rate is ``QM_API_RATE``.
    """

    scope = "token"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if isinstance(request.auth, ApiToken):
            ident = f"token-{request.auth.pk}"
        elif request.user is not None and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = f"anon-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class UserRateThrottle(_SharedRateThrottle):
    """One budget per person over all their tokens and their browser session together
    (``QM_API_USER_RATE``): more tokens buy no more requests. Anonymous callers have the
    per-address budget of :class:`TokenRateThrottle` only."""

    scope = "user"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if request.user is None or not request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": f"user-{request.user.pk}"}
