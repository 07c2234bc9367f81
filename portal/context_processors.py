"""Template context shared by every page."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from portal.permissions import is_platform_admin


def portal(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    return {
        "queue_backend": settings.QM_QUEUE_BACKEND,
        "user_is_platform_admin": bool(user and is_platform_admin(user)),
    }
