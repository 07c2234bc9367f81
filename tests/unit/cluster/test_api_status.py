"""What the polls tell of the Kubernetes API, read from the recorded polls alone."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from cluster.models import SyncRun
from cluster.selectors import api_status

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def run(seconds_ago: float, *, error: str = "", finished: bool = True) -> SyncRun:
    started = NOW - dt.timedelta(seconds=seconds_ago)
    return SyncRun.objects.create(
        started_at=started,
        finished_at=started + dt.timedelta(seconds=1) if finished else None,
        error=error,
    )


@pytest.fixture(autouse=True)
def interval(settings: Any) -> None:
    settings.QM_POLL_SECONDS = 30


def test_never_polled() -> None:
    assert api_status(now=NOW).state == "never"


def test_a_recent_good_poll_is_ok() -> None:
    run(10)
    status = api_status(now=NOW)
    assert (status.state, status.message) == ("ok", "polled 10 s ago")


def test_unreachable_since_the_first_failure_after_the_last_good_poll() -> None:
    run(120)
    first = run(90, error="cannot reach the Kubernetes API: timed out")
    run(60, error="cannot reach the Kubernetes API: refused")
    status = api_status(now=NOW)
    assert status.state == "unreachable"
    assert status.since == first.started_at
    assert status.message == "cannot reach the Kubernetes API: refused"  # the newest words
    assert status.last_ok == NOW - dt.timedelta(seconds=120)


def test_a_poll_without_an_answer_for_a_poll_interval_is_unreachable() -> None:
    run(50)
    hanging = run(31, finished=False)
    status = api_status(now=NOW)
    assert (status.state, status.since) == ("unreachable", hanging.started_at)
    assert status.message == "no answer for 31 s"


def test_a_poll_still_running_within_its_interval_is_not_an_outage() -> None:
    run(40)
    run(5, finished=False)
    assert api_status(now=NOW).state == "ok"


def test_nobody_polling_is_stale_not_unreachable() -> None:
    run(200)
    status = api_status(now=NOW)
    assert status.state == "stale"
    assert "are the worker and beat running?" in status.message


def test_a_good_poll_ends_the_outage() -> None:
    run(90, error="refused")
    run(20)
    assert api_status(now=NOW).state == "ok"
