"""The outbox: tasks written with the decision, published on commit, relayed when the broker
was away, the same call once."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from portal.infra import outbox
from portal.models import OutboxMessage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[Any]]]:
    sent: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr(outbox, "_skip_until", 0.0)
    monkeypatch.setattr(
        outbox.celery_app, "send_task", lambda task, args: sent.append((task, args))
    )
    return sent


def test_published_when_the_transaction_commits_and_not_before(broker: list[Any]) -> None:
    with transaction.atomic():
        outbox.send_later("portal.notify.mail_task", "subject", "body", ["a@example.org"])
        assert broker == []
    assert broker == [("portal.notify.mail_task", ["subject", "body", ["a@example.org"]])]
    assert OutboxMessage.objects.get().sent_at is not None


def test_nothing_is_sent_for_a_transaction_rolled_back(broker: list[Any]) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        outbox.send_later("portal.notify.mail_task", "s", "b", [])
        raise RuntimeError("the decision failed")
    assert broker == [] and not OutboxMessage.objects.exists()


def test_once_per_transaction(broker: list[Any]) -> None:
    with transaction.atomic():
        for _ in range(3):
            outbox.send_later("cluster.tasks.apply_desired_state_task", once=True)
    assert len(broker) == 1 and OutboxMessage.objects.count() == 1


def test_a_broker_away_leaves_the_task_for_the_relay(
    broker: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(task: str, args: list[Any]) -> None:
        raise ConnectionError("Error 111 connecting to redis. Connection refused.")

    monkeypatch.setattr(outbox.celery_app, "send_task", down)
    for _ in range(2):  # the same call twice, then another
        outbox.send_later("changes.tasks.execute_mig_change_task", 7, "token-a")
    outbox.send_later("changes.tasks.execute_mig_change_task", 8, "token-b")
    waiting = OutboxMessage.objects.filter(sent_at=None)
    assert waiting.count() == 3
    assert "Connection refused" in waiting.first().last_error  # type: ignore[union-attr]
    assert outbox.broker_skipped()  # the next requests do not wait on the broker

    later = timezone.now() + dt.timedelta(minutes=1)
    assert outbox.relay(now=later) == 0  # still away: nothing marked
    monkeypatch.setattr(
        outbox.celery_app, "send_task", lambda task, args: broker.append((task, args))
    )
    assert outbox.relay(now=later) == 2
    assert sorted(args for _, args in broker) == [[7, "token-a"], [8, "token-b"]]
    assert not OutboxMessage.objects.filter(sent_at=None).exists()
    assert outbox.relay(now=later) == 0  # nothing twice


def test_the_relay_leaves_a_fresh_message_to_its_own_commit(broker: list[Any]) -> None:
    OutboxMessage.objects.create(task="portal.notify.mail_task", args=[])
    assert outbox.relay() == 0
    assert outbox.relay(now=timezone.now() + dt.timedelta(seconds=10)) == 1


def test_a_task_sent_from_another_thread_reaches_the_portals_broker(settings: Any) -> None:
    """A web server answers in many threads; Celery's current app is per thread."""
    import threading

    import redis

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("celery")
    outbox._skip_until = 0.0
    thread = threading.Thread(
        target=outbox.send_later, args=("portal.notify.mail_task", "s", "b", ["a@example.org"])
    )
    thread.start()
    thread.join()
    assert broker.llen("celery") == 1
    assert OutboxMessage.objects.get().sent_at is not None
    broker.delete("celery")
