"""Tasks handed to Celery through PostgreSQL (a transactional outbox).

``send_later`` writes the task in the caller's transaction; when it commits the task is
published at once (short timeouts: a broker that is down or hung costs the request at most
a couple of seconds, once, then it is skipped for a while). What could not be published
stays in the table and the relay (a beat task, every ``QM_OUTBOX_SECONDS``) publishes it
when the broker is back. So an approval made while Redis is down is never lost and never
blocks its page. Tasks sent this way must be idempotent: after a crash between publishing
and marking, the relay sends a task again.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from typing import Any

from celery import shared_task
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from portal.celery import app as celery_app
from portal.models import OutboxMessage

log = logging.getLogger(__name__)

# After a failed publish the broker is not tried from a request for this long (the relay
# and the next requests after it try again).
SKIP_SECONDS = 10.0
# The relay leaves messages younger than this to the publish their commit started.
GRACE = dt.timedelta(seconds=5)
RELAY_BATCH = 500

_lock = threading.Lock()
_skip_until = 0.0


def broker_skipped() -> bool:
    return time.monotonic() < _skip_until


def _publish(task: str, args: list[Any]) -> None:
    global _skip_until
    try:
        # The portal's app by name: Celery's current_app is per thread, and in a web server's
        # other threads it is a default app with a default broker.
        celery_app.send_task(task, args=args)
    except Exception:  # any broker failure: the message waits in the table
        with _lock:
            _skip_until = time.monotonic() + SKIP_SECONDS
        raise


def send_later(task: str, *args: Any, once: bool = False) -> None:
    """Publish ``task(*args)`` when the current transaction commits, or later by the relay.
    ``once``: not again if this transaction already queued the same call."""
    call = (task, repr(list(args)))
    pending = transaction.get_connection().run_on_commit
    if once and any(getattr(entry[1], "qm_outbox", None) == call for entry in pending):
        return
    message = OutboxMessage.objects.create(task=task, args=list(args))

    def publish() -> None:
        _publish_now(message.pk, task, list(args))

    publish.qm_outbox = call  # type: ignore[attr-defined]
    transaction.on_commit(publish)


def _publish_now(pk: int, task: str, args: list[Any]) -> None:
    if broker_skipped():
        return
    try:
        _publish(task, args)
    except Exception as exc:
        log.warning(
            "could not queue %s (the relay sends it when the broker is back): %s", task, exc
        )
        OutboxMessage.objects.filter(pk=pk).update(attempts=1, last_error=str(exc)[:1000])
        return
    OutboxMessage.objects.filter(pk=pk).update(sent_at=timezone.now(), attempts=1)


def relay(*, now: dt.datetime | None = None) -> int:
    """Publish what was not published (the same task and arguments once); how many sent."""
    now = now or timezone.now()
    sent = 0
    with transaction.atomic():  # two relays at once take different messages
        waiting = list(
            OutboxMessage.objects.filter(sent_at=None, created_at__lte=now - GRACE)
            .order_by("pk")
            .select_for_update(skip_locked=True)[:RELAY_BATCH]
        )
        by_call: dict[tuple[str, str], list[OutboxMessage]] = {}
        for message in waiting:
            by_call.setdefault((message.task, repr(message.args)), []).append(message)
        for messages in by_call.values():
            first, ids = messages[0], [m.pk for m in messages]
            try:
                _publish(first.task, first.args)
            except Exception as exc:
                log.warning("outbox: %s still not queued: %s", first.task, exc)
                OutboxMessage.objects.filter(pk__in=ids).update(
                    attempts=F("attempts") + 1, last_error=str(exc)[:1000]
                )
                break  # the broker is away: the next relay goes on
            OutboxMessage.objects.filter(pk__in=ids).update(
                attempts=F("attempts") + 1, sent_at=timezone.now()
            )
            sent += 1
    OutboxMessage.objects.filter(sent_at__lt=now - dt.timedelta(days=1)).delete()
    return sent


@shared_task(name="portal.outbox.relay_outbox_task", ignore_result=True)
def relay_outbox_task() -> None:
    relay()


def unsent() -> tuple[int, dt.datetime | None]:
    """How many messages wait for the broker, and since when (for readiness and metrics)."""
    pending = OutboxMessage.objects.filter(sent_at=None)
    oldest = pending.order_by("created_at").values_list("created_at", flat=True).first()
    return pending.count(), oldest
