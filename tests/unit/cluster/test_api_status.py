"""What the polls tell of the Kubernetes API, read from the recorded polls alone: of each
cluster from its own polls, every cluster's in two queries."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.models import Cluster, SyncRun
from cluster.scope import settings_cluster
from cluster.selectors import api_status, cluster_runs, cluster_statuses, last_sync

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def run(
    seconds_ago: float, *, error: str = "", finished: bool = True, cluster: Cluster | None = None
) -> SyncRun:
    started = NOW - dt.timedelta(seconds=seconds_ago)
    return SyncRun.objects.create(
        **({"cluster": cluster} if cluster else {}),
        started_at=started,
        finished_at=started + dt.timedelta(seconds=1) if finished else None,
        error=error,
    )


@pytest.fixture(autouse=True)
def interval(settings: Any) -> None:
    settings.QM_POLL_SECONDS = 30


def test_never_polled() -> None:
    assert api_status(settings_cluster(), now=NOW).state == "never"


def test_a_recent_good_poll_is_ok() -> None:
    run(10)
    status = api_status(settings_cluster(), now=NOW)
    assert (status.state, status.message) == ("ok", "polled 10 s ago")


def test_unreachable_since_the_first_failure_after_the_last_good_poll() -> None:
    run(120)
    first = run(90, error="cannot reach the Kubernetes API: timed out")
    run(60, error="cannot reach the Kubernetes API: refused")
    status = api_status(settings_cluster(), now=NOW)
    assert status.state == "unreachable"
    assert status.since == first.started_at
    assert status.message == "cannot reach the Kubernetes API: refused"  # the newest words
    assert status.last_ok == NOW - dt.timedelta(seconds=120)


def test_a_poll_without_an_answer_for_a_poll_interval_is_unreachable() -> None:
    run(50)
    hanging = run(31, finished=False)
    status = api_status(settings_cluster(), now=NOW)
    assert (status.state, status.since) == ("unreachable", hanging.started_at)
    assert status.message == "no answer for 31 s"


def test_a_poll_still_running_within_its_interval_is_not_an_outage() -> None:
    run(40)
    run(5, finished=False)
    assert api_status(settings_cluster(), now=NOW).state == "ok"


def test_nobody_polling_is_stale_not_unreachable() -> None:
    run(200)
    status = api_status(settings_cluster(), now=NOW)
    assert status.state == "stale"
    assert "are the worker and beat running?" in status.message


def test_a_good_poll_ends_the_outage() -> None:
    run(90, error="refused")
    run(20)
    assert api_status(settings_cluster(), now=NOW).state == "ok"


def cluster(name: str) -> Cluster:
    return Cluster.objects.create(name=name, display_name=name, connection="token")


def test_each_cluster_has_its_own_status() -> None:
    infer, spare = cluster("infer"), cluster("spare")
    run(120, cluster=infer)
    down = run(90, error="cannot reach the Kubernetes API: refused", cluster=infer)
    run(60, error="cannot reach the Kubernetes API: refused", cluster=infer)
    run(10)  # the settings' cluster answers
    assert api_status(settings_cluster(), now=NOW).state == "ok"  # said by the caller
    away = api_status(infer, now=NOW)
    assert (away.state, away.since) == ("unreachable", down.started_at)
    assert last_sync(infer) is not None and last_sync(infer).started_at == NOW - dt.timedelta(
        seconds=60
    )
    assert last_sync(spare) is None and api_status(spare, now=NOW).state == "never"


def test_a_poll_status_names_its_cluster() -> None:
    """No cluster is no cluster: not read as the settings' one (the caller says so)."""
    run(10)
    for read in (cluster_runs, last_sync, api_status):
        with pytest.raises(TypeError, match="no cluster given"):
            read(None)  # type: ignore[arg-type]


def test_every_clusters_status_in_two_queries_whatever_their_number() -> None:
    infer = cluster("infer")
    run(120, cluster=infer)
    down = run(90, error="refused", cluster=infer)
    run(10)
    for index in range(5):
        more = cluster(f"more-{index}")
        for age in range(0, 300, 30):
            run(age + 5, cluster=more)
    with CaptureQueriesContext(connection) as queries:
        statuses = cluster_statuses(now=NOW)
    assert len(queries) == 2
    by_name = {s.cluster.name: s for s in statuses}
    assert [s.cluster.name for s in statuses] == sorted(by_name)
    assert (by_name["infer"].state, by_name["infer"].since) == ("unreachable", down.started_at)
    assert by_name["infer"].last_ok_at == NOW - dt.timedelta(seconds=120)
    assert by_name["infer"].message == "refused" and not by_name["infer"].ok
    assert by_name["default"].ok and by_name["default"].message == "polled 10 s ago"
    assert by_name["more-0"].ok and by_name["more-0"].latest is not None
    assert by_name["more-0"].latest.started_at == NOW - dt.timedelta(seconds=5)


@pytest.mark.parametrize("seed", range(6))
def test_every_clusters_status_is_what_its_fifty_newest_polls_tell(seed: int) -> None:
    """``cluster_statuses`` reads only the polls since the last answered one: the same status
    as all of the newest fifty, whatever the history (answered, failed, hanging, long
    outages, none answered, more than fifty)."""
    import random

    from cluster.selectors import RECENT_POLLS, cluster_runs, status_of

    rng = random.Random(seed)
    clusters = [cluster(f"c-{index}") for index in range(5)]
    for each in clusters:
        ages = sorted(rng.sample(range(1, 3000), rng.choice([0, 1, 3, 40, 80])))
        answered = rng.random()
        for age in ages:
            roll = rng.random()
            run(
                age + rng.random(),
                error="" if roll < answered else "refused",
                finished=roll < answered or rng.random() < 0.7,
                cluster=each,
            )
    by_name = {s.cluster.name: s for s in cluster_statuses(now=NOW)}
    for each in clusters:
        expected = status_of(list(cluster_runs(each)[:RECENT_POLLS]), now=NOW)
        assert by_name[each.name].api == expected, each.name
