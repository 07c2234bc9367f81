"""A chargeback as rows: the showback's summary, a team's month invoice, and its CSV; the
page, the CSV and the API give the same rows. Money is a string of the cent (``"946.29"``),
hours to three decimals, and hours not read are ``None`` ("not read" on the page, empty in
CSV): they are never made up."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal
from typing import Any

from costs.chargeback import Chargeback, Line, TeamBill
from portal.vocabulary.numbers import to_cent

HOURS = Decimal("0.001")

SHARING_SAYS = {
    "platform": "Idle capacity (allocatable GPU-hours no team's pod was allocated) is kept by "
    "the platform: it is the platform's line, no team's.",
    "quota": "Idle capacity (allocatable GPU-hours no team's pod was allocated) is shared over "
    "the teams by their quota of each resource, per cluster and day; what no team had quota "
    "for is the platform's line.",
    "use": "Idle capacity (allocatable GPU-hours no team's pod was allocated) is shared over "
    "the teams by their use of each resource, per cluster and day; what no team used is the "
    "platform's line.",
}
ROUNDING_SAYS = (
    "Amounts are computed exactly and rounded once, half to even, to the cent: each team's "
    "total and the fleet's; the platform's line is the fleet's total less the teams', so it "
    "carries the rounding. Lines are each rounded alike and may differ from the total by it."
)
PRICES_SAY = (
    "Each day is priced at the price that held on it; a MIG slice without a price of its "
    "own costs its share of its GPU's price; a device allocated through a DRA device class "
    "without a price of its own costs what it costs through the device plugin (its share of "
    "the whole GPU). GPUs published through DRA cost their whole GPUs' hours; what their "
    "devices' prices leave of it is their idle capacity, shared by use in GPU-hours, else "
    "the platform's. A pool's GPU model is today's: the product its selector names, else "
    "the one most of its nodes carry."
)


def money(amount: Decimal) -> str:
    return str(to_cent(amount))


def hours(amount: Decimal | None) -> str | None:
    return None if amount is None else str(amount.quantize(HOURS))


def _line(line: Line) -> dict[str, Any]:
    return {
        **({"day": line.day.isoformat()} if line.day is not None else {}),
        "cluster": line.cluster,
        "namespace": line.namespace,
        "resource": line.resource,
        "device_class": line.device_class,
        "gpu_hours": hours(line.gpu_hours),
        "device_hours": hours(line.device_hours),
        "busy_gpu_hours": hours(line.busy_hours),
        "allocated_cost": money(line.allocated),
        "idle_share": money(line.idle_share),
        "cost": money(line.cost),
    }


# A DRA device class's quota counts devices of any kind (a whole GPU or a MIG slice), not GPUs:
# no share of a GPU's idle hours can be read from it.
DRA_BY_QUOTA_SAYS = (
    " GPUs published through DRA are the exception: a device class's quota counts devices, "
    "not GPUs, so their idle capacity is the platform's line too."
)


def policy_says(charge: Chargeback) -> str:
    """How idle capacity was shared, as every report says it (with the DRA exception where
    the period had GPUs published through DRA and the sharing is by quota)."""
    said = SHARING_SAYS[charge.idle_sharing]
    if charge.idle_sharing == "quota" and any(pool.dra for pool in charge.pools):
        said += DRA_BY_QUOTA_SAYS
    return said


def team_summary(bill: TeamBill) -> dict[str, Any]:
    lines = bill.lines.values()
    busy = [line.busy_seconds for line in lines if line.busy_seconds is not None]
    return {
        "team": bill.team,
        "gpu_hours": hours(Decimal(repr(sum(line.gpu_seconds for line in lines))) / 3600),
        "device_hours": hours(Decimal(repr(sum(line.device_seconds for line in lines))) / 3600),
        "busy_gpu_hours": hours(Decimal(repr(sum(busy))) / 3600) if busy else None,
        "allocated_cost": money(bill.allocated),
        "idle_share": money(bill.idle_share),
        "total": str(bill.total),
    }


def invoice(charge: Chargeback, team: str) -> dict[str, Any]:
    """One team's invoice for the chargeback's period: its lines per cluster, namespace and
    resource, its days, its total; the policy said. It names no other team."""
    bill = charge.teams.get(team) or TeamBill(team)
    return {
        "team": team,
        "start": charge.start.isoformat(),
        "end": charge.end.isoformat(),
        "currency": charge.currency,
        "idle_sharing": charge.idle_sharing,
        "idle_sharing_says": policy_says(charge),
        "rounding": ROUNDING_SAYS,
        "lines": [_line(line) for _, line in sorted(bill.lines.items())],
        "days": [
            {"day": day.isoformat(), "cost": money(amount)}
            for day, amount in sorted(bill.days.items())
        ],
        "daily_lines": [_line(line) for line in sorted(bill.daily_lines, key=_daily_key)],
        **{k: v for k, v in team_summary(bill).items() if k != "team"},
    }


def _daily_key(line: Line) -> tuple[Any, ...]:
    return (line.day or dt.date.min, line.cluster, line.namespace, line.resource)


def summary(charge: Chargeback, *, sees_all: bool) -> dict[str, Any]:
    """The showback: each team's figures (those the user may see), the platform's line and,
    for those who see every team, the fleet's total, its pools and its queues."""
    out: dict[str, Any] = {
        "start": charge.start.isoformat(),
        "end": charge.end.isoformat(),
        "currency": charge.currency,
        "idle_sharing": charge.idle_sharing,
        "idle_sharing_says": policy_says(charge),
        "rounding": ROUNDING_SAYS,
        "teams": [team_summary(bill) for bill in charge.teams.values()],
        "platform": str(charge.platform_total),
        "unpriced": charge.unpriced,
    }
    if sees_all:
        out["fleet"] = str(charge.fleet_total)
        out["pools"] = [
            {
                "cluster": p.cluster,
                "pool": p.name,
                "resource": p.resource,
                "by_dra": p.dra,
                "allocatable_hours": hours(p.allocatable_hours),
                "allocated_hours": hours(p.allocated_hours),
                "idle_hours": hours(p.allocatable_hours - p.allocated_hours),
                "cost": money(p.cost),
                "idle_cost": money(p.idle_cost),
            }
            for p in charge.pools
        ]
        out["queues"] = [
            {
                "cluster": q.cluster,
                "cluster_queue": q.name,
                "flavor": q.flavor,
                "resource": q.resource,
                "admitted_hours": hours(q.allocated_hours),
                "cost": money(q.cost),
            }
            for q in charge.queues
        ]
    return out


INVOICE_COLUMNS = [
    "day",
    "cluster",
    "namespace",
    "resource",
    "device_class",
    "gpu_hours",
    "device_hours",
    "busy_gpu_hours",
    "allocated_cost",
    "idle_share",
    "cost",
]


def invoice_csv(bill: dict[str, Any]) -> str:
    """The invoice as CSV: a line per day, cluster, namespace and resource, then the total
    (empty busy hours: not read)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [
            f"# invoice of {bill['team']}, {bill['start']} to {bill['end']} "
            f"(exclusive), in {bill['currency']}. {bill['idle_sharing_says']} "
            f"{bill['rounding']}"
        ]
    )
    writer.writerow(INVOICE_COLUMNS)
    for line in bill["daily_lines"]:
        writer.writerow(["" if line[c] is None else line[c] for c in INVOICE_COLUMNS])
    writer.writerow(
        [
            "total",
            "",
            "",
            "",
            "",
            bill["gpu_hours"],
            bill["device_hours"],
            bill["busy_gpu_hours"] or "",
            bill["allocated_cost"],
            bill["idle_share"],
            bill["total"],
        ]
    )
    return out.getvalue()
