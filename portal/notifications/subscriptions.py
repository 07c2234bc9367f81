"""Who is told of what: people's notification subscriptions (services and selectors) and
their in-portal notifications.

A team lead subscribes for their own teams; platform admins and approvers (who see every
team's requests) for any team or for every team. Webhook URLs are secrets: validated
(https only where ``QM_NOTIFY_HTTPS_ONLY``; public addresses only, portal/infra/egress.py),
stored, and shown back as their host and last
characters only. The team model is reached through the subscription's relation: the ground
floor does not import the tenants app.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator, URLValidator
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone

from portal.access.permissions import User, sees_every_team, unread_notifications, user_id
from portal.audit.record import Event, record_audit
from portal.infra.egress import check_url
from portal.models import Notification, NotificationPreference, NotificationSubscription
from portal.notifications.payloads import KINDS

Channel = NotificationSubscription.Channel
WEBHOOK_CHANNELS = (Channel.SLACK, Channel.TEAMS, Channel.WEBHOOK)
LATEST = 50


def _team_model() -> Any:
    return NotificationSubscription._meta.get_field("team").related_model


def teams_user_may_subscribe_for(user: User) -> QuerySet[Any]:
    """Every team for platform admins and approvers; the teams a user leads otherwise."""
    teams = _team_model().objects.only("slug").order_by("slug")
    if not user.is_authenticated:
        return teams.none()  # type: ignore[no-any-return]
    if sees_every_team(user):
        return teams  # type: ignore[no-any-return]
    return teams.filter(  # type: ignore[no-any-return]
        memberships__user_id=user.pk, memberships__role="lead"
    )


def may_subscribe(user: User) -> bool:
    return bool(user.is_authenticated and teams_user_may_subscribe_for(user).exists())


def subscriptions_for_user(user: User) -> QuerySet[NotificationSubscription]:
    return NotificationSubscription.objects.filter(user_id=user_id(user)).select_related("team")


def mask(target: str, channel: str) -> str:
    """What is shown of a target: an address in full (it is the user's own), a webhook URL
    as its scheme, host and last four characters (the rest is the secret)."""
    if channel not in WEBHOOK_CHANNELS or not target:
        return target
    parts = urlsplit(target)
    return f"{parts.scheme}://{parts.hostname or ''}/…{target[-4:]}"


def _target_errors(user: User, channel: str, target: str) -> list[str]:
    if channel == Channel.PORTAL:
        return ["No address or URL: the portal only shows it in your list."] if target else []
    if channel == Channel.EMAIL:
        if not target and not getattr(user, "email", ""):
            return ["Your account has no e-mail address: give one here."]
        if target:
            try:
                EmailValidator()(target)
            except ValidationError:
                return ["An e-mail address, e.g. gpu-team@example.org."]
        return []
    if not target:
        return ["The webhook URL the channel gave you."]
    schemes = ["https"] if settings.QM_NOTIFY_HTTPS_ONLY else ["https", "http"]
    try:
        URLValidator(schemes=schemes)(target)
    except ValidationError:
        if settings.QM_NOTIFY_HTTPS_ONLY and target.startswith("http://"):
            return ["An https:// URL: webhook URLs are secrets and travel encrypted only."]
        return ["A webhook URL, e.g. https://hooks.slack.com/services/…"]
    refused = check_url(target)
    return [refused] if refused else []


def _clean(
    user: User, *, team: Any, kinds: list[str], channel: str, target: str
) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if team is None and not sees_every_team(user):
        errors["team"] = ["Choose one of your teams: only platform admins follow every team."]
    elif team is not None and not teams_user_may_subscribe_for(user).filter(pk=team.pk).exists():
        errors["team"] = ["You lead no such team: a lead follows their own teams' events."]
    unknown = sorted(set(kinds) - set(KINDS))
    if not kinds:
        errors["kinds"] = ["Choose at least one kind of event."]
    elif unknown:
        errors["kinds"] = [f"Unknown kind: {', '.join(unknown)} (one of {', '.join(KINDS)})."]
    if channel not in Channel.values:
        errors["channel"] = [f"One of {', '.join(Channel.values)}."]
    else:
        target_errors = _target_errors(user, channel, target)
        if target_errors:
            errors["target"] = target_errors
    return errors


def _snapshot(sub: NotificationSubscription) -> dict[str, Any]:
    return {
        "team": sub.team.slug if sub.team else "every team",
        "kinds": sub.kinds,
        "channel": sub.channel,
        "target": mask(sub.target, sub.channel),
    }


@transaction.atomic
def create_subscription(
    *,
    user: User,
    team: Any,
    kinds: list[str],
    channel: str,
    target: str = "",
    source: str = "web",
) -> NotificationSubscription:
    """A new subscription of ``user`` (field errors as a ``ValidationError``), audited."""
    target = target.strip()
    errors = _clean(user, team=team, kinds=kinds, channel=channel, target=target)
    if errors:
        raise ValidationError(errors)
    ordered = [kind for kind in KINDS if kind in kinds]
    sub = NotificationSubscription.objects.create(
        user_id=user_id(user), team=team, kinds=ordered, channel=channel, target=target
    )
    record_audit(
        actor=user,
        event=Event.NOTIFICATION_SUBSCRIPTION_CREATED,
        source=source,
        target=sub,
        team=team,
        new=_snapshot(sub),
    )
    return sub


@transaction.atomic
def delete_subscription(*, user: User, subscription_id: int, source: str = "web") -> None:
    """Remove one of the user's own subscriptions (another's is a 404), audited."""
    sub = subscriptions_for_user(user).filter(pk=subscription_id).first()
    if sub is None:
        raise Http404("No such subscription.")
    record_audit(
        actor=user,
        event=Event.NOTIFICATION_SUBSCRIPTION_DELETED,
        source=source,
        target=sub,
        team=sub.team,
        old=_snapshot(sub),
    )
    sub.delete()


# ----------------------------------------------------------------------------- told by default


def is_told_by_default(user: User) -> bool:
    """Whether ``user`` is told of the events that concern them without subscribing (on
    unless they turned it off)."""
    return not NotificationPreference.objects.filter(
        user_id=user_id(user), told_by_default=False
    ).exists()


@transaction.atomic
def set_told_by_default(*, user: User, on: bool, source: str = "web") -> bool:
    """Turn the user's own default notifications on or off, audited (once per change:
    setting what is already set records nothing). Whether it changed."""
    was = is_told_by_default(user)
    if was == on:
        return False
    pref, _ = NotificationPreference.objects.update_or_create(
        user_id=user_id(user), defaults={"told_by_default": on}
    )
    record_audit(
        actor=user,
        event=Event.NOTIFICATION_PREFERENCE_CHANGED,
        source=source,
        target=pref,
        old={"told_by_default": was},
        new={"told_by_default": on},
    )
    return True


# ----------------------------------------------------------------------------- who is told


def subscribers(kind: str, team: str | None) -> list[NotificationSubscription]:
    """The subscriptions an event of ``kind`` about ``team`` reaches, checked against each
    person's roles now (a lead who left the team, an admin no more, is told nothing).
    Three queries whatever the number of subscriptions."""
    subs = list(
        NotificationSubscription.objects.filter(kinds__contains=[kind], user__is_active=True)
        .filter(Q(team__isnull=True) | Q(team__slug=team or ""))
        .select_related("user")
        .order_by("pk")
    )
    if not subs:
        return []
    users = {sub.user_id for sub in subs}
    wide = set(
        get_user_model()
        .objects.filter(pk__in=users)
        .filter(Q(is_superuser=True) | Q(platform_roles__role__in=["admin", "approver"]))
        .values_list("pk", flat=True)
    )
    leads = set(
        _team_model()
        .objects.filter(slug=team or "", memberships__role="lead", memberships__user_id__in=users)
        .values_list("memberships__user_id", flat=True)
    )
    return [sub for sub in subs if sub.user_id in wide or (sub.team_id and sub.user_id in leads)]


# ----------------------------------------------------------------------------- the list


def notifications_for_user(user: User) -> QuerySet[Notification]:
    return Notification.objects.filter(user_id=user_id(user)).order_by("-created_at", "-id")


def unread_count(user: User) -> int:
    """The user's unread notifications (in a page request, read with their roles)."""
    return unread_notifications(user)


def mark_read(*, user: User, notification_id: int | None = None) -> int:
    """Mark one of the user's notifications (or all of them) read; how many were unread."""
    unread = Notification.objects.filter(user_id=user_id(user), read_at=None)
    if notification_id is not None:
        unread = unread.filter(pk=notification_id)
    return unread.update(read_at=timezone.now())
