"""Notification hooks, for any portal event: the installation's generic webhook (JSON POST)
and e-mail addresses, and people's own subscriptions
(portal/notifications/subscriptions.py): a line in their notifications list, and e-mail,
Slack, Microsoft Teams or a generic webhook.

Sends are Celery tasks queued through the outbox (portal/infra/outbox.py), so a slow endpoint
never slows a page down and a broker outage loses nothing. A webhook gets a timeout
(``QM_NOTIFY_TIMEOUT_SECONDS``) and goes out through the egress rule
(portal/infra/egress.py: public addresses only, the checked address, no redirects); an
unreachable one, a 429 or a 5xx is retried with backoff, another answer is given up at once;
the last failure is kept on the subscription for its owner to read, as a short sentence
("HTTP 500", "could not deliver: no connection"), never what the endpoint answered. A
failure never undoes what it reports. Nothing configured: nothing sent.
The task carries the subscription's id, never its URL (a secret, read when sending).

Without subscribing, the people an event concerns are told too (its ``Audience``: the
person who asked for a change when it is decided and when it ends, the members of the
teams it hits): a line in their notifications list and, where their account has an
address, an e-mail. A person reached by their own subscriptions as well is told once
(one line; their subscription's e-mail or webhook instead of the default e-mail); a person
who turned the default notifications off (``NotificationPreference``) hears only what they
subscribed to; nobody is told of their own act.
"""

from __future__ import annotations

import json
import logging
import smtplib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.access.selectors import pod_names_of
from portal.infra import outbox
from portal.infra.egress import SendFailed, post_json
from portal.models import Notification, NotificationSubscription
from portal.notifications.payloads import (
    RENDERERS,
    Message,
    email_text,
    message_for,
    message_from_json,
)
from portal.notifications.subscriptions import subscribers

log = logging.getLogger(__name__)

Channel = NotificationSubscription.Channel
MAX_TRIES = 6


@dataclass(frozen=True)
class Audience:
    """Who an event concerns, told without subscribing: ``people`` (user ids: the person
    who asked), the members of ``teams`` (slugs: every member, lead, member or viewer), but
    never ``actor`` (the person whose act it is)."""

    people: frozenset[int] = frozenset()
    teams: frozenset[str] = frozenset()
    actor: int | None = None

    @classmethod
    def of(
        cls, people: Iterable[int | None] = (), teams: Iterable[str] = (), actor: int | None = None
    ) -> Audience:
        return cls(
            frozenset(p for p in people if p is not None), frozenset(t for t in teams if t), actor
        )


NOBODY = Audience()


def notify_event(
    event: str,
    subject: str,
    payload: dict[str, Any],
    audience: Audience = NOBODY,
    *,
    cluster: int | None,
) -> None:
    """Tell the installation's hooks, the people subscribed to this kind of event and the
    people it concerns (``audience``). ``cluster``: the id of the cluster the event is on
    (its request's): the pods it names are of that cluster, redacted for each person by
    who owns their namespace there (``CLUSTER_UNKNOWN`` for an event of no one cluster, a
    team's budget: a namespace is named to those whose teams own one of its name)."""
    if settings.QM_NOTIFY_WEBHOOK_URL or settings.QM_NOTIFY_EMAILS:
        outbox.send_later("portal.notify.notify_task", event, subject, payload)
    message = message_for(event, subject, payload, settings.QM_PUBLIC_URL, cluster=cluster)
    if not message.kind:
        return
    try:
        tell_people(message, audience)
    except Exception:  # what it reports is done: a page must not fail after its commit
        log.exception("could not tell the people concerned by %s", event)


def told_by_default(audience: Audience) -> dict[int, str]:
    """The people of ``audience`` who are told (active, not the actor, not opted out),
    with their e-mail address ("" without one). One query."""
    if not settings.QM_NOTIFY_TEAMS or not (audience.people or audience.teams):
        return {}
    people = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(pk__in=audience.people) | Q(memberships__team__slug__in=audience.teams))
        .exclude(notification_preference__told_by_default=False)
    )
    if audience.actor is not None:
        people = people.exclude(pk=audience.actor)
    return dict(people.values_list("pk", "email").distinct())


def tell_people(message: Message, audience: Audience = NOBODY) -> None:
    """1. One line in the notifications list of each person reached (once, however many
    of their subscriptions match and whether or not the event concerns them); 2. one send
    per subscription with a channel; 3. one e-mail to each person the event concerns who
    has an address and no such subscription. Each person's line and sends carry the message
    as that person may read it (the one redaction rule: another team's pods and budgets are
    never named to a lead)."""
    subs = subscribers(message.kind, message.team)
    default = told_by_default(audience)
    persons = {sub.user_id for sub in subs} | set(default)
    if not persons:
        return
    names = pod_names_of(persons)
    seen = {person: message.seen_by(names[person]) for person in names}
    sent_otherwise = {sub.user_id for sub in subs if sub.channel != Channel.PORTAL}
    with transaction.atomic():
        Notification.objects.bulk_create(
            Notification(
                user_id=person,
                event=message.event,
                kind=message.kind,
                title=seen[person].title[:300],
                text="\n".join(f"{label}: {value}" for label, value in seen[person].facts),
                url=message.url[:500],
                team=message.team or "",
            )
            for person in sorted(seen)
        )
        for sub in subs:
            if sub.channel != Channel.PORTAL:
                outbox.send_later("portal.notify.deliver_task", sub.pk, seen[sub.user_id].as_json())
        for person in sorted(set(default) - sent_otherwise):
            if default[person] and person in seen:
                said = seen[person]
                outbox.send_later(
                    "portal.notify.mail_task", said.title, email_text(said), [default[person]]
                )


def send_event(event: str, subject: str, payload: dict[str, Any]) -> None:
    data = {"event": event, **payload}
    if settings.QM_NOTIFY_WEBHOOK_URL:
        post_json(settings.QM_NOTIFY_WEBHOOK_URL, data)
    if settings.QM_NOTIFY_EMAILS:
        send_mail(subject, json.dumps(data, indent=2), None, settings.QM_NOTIFY_EMAILS)


def deliver(subscription_id: int, message: Message) -> None:
    """Send one message to one subscription (gone since: nothing to do)."""
    sub = NotificationSubscription.objects.select_related("user").filter(pk=subscription_id).first()
    if sub is None:
        return
    if sub.channel == Channel.EMAIL:
        try:
            send_mail(message.title, email_text(message), None, [sub.target or sub.user.email])
        except (smtplib.SMTPException, OSError) as exc:  # refused, unreachable, timed out
            raise SendFailed(
                f"The mail server did not take it ({type(exc).__name__}).",
                retry=not isinstance(exc, smtplib.SMTPRecipientsRefused),
            ) from exc
    elif sub.channel in RENDERERS:
        post_json(sub.target, RENDERERS[sub.channel](message))
    NotificationSubscription.objects.filter(pk=sub.pk).update(
        last_sent_at=timezone.now(), last_error=""
    )


def _failed(subscription_id: int, error: str) -> None:
    log.warning("notification to subscription %s not sent: %s", subscription_id, error)
    NotificationSubscription.objects.filter(pk=subscription_id).update(last_error=error[:500])


@shared_task(
    name="portal.notify.deliver_task",
    bind=True,
    acks_late=True,
    max_retries=MAX_TRIES - 1,
    ignore_result=True,
)
def deliver_task(self: Any, subscription_id: int, message: dict[str, Any]) -> None:
    """Send one notification to one subscription, retried with backoff (5 s, 10 s, 20 s…)
    while the endpoint is away or busy; the last failure is kept on the subscription."""
    try:
        deliver(subscription_id, message_from_json(message))
    except SendFailed as exc:
        _failed(subscription_id, str(exc))
        if not exc.retry or self.request.retries >= self.max_retries:
            return
        raise self.retry(exc=exc, countdown=5 * 2**self.request.retries) from exc


@shared_task(
    name="portal.notify.notify_task",
    autoretry_for=(OSError,),
    retry_backoff=5,
    max_retries=5,
    ignore_result=True,
)
def notify_task(event: str, subject: str, payload: dict[str, Any]) -> None:
    """Send one notification to the installation's hooks (retried while unreachable)."""
    try:
        send_event(event, subject, payload)
    except SendFailed as exc:
        if exc.retry:
            raise OSError(str(exc)) from exc
        log.warning("notification %s not taken by QM_NOTIFY_WEBHOOK_URL: %s", event, exc)


@shared_task(
    name="portal.notify.mail_task",
    autoretry_for=(OSError,),
    retry_backoff=5,
    max_retries=5,
    ignore_result=True,
)
def mail_task(subject: str, body: str, recipients: list[str]) -> None:
    """One e-mail (the default notification of a person with an address)."""
    send_mail(subject, body, None, recipients)
