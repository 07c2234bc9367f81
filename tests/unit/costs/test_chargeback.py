"""A month's chargeback over a made history (whole H100s, A100 slices of two profiles, the
H100's price changed mid-month), against figures computed by hand."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from costs import selectors
from costs.chargeback import to_cent
from costs.models import CostPolicy
from costs.reports import policy_says
from fleet.models import NodePool
from tests.unit.costs.history import NOVEMBER, dra, made
from usage.models import Rollup

pytestmark = pytest.mark.django_db
DECEMBER = dt.date(2026, 12, 1)


def close(amount: Decimal, expected: Decimal) -> bool:
    """Equal but for the last of Decimal's 28 digits (a third is no finite decimal)."""
    return abs(amount - expected) < Decimal("1e-18")


def test_each_team_pays_its_hours_at_each_days_price_and_the_platform_keeps_the_idle() -> None:
    made()
    bill = selectors.chargeback(NOVEMBER, DECEMBER)
    # team-a: 2 H100s x 24 h at 4.00 on the 14th and 15th, at 5.00 on the 16th and 17th,
    # and 3 1g.10gb (1/7 of an A100-80GB at 2.00) x 24 h x 4 days = 576/7
    assert close(bill.teams["team-a"].exact, 2 * 192 + 2 * 240 + Decimal(576) / 7)
    assert bill.teams["team-a"].total == Decimal("946.29")
    # team-b: 1 H100 x 24 h (96, then 120) and 4 3g.40gb (half an A100: 1.00) x 24 h x 4
    assert bill.teams["team-b"].total == Decimal("816.00")
    # the fleet: 4 H100s, 8 3g.40gb and 14 1g.10gb slices allocatable, all day
    assert bill.fleet_total == Decimal("2880.00")
    assert bill.platform_total == Decimal("1117.71")
    assert bill.unpriced == []
    # one team's bill, as its invoice asks it: its days, each at that day's price
    alone = selectors.chargeback(NOVEMBER, DECEMBER, ["team-a"])
    assert list(alone.teams) == ["team-a"] and alone.platform_total == bill.platform_total
    assert close(alone.teams["team-a"].days[dt.date(2026, 11, 14)], 192 + Decimal(144) / 7)
    assert close(alone.teams["team-a"].days[dt.date(2026, 11, 16)], 240 + Decimal(144) / 7)
    assert bill.unpriced == []


def test_idle_capacity_shared_by_quota_goes_to_the_teams_with_quota() -> None:
    made()
    CostPolicy.objects.create(idle_sharing="quota")
    bill = selectors.chargeback(NOVEMBER, DECEMBER)
    # The H100s' idle hour (one GPU) and the 1g.10gb slices' go to team-a (team-b has no
    # H100 quota); the 3g.40gb slices' idle half to team-b: nothing is left to the platform.
    assert bill.teams["team-a"].total == Decimal("1680.00")
    assert bill.teams["team-b"].total == Decimal("1200.00")
    assert bill.platform_total == Decimal("0.00")


def test_idle_shared_by_use_follows_the_hours_used() -> None:
    made()
    CostPolicy.objects.create(idle_sharing="use")
    bill = selectors.chargeback(NOVEMBER, DECEMBER)
    # H100 idle (96, then 120 a day) two thirds to team-a (2 of 3 GPUs used), a third to
    # team-b; the slices' idle to their only user.
    assert close(bill.teams["team-a"].exact, Decimal(2 * 192 + 2 * 240 + 4 * 96 + 288))
    assert close(bill.teams["team-b"].exact, Decimal(2 * 96 + 2 * 120 + 4 * 192 + 144))
    assert bill.platform_total == Decimal("0.00")


@pytest.mark.parametrize("sharing", ["platform", "quota", "use"])
def test_the_teams_plus_the_platform_equal_the_fleet_to_the_cent(sharing: str) -> None:
    made(teams=37)  # 37 teams of 1/7 of 2.00 for an hour a day: 8/7 each, never whole cents
    CostPolicy.objects.create(idle_sharing=sharing)
    bill = selectors.chargeback(NOVEMBER, DECEMBER)
    assert len(bill.teams) == 39
    assert to_cent(bill.teams["extra-000"].allocated) == to_cent(Decimal(8) / 7) == Decimal("1.14")
    teams = sum(b.total for b in bill.teams.values())
    assert teams + bill.platform_total == bill.fleet_total == Decimal("2880.00")
    assert bill.platform_total == bill.fleet_total - teams
    # the rounding the platform carries is at most half a cent per team
    assert abs(bill.fleet - sum(b.exact for b in bill.teams.values()) - bill.platform_total) <= (
        Decimal("0.005") * len(bill.teams)
    )


def test_team_cost_is_the_invoices_total_over_any_days() -> None:
    made()
    assert selectors.team_cost("team-a", NOVEMBER, DECEMBER) == Decimal("946.29")
    # only the 16th: 2 H100s at 5.00 and 3 slices at 2/7, a day
    day = dt.date(2026, 11, 16)
    assert selectors.team_cost("team-a", day, day + dt.timedelta(days=1)) == to_cent(
        240 + Decimal(144) / 7
    )
    assert selectors.team_cost("no-such-team", NOVEMBER, DECEMBER) == Decimal("0.00")


def test_a_pool_of_no_known_model_is_said_unpriced_and_costs_nothing() -> None:
    made()
    NodePool.objects.filter(name="a100").update(node_selector={"pool": "a100"})
    bill = selectors.chargeback(NOVEMBER, DECEMBER)
    assert bill.fleet_total == Decimal("1728.00")  # the H100s only
    assert bill.unpriced == [
        "pool a100 on default: nvidia.com/mig-1g.10gb (its GPU model is not known), 4 days",
        "pool a100 on default: nvidia.com/mig-3g.40gb (its GPU model is not known), 4 days",
    ]
    # the slices' pool seen nowhere: the teams' slices cost nothing, and that is said too
    Rollup.objects.on_every_cluster().filter(kind="pool", owner="a100").delete()
    bill = selectors.chargeback(NOVEMBER, DECEMBER)
    assert bill.teams["team-b"].total == Decimal("432.00")  # its H100 hours only
    assert bill.unpriced == [
        "teams' use of nvidia.com/mig-1g.10gb on default where no pool offered it (4 days)",
        "teams' use of nvidia.com/mig-3g.40gb on default where no pool offered it (4 days)",
    ]


def test_dra_devices_cost_their_class_price_else_their_share_beside_the_device_plugins() -> None:
    """The made history plus two A100-80GBs by DRA (history.dra), against hand figures."""
    made()
    dra()
    bill = selectors.chargeback(NOVEMBER, DECEMBER)
    # the DRA GPUs: 2 x 24 h x 2.00 a day, 4 days = 384 beside the device plugin's 2880
    assert bill.fleet_total == Decimal("3264.00")
    # team-a: its device plugin hours (864 + 576/7, above) and a whole GPU by gpu.nvidia.com
    # (no price of its own: the GPU's, 2.00) x 24 h x 4 = 192
    assert close(bill.teams["team-a"].exact, 864 + 192 + Decimal(576) / 7)
    assert bill.teams["team-a"].total == Decimal("1138.29")
    # team-b: 816, and two 3g.40gb by mig.nvidia.com: 1.00 each (half of 2.00) on the 14th
    # and 15th, the class's own 0.50 on the 16th and 17th: 2 x 24 x (1 + 1 + 0.5 + 0.5) = 144
    assert bill.teams["team-b"].total == Decimal("960.00")
    # the DRA GPUs' idle: 384 - 192 - 144 = 48 (the class priced below the share), the
    # platform's with the rest: the teams plus the platform are the fleet to the cent
    assert bill.platform_total == Decimal("1165.71")
    assert sum(b.total for b in bill.teams.values()) + bill.platform_total == bill.fleet_total
    assert bill.unpriced == []
    pool = next(p for p in bill.pools if p.dra)
    assert (pool.name, pool.allocatable_hours, pool.allocated_hours) == ("a100-dra", 192, 192)
    assert (to_cent(pool.cost), to_cent(pool.idle_cost)) == (Decimal("384.00"), Decimal("48.00"))
    # one namespace, one resource, two lines: the device plugin's and the class's
    lines = selectors.chargeback(NOVEMBER, DECEMBER, ["team-a"]).teams["team-a"].lines
    by_class = {
        k[3]: line for k, line in lines.items() if k[1:3] == ("team-a-work", "nvidia.com/gpu")
    }
    assert set(by_class) == {"", "gpu.nvidia.com"}
    assert to_cent(by_class["gpu.nvidia.com"].allocated) == Decimal("192.00")


def test_dra_idle_capacity_shared_by_use_goes_by_gpu_hours() -> None:
    made()
    dra()
    CostPolicy.objects.create(idle_sharing="use")
    bill = selectors.chargeback(NOVEMBER, DECEMBER)
    # the DRA GPUs' 48 idle: team-a's whole GPU and team-b's two halves are 24 GPU-hours a
    # day each: 12 a day each on the 16th and 17th, beside the device plugin's (above)
    assert close(bill.teams["team-a"].exact, Decimal(2 * 192 + 2 * 240 + 4 * 96 + 288 + 192 + 24))
    assert close(bill.teams["team-b"].exact, Decimal(2 * 96 + 2 * 120 + 4 * 192 + 144 + 144 + 24))
    assert bill.platform_total == Decimal("0.00")


def test_dra_idle_capacity_by_quota_stays_the_platforms_and_the_reports_say_so() -> None:
    """A device class's quota counts devices, not GPUs: by quota, the DRA GPUs' idle 48 (as
    above) is the platform's, and every report says why; without DRA GPUs it says nothing
    of it."""
    made()
    CostPolicy.objects.create(idle_sharing="quota")
    before = selectors.chargeback(NOVEMBER, DECEMBER)
    assert "through DRA" not in policy_says(before)
    dra()
    bill = selectors.chargeback(NOVEMBER, DECEMBER)
    assert bill.platform_total - before.platform_total == Decimal("48.00")
    assert sum(b.total for b in bill.teams.values()) + bill.platform_total == bill.fleet_total
    assert policy_says(bill).endswith(
        "GPUs published through DRA are the exception: a device class's quota counts devices, "
        "not GPUs, so their idle capacity is the platform's line too."
    )
