"""Notification hooks: a generic webhook (JSON POST) and e-mail, for any portal event.

Queued as a Celery task through the outbox (portal/outbox.py), so a slow endpoint never slows
a page down and a broker outage loses nothing; a failure is logged and never undoes what it
reports. Nothing configured: nothing sent.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail

from portal import outbox

log = logging.getLogger(__name__)


def notify_event(event: str, subject: str, payload: dict[str, Any]) -> None:
    if not (settings.QM_NOTIFY_WEBHOOK_URL or settings.QM_NOTIFY_EMAILS):
        return
    outbox.send_later("portal.notify.notify_task", event, subject, payload)


def send_event(event: str, subject: str, payload: dict[str, Any]) -> None:
    data = {"event": event, **payload}
    if settings.QM_NOTIFY_WEBHOOK_URL:
        http = urllib.request.Request(
            settings.QM_NOTIFY_WEBHOOK_URL,
            data=json.dumps(data).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(http, timeout=10) as response:  # the URL is set by an admin
            response.read()
    if settings.QM_NOTIFY_EMAILS:
        send_mail(subject, json.dumps(data, indent=2), None, settings.QM_NOTIFY_EMAILS)


@shared_task(autoretry_for=(OSError,), retry_backoff=5, max_retries=5, ignore_result=True)
def notify_task(event: str, subject: str, payload: dict[str, Any]) -> None:
    """Send one notification (retried while the endpoint is unreachable)."""
    send_event(event, subject, payload)


def notify_people(subject: str, body: str, recipients: list[str]) -> None:
    """Tell people directly (the members of a team a change hits), by e-mail."""
    if not (settings.QM_NOTIFY_TEAMS and recipients):
        return
    outbox.send_later("portal.notify.mail_task", subject, body, sorted(set(recipients)))


@shared_task(autoretry_for=(OSError,), retry_backoff=5, max_retries=5, ignore_result=True)
def mail_task(subject: str, body: str, recipients: list[str]) -> None:
    send_mail(subject, body, None, recipients)
