"""Every team's bill over a generated month: a dozen teams with two namespaces each, whole
H100s (their price changed on the 16th) and A100 slices of two profiles, amounts that are
no finite decimal, the 28th's hours not yet rolled into a day (the 27th's still kept beside
its day), DCGM's busy hours on some days. The totals are those the chargeback gave before
its rows were read by hand and priced in one pass (2026-12-06), to the cent; each bill is
the same, to the last digit, asked with every team's or by its team's name."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from cluster.scope import settings_cluster_id
from costs import selectors
from costs.chargeback import Chargeback, Line, TeamBill, to_cent
from costs.models import BusyDay, CostPolicy
from tests.unit.costs.history import GPU, MIG_1G, MIG_3G, NOVEMBER, midnight, pools, prices
from usage.models import Rollup, SamplingState

pytestmark = pytest.mark.django_db
DECEMBER = dt.date(2026, 12, 1)
TEAMS = [f"team-{t:02d}" for t in range(12)]
SHARE = {GPU: 1.0, MIG_3G: 0.5, MIG_1G: 1 / 7}
ROLLED_UP_TO = midnight(dt.date(2026, 11, 28)) + dt.timedelta(hours=14)


def series(start: dt.datetime, seconds: float, step: int, cluster_id: int) -> list[Rollup]:
    """Every series' rollup of ``seconds`` from ``start`` (period by length), uses moved by
    ``step`` (a day's number, or an hour's), on the cluster given (a row built without one
    asks the database for the settings' cluster: a query for each of some 3,300 rows)."""
    period = "day" if seconds == 86400 else "hour"
    rows = []
    for t, team in enumerate(TEAMS):
        for n, namespace in enumerate((f"{team}-train", f"{team}-serve")):
            for resource in (GPU, MIG_3G) if n == 0 else (GPU, MIG_1G):
                used = ((t * 7 + step * 3 + n) % 5) / 3
                quota = 0 if t % 4 == 3 else 1 + (t + n) % 3
                kept = dict(owner=team, scope=namespace, resource=resource)
                rows.append(
                    Rollup(
                        cluster_id=cluster_id,
                        period=period,
                        start=start,
                        kind="team",
                        **kept,
                        covered_seconds=seconds,
                        used_seconds=used * seconds,
                        gpu_seconds=used * SHARE[resource] * seconds,
                        capacity_seconds=quota * seconds,
                    )
                )
    for pool, resource, cap in (("h100", GPU, 40), ("a100", MIG_3G, 24), ("a100", MIG_1G, 28)):
        used = cap * ((step % 4) + 1) / 5
        rows.append(
            Rollup(
                cluster_id=cluster_id,
                period=period,
                start=start,
                kind="pool",
                owner=pool,
                resource=resource,
                covered_seconds=seconds,
                used_seconds=used * seconds,
                gpu_seconds=used * SHARE[resource] * seconds,
                capacity_seconds=cap * seconds,
            )
        )
    return rows


def world() -> None:
    """November: days 1-27 rolled up, the 27th's hours still kept, the 28th's first 14 hours
    rolled up; busy hours read in the first namespace of every other team on even days."""
    prices()
    pools()
    cluster = settings_cluster_id()
    rows = []
    for day in range(1, 28):
        rows += series(midnight(dt.date(2026, 11, day)), 86400, day, cluster)
    for hour in range(24 + 14):
        start = midnight(dt.date(2026, 11, 27)) + dt.timedelta(hours=hour)
        rows += series(start, 3600, hour, cluster)
    Rollup.objects.bulk_create(rows)
    BusyDay.objects.bulk_create(
        BusyDay(
            cluster_id=cluster,
            day=dt.date(2026, 11, day),
            namespace=f"{team}-train",
            resource=GPU,
            busy_seconds=1000.5 * day,
            read_seconds=86400,
        )
        for team in TEAMS[::2]
        for day in range(2, 29, 2)
    )
    SamplingState.objects.create(rolled_up_to=ROLLED_UP_TO)


def bills(sharing: str) -> Chargeback:
    world()
    CostPolicy.objects.create(idle_sharing=sharing)
    return selectors.chargeback(NOVEMBER, DECEMBER)


# every team's total, the fleet's and the platform's line, as the chargeback gave them on
# 2026-12-06 (before its rows were read by hand and priced in one pass)
EXPECTED = {
    "platform": {
        "team-00": "4584.86",
        "team-01": "4497.05",
        "team-02": "4399.24",
        "team-03": "4560.24",
        "team-04": "4462.43",
        "team-05": "4584.86",
        "team-06": "4497.05",
        "team-07": "4399.24",
        "team-08": "4560.24",
        "team-09": "4462.43",
        "team-10": "4584.86",
        "team-11": "4497.05",
        "fleet": "139184.00",
        "platform": "85094.45",
    },
    "quota": {
        "team-00": "11486.49",
        "team-01": "16126.15",
        "team-02": "14233.32",
        "team-03": "4560.24",
        "team-04": "16091.54",
        "team-05": "14418.94",
        "team-06": "11398.68",
        "team-07": "4399.24",
        "team-08": "14394.32",
        "team-09": "11364.06",
        "team-10": "16213.96",
        "team-11": "4497.05",
        "fleet": "139184.00",
        "platform": "0.01",
    },
    "use": {
        "team-00": "11731.16",
        "team-01": "11494.81",
        "team-02": "11470.81",
        "team-03": "11656.84",
        "team-04": "11625.39",
        "team-05": "11731.16",
        "team-06": "11494.81",
        "team-07": "11470.81",
        "team-08": "11656.84",
        "team-09": "11625.39",
        "team-10": "11731.16",
        "team-11": "11494.81",
        "fleet": "139184.00",
        "platform": "0.01",
    },
}


@pytest.mark.parametrize("sharing", ["platform", "quota", "use"])
def test_every_bill_is_what_it_was_to_the_cent(sharing: str) -> None:
    every = bills(sharing)
    found = {team: str(bill.total) for team, bill in every.teams.items()}
    found |= {"fleet": str(every.fleet_total), "platform": str(every.platform_total)}
    assert found == EXPECTED[sharing]


def line_of(bill: TeamBill, namespace: str, resource: str) -> Line:
    return next(
        line
        for line in bill.lines.values()
        if (line.namespace, line.resource) == (namespace, resource)
    )


def test_the_days_rolled_up_and_todays_hours_count_once() -> None:
    every = bills("quota")

    def used(step: int) -> float:
        return ((5 * 7 + step * 3) % 5) / 3

    days = sum(used(day) * 86400 for day in range(1, 28))
    hours = sum(used(hour) * 3600 for hour in range(24, 24 + 14))
    odd = line_of(every.teams["team-05"], "team-05-train", GPU)
    assert odd.device_seconds == pytest.approx(days + hours, rel=1e-12)
    assert odd.busy_seconds is None  # not read
    even = line_of(every.teams["team-04"], "team-04-train", GPU)
    assert even.busy_seconds == sum(1000.5 * day for day in range(2, 29, 2))


@pytest.mark.parametrize("sharing", ["quota", "use"])
def test_each_bill_is_the_same_asked_alone_to_the_last_digit(sharing: str) -> None:
    every = bills(sharing)
    assert list(every.teams) == TEAMS
    for team in TEAMS:
        alone = selectors.chargeback(NOVEMBER, DECEMBER, [team]).teams[team]
        bill = every.teams[team]
        assert (alone.allocated, alone.idle_share) == (bill.allocated, bill.idle_share)
        assert alone.lines == bill.lines
        assert to_cent(sum(alone.days.values(), Decimal(0))) == bill.total
        assert len(alone.daily_lines) == 28 * 4 and not bill.daily_lines
