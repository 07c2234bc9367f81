"""The user's notifications (the latest, read or not) and their subscriptions' settings."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from portal.access.permissions import sees_every_team
from portal.models import NotificationSubscription
from portal.notifications.payloads import KINDS
from portal.notifications.subscriptions import (
    LATEST,
    create_subscription,
    delete_subscription,
    is_told_by_default,
    mark_read,
    mask,
    notifications_for_user,
    set_told_by_default,
    subscriptions_for_user,
    teams_user_may_subscribe_for,
    unread_count,
)


def _int(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise Http404("No such item.")
    return int(text)


@login_required
def notifications(request: HttpRequest) -> HttpResponse:
    """The latest notifications (unread ones marked); POST marks one or all of them read."""
    if request.method == "POST":
        which = request.POST.get("read", "all")
        mark_read(user=request.user, notification_id=None if which == "all" else _int(which))
        return redirect("notifications")
    return render(
        request,
        "portal/notifications.html",
        {
            "items": list(notifications_for_user(request.user)[:LATEST]),
            "unread": unread_count(request.user),
            "latest": LATEST,
        },
    )


def _wanted_team(request: HttpRequest) -> tuple[Any, dict[str, list[str]]]:
    """The team the form names (None: every team); another team is a field error, never a
    hint that it exists."""
    slug = request.POST.get("team", "")
    if not slug:
        return None, {}
    team = teams_user_may_subscribe_for(request.user).filter(slug=slug).first()
    if team is None:
        return None, {"team": ["You lead no such team: a lead follows their own teams' events."]}
    return team, {}


def _create(request: HttpRequest) -> dict[str, list[str]]:
    team, errors = _wanted_team(request)
    if errors:
        return errors
    try:
        create_subscription(
            user=request.user,
            team=team,
            kinds=request.POST.getlist("kinds"),
            channel=request.POST.get("channel", ""),
            target=request.POST.get("target", "")[:2000],
        )
    except ValidationError as exc:
        return exc.message_dict
    return {}


@login_required
def notification_settings(request: HttpRequest) -> HttpResponse:
    """Which events reach you, and how: add or remove subscriptions (field errors: 422)."""
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        if "told_by_default" in request.POST:
            set_told_by_default(user=request.user, on=request.POST["told_by_default"] == "on")
            return redirect("notification-settings")
        if "delete" in request.POST:
            delete_subscription(user=request.user, subscription_id=_int(request.POST["delete"]))
            return redirect("notification-settings")
        errors = _create(request)
        if not errors:
            return redirect("notification-settings")
    subs = [
        {
            "sub": sub,
            "target": mask(sub.target, sub.channel),
            "kinds": [KINDS[k] for k in sub.kinds],
        }
        for sub in subscriptions_for_user(request.user)
    ]
    return render(
        request,
        "portal/notification_settings.html",
        {
            "subscriptions": subs,
            "told_by_default": is_told_by_default(request.user),
            "teams": list(teams_user_may_subscribe_for(request.user)),
            "every_team": sees_every_team(request.user),
            "kinds": KINDS,
            "channels": NotificationSubscription.Channel.choices,
            "errors": errors,
            "posted": request.POST if errors else {},
            "posted_kinds": request.POST.getlist("kinds") if errors else [],
        },
        status=422 if errors else 200,
    )
