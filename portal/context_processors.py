"""Template context shared by every page."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from portal.access.permissions import is_platform_admin
from portal.notifications.subscriptions import unread_count


def portal(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    return {
        "queue_backend": settings.QM_QUEUE_BACKEND,
        "user_is_platform_admin": bool(user and is_platform_admin(user)),
    }


def notifications(request: HttpRequest) -> dict[str, Any]:
    """The signed-in user's unread notifications, counted for the navigation (one query)."""
    user = getattr(request, "user", None)
    return {"notifications_unread": unread_count(user) if user is not None else 0}
