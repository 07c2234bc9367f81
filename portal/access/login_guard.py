"""Sign-in throttling (django-axes): failed passwords are counted per account and per
address in PostgreSQL; past the limit both are refused for a cool-off time, with the login
page saying so (429). A platform admin lifts a lock early with
``manage.py axes_reset_username <name>`` or ``axes_reset_ip <address>``."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class LockoutBackend(AxesStandaloneBackend):
    """Refuses a sign-in while its account or address is locked out. Calls without a request
    (a management command, a test's ``client.login``) reach no one over HTTP: not counted."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)  # type: ignore[no-any-return]


def client_address(request: HttpRequest) -> str | None:
    """The caller's address: with ``QM_TRUSTED_PROXIES`` proxies in front (an ingress), the
    entry that the nearest of them added to X-Forwarded-For; without, the peer's address.
    Entries further left are the client's own say and are never trusted."""
    hops = settings.QM_TRUSTED_PROXIES
    if hops:
        forwarded = [
            part.strip()
            for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
            if part.strip()
        ]
        if len(forwarded) >= hops:
            return forwarded[-hops]
    return request.META.get("REMOTE_ADDR")


def locked_out(
    request: HttpRequest, response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """The sign-in page again, saying why and for how long (429 Too Many Requests)."""
    # lazy: portal.views imports the auth machinery that imports this module
    from portal.views import LoginForm, sign_in_choices

    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    username = (credentials or {}).get("username", "") if isinstance(credentials, dict) else ""
    context = {
        "form": LoginForm(request, initial={"username": username}),
        "lockout": (
            f"Too many failed sign-ins for this account or from this address. "
            f"Try again in {minutes} minutes, or ask a platform admin to unlock it."
        ),
        **sign_in_choices(),
        "next": request.POST.get("next", "") if request.method == "POST" else "",
    }
    answer = render(request, "registration/login.html", context, status=429)
    answer["Retry-After"] = str(minutes * 60)
    return answer
