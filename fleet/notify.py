"""Notification hooks for MIG change requests: a generic webhook and e-mail.

Sent by a Celery task so a slow endpoint never slows a page down; a failure is logged and
never undoes the change it reports.
"""

from __future__ import annotations

import json
import logging
import urllib.request

from django.conf import settings
from django.core.mail import send_mail

from fleet.models import MigChangeRequest

log = logging.getLogger(__name__)
SUBJECTS = {
    "requested": "MIG change #{id} requested: {nodes} -> {config}",
    "approved": "MIG change #{id} approved",
    "rejected": "MIG change #{id} rejected",
    "succeeded": "MIG change #{id} succeeded",
    "failed": "MIG change #{id} failed",
    "rolled_back": "MIG change #{id} rolled back",
}


def notify(event: str, request: MigChangeRequest) -> None:
    """Queue the notification (nothing configured: nothing sent)."""
    if not (settings.QM_NOTIFY_WEBHOOK_URL or settings.QM_NOTIFY_EMAILS):
        return
    from fleet.tasks import notify_task

    try:
        notify_task.delay(event, request.pk)
    except Exception as exc:  # a broker outage must not fail the change itself
        log.warning("could not queue a %s notification: %s", event, exc)


def payload(event: str, request: MigChangeRequest) -> dict[str, object]:
    return {
        "event": f"mig_change.{event}",
        "id": request.pk,
        "state": request.state,
        "team": request.team.slug,
        "nodes": request.nodes,
        "target_config": request.target_config,
        "verdict": request.verdict,
        "reason": request.reason,
        "failure": request.failure,
        "requested_by": request.requested_by.get_username(),
        "decided_by": request.decided_by.get_username() if request.decided_by else None,
    }


def send(event: str, request: MigChangeRequest) -> None:
    data = payload(event, request)
    if settings.QM_NOTIFY_WEBHOOK_URL:
        body = json.dumps(data).encode()
        http = urllib.request.Request(
            settings.QM_NOTIFY_WEBHOOK_URL,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(http, timeout=10) as response:  # the URL is set by an admin
            response.read()
    if settings.QM_NOTIFY_EMAILS:
        subject = SUBJECTS[event].format(
            id=request.pk, nodes=", ".join(request.nodes), config=request.target_config
        )
        send_mail(subject, json.dumps(data, indent=2), None, settings.QM_NOTIFY_EMAILS)
