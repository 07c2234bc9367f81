"""Showback and chargeback (pure): what each team's GPU time cost over a period, what idle
capacity cost and who pays for it, from the usage rollups of each day and the price that
held on it.

How a cost is made, per cluster, day and GPU resource (a whole GPU or one MIG profile):

1. The fleet's cost: every pool's allocatable device-hours at the price of the pool's GPU
   model that day (``costs.pricing``). A pool whose model is not known, or a resource
   without a price that day, costs nothing and is named in ``unpriced``.
2. The rate: the fleet's cost over its allocatable device-hours (one pool: its price).
3. A team namespace's allocated cost: its allocated device-hours (pods running on a node)
   at the rate.
4. GPUs published through DRA (``DRA_GPUS``): their cost is their whole GPUs' allocatable
   hours at the whole GPU's price; a device a claim holds costs, per device-hour, the price
   of its DeviceClass, else what it costs through the device plugin (a whole GPU its price,
   a MIG device its profile's, else its share of the GPU's): its pools' devices of that
   class and resource that day at their pools' prices give the rate, as in 2. Their idle
   capacity (per cluster and day, every class and profile together) is their cost less what
   teams' devices cost; shared by use, it goes by GPU-hours (a MIG device weighs its share);
   by quota, it is the platform's (a class's quota counts devices, not GPU-hours).
5. Idle capacity: the fleet's cost less every team's allocated cost (allocatable hours no
   team's pod held, and pods of no team's namespace). The policy says who pays for it: the
   platform keeps it, or it is shared over the teams by their quota of that resource on
   that cluster that day, or by their use of it. With no team to share over (no quota, no
   use), the platform keeps it; a negative remainder (use seen beyond what was seen
   allocatable) stays the platform's, never charged to a team.

Rounding rule: every figure is kept exact (``Decimal``) until the end; then each team's
total over the period is rounded once, half to even, to the cent, and so is the fleet's;
the platform's line is the fleet's rounded total less the teams' rounded totals. So the
teams plus the platform equal the fleet to the cent, and the platform's line carries the
rounding (at most half a cent per team). Lines within a team are shown to the cent each,
rounded alike, and may differ from the team's total by the rounding of each.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import NamedTuple

from costs.pricing import PriceBook
from portal.vocabulary.numbers import to_cent

DRA_GPUS = "(dra)"  # the flavor of a pool's GPUs published through DRA (usage.models.DRA_GPUS)
GPU = "nvidia.com/gpu"
HOUR = Decimal(3600)
ZERO = Decimal(0)


@lru_cache(maxsize=1 << 16, typed=True)
def dec(value: float) -> Decimal:
    """A float of the rollups as the decimal it prints as (no binary tail). The last 65,536
    are kept: a month's rows repeat few (whole hours of whole devices), each made once."""
    return Decimal(repr(value)) if value else ZERO


class TeamRow(NamedTuple):
    """One team namespace's use of one resource on one day (summed rollups)."""

    cluster_id: int
    day: dt.date
    team: str
    namespace: str
    resource: str
    used_seconds: float
    gpu_seconds: float
    quota_seconds: float
    device_class: str = ""  # allocated through this DRA DeviceClass (blank: device plugin)


class PoolRow(NamedTuple):
    cluster_id: int
    day: dt.date
    pool: str
    resource: str
    used_seconds: float
    capacity_seconds: float
    flavor: str = ""  # DRA_GPUS: its GPUs published through DRA; a DeviceClass: devices held
    gpu_seconds: float = 0.0


class QueueRow(NamedTuple):
    cluster_id: int
    day: dt.date
    queue: str
    flavor: str
    resource: str
    used_seconds: float
    gpu_seconds: float


@dataclass
class Line:
    """A team's use of one resource in one namespace over the period (or one day)."""

    team: str
    cluster: str
    namespace: str
    resource: str
    day: dt.date | None = None
    device_seconds: float = 0.0
    gpu_seconds: float = 0.0
    busy_seconds: float | None = None  # None: utilisation not read
    allocated: Decimal = ZERO  # exact
    idle_share: Decimal = ZERO  # exact
    device_class: str = ""  # the DRA DeviceClass (blank: the device plugin)

    @property
    def cost(self) -> Decimal:
        return self.allocated + self.idle_share

    @property
    def device_hours(self) -> Decimal:
        return dec(self.device_seconds) / HOUR

    @property
    def gpu_hours(self) -> Decimal:
        return dec(self.gpu_seconds) / HOUR

    @property
    def busy_hours(self) -> Decimal | None:
        return None if self.busy_seconds is None else dec(self.busy_seconds) / HOUR


@dataclass
class TeamBill:
    team: str
    lines: dict[tuple[str, str, str, str], Line] = field(default_factory=dict)
    days: dict[dt.date, Decimal] = field(default_factory=lambda: defaultdict(lambda: ZERO))
    daily_lines: list[Line] = field(default_factory=list)
    allocated: Decimal = ZERO
    idle_share: Decimal = ZERO
    # (cluster, day, namespace, resource) whose busy seconds a line holds: DCGM reads a
    # namespace's devices, not whether the device plugin or DRA gave them, so once only
    busy_counted: set[tuple[int, dt.date, str, str]] = field(default_factory=set)

    @property
    def exact(self) -> Decimal:
        return self.allocated + self.idle_share

    @property
    def total(self) -> Decimal:
        return to_cent(self.exact)


@dataclass
class Showback:
    """A pool's or a queue's part of the fleet over the period."""

    cluster: str
    name: str
    resource: str
    flavor: str = ""
    allocatable_hours: Decimal = ZERO
    allocated_hours: Decimal = ZERO
    cost: Decimal = ZERO  # exact: a pool's allocatable hours, a queue's admitted hours
    idle_cost: Decimal = ZERO  # exact: a pool's allocatable hours nobody was allocated
    dra: bool = False  # its GPUs published through DRA


@dataclass
class Chargeback:
    start: dt.date
    end: dt.date  # exclusive
    currency: str
    idle_sharing: str
    teams: dict[str, TeamBill]
    fleet: Decimal  # exact
    fleet_idle: Decimal  # exact: the fleet's cost no team was allocated
    pools: list[Showback]
    queues: list[Showback]
    unpriced: list[str]
    every_team: dict[str, Decimal]  # exact: every team's total, those not kept too

    @property
    def fleet_total(self) -> Decimal:
        return to_cent(self.fleet)

    @property
    def platform_total(self) -> Decimal:
        """The platform's line: the fleet's rounded total less every team's rounded total
        (the rule), whichever teams' bills were kept."""
        return self.fleet_total - sum((to_cent(t) for t in self.every_team.values()), ZERO)


@dataclass(frozen=True)
class Inputs:
    teams: list[TeamRow]
    pools: list[PoolRow]
    queues: list[QueueRow]
    pool_models: Mapping[tuple[int, str], str]  # (cluster id, pool) -> GPU model
    clusters: Mapping[int, str]
    busy: Mapping[tuple[int, dt.date, str, str], float] | None = None


Key = tuple[int, dt.date, str]  # cluster id, day, resource (DRA_GPUS: its DRA GPUs)
DraKey = tuple[int, dt.date, str, str]  # cluster id, day, resource, DeviceClass


def key_of(row: TeamRow) -> Key:
    """The key whose fleet cost and idle capacity a team's row is part of."""
    return (row.cluster_id, row.day, DRA_GPUS if row.device_class else row.resource)


@dataclass
class Dra:
    """The GPUs published through DRA: the rate of a device of a class and resource per
    device-second, the pools' showback, what had no price."""

    rate: dict[DraKey, Decimal] = field(default_factory=dict)
    seen: set[DraKey] = field(default_factory=set)
    pools: dict[tuple[int, str], Showback] = field(default_factory=dict)
    unpriced: dict[str, set[dt.date]] = field(default_factory=lambda: defaultdict(set))


def _dra_fleet(inputs: Inputs, book: PriceBook, cost: dict[Key, Decimal]) -> Dra:
    """The DRA rows of the pools: their GPUs' cost into ``cost`` (key ``DRA_GPUS``), the
    devices' rate per class and resource from their pools' prices."""
    out = Dra()
    device_cost: dict[DraKey, Decimal] = defaultdict(lambda: ZERO)
    device_seconds: dict[DraKey, Decimal] = defaultdict(lambda: ZERO)
    for row in inputs.pools:
        if not row.flavor:
            continue
        model = inputs.pool_models.get((row.cluster_id, row.pool))
        cluster = inputs.clusters.get(row.cluster_id, "")
        show = out.pools.get((row.cluster_id, row.pool)) or out.pools.setdefault(
            (row.cluster_id, row.pool), Showback(cluster, row.pool, GPU, dra=True)
        )
        whole = row.flavor == DRA_GPUS
        price = book.per_hour(
            model, GPU if whole else row.resource, row.day, "" if whole else row.flavor
        )
        if price is None:
            what = f"pool {row.pool} on {cluster}: " + (
                f"{GPU} by DRA" if whole else f"{row.resource} by DRA class {row.flavor}"
            )
            why = "its GPU model is not known" if model is None else f"no {model} price"
            out.unpriced[f"{what} ({why})"].add(row.day)
            price = None
        if whole:
            show.allocatable_hours += dec(row.capacity_seconds) / HOUR
            if price is not None:
                cost[(row.cluster_id, row.day, DRA_GPUS)] += (
                    dec(row.capacity_seconds) * price / HOUR
                )
                show.cost += dec(row.capacity_seconds) * price / HOUR
            continue
        key = (row.cluster_id, row.day, row.resource, row.flavor)
        out.seen.add(key)
        show.allocated_hours += dec(row.gpu_seconds) / HOUR
        if price is not None:
            device_cost[key] += dec(row.used_seconds) * price / HOUR
            device_seconds[key] += dec(row.used_seconds)
            show.idle_cost -= dec(row.used_seconds) * price / HOUR
    out.rate = {key: device_cost[key] / s for key, s in device_seconds.items() if s}
    for show in out.pools.values():
        show.idle_cost = max(show.cost + show.idle_cost, ZERO)
    return out


def _fleet(
    inputs: Inputs, book: PriceBook
) -> tuple[dict[Key, Decimal], dict[Key, Decimal], list[Showback], list[str]]:
    """Per (cluster, day, resource): the fleet's cost and the rate per device-second; the
    pools' showback; what had no price."""
    cost: dict[Key, Decimal] = defaultdict(lambda: ZERO)
    seconds: dict[Key, Decimal] = defaultdict(lambda: ZERO)
    pools: dict[tuple[int, str, str], Showback] = {}
    unpriced: dict[str, set[dt.date]] = defaultdict(set)
    for row in inputs.pools:
        if row.flavor:
            continue  # GPUs published through DRA: _dra_fleet
        key = (row.cluster_id, row.day, row.resource)
        model = inputs.pool_models.get((row.cluster_id, row.pool))
        price = book.per_hour(model, row.resource, row.day)
        cap, used = dec(row.capacity_seconds), dec(row.used_seconds)
        cluster = inputs.clusters.get(row.cluster_id, "")
        show = pools.setdefault(
            (row.cluster_id, row.pool, row.resource),
            Showback(cluster, row.pool, row.resource),
        )
        show.allocatable_hours += cap / HOUR
        show.allocated_hours += used / HOUR
        seconds[key] += cap
        if price is None:
            what = f"pool {row.pool} on {cluster}: {row.resource}"
            why = "its GPU model is not known" if model is None else f"no {model} price"
            unpriced[f"{what} ({why})"].add(row.day)
            continue
        cost[key] += cap * price / HOUR
        show.cost += cap * price / HOUR
        show.idle_cost += max(cap - used, ZERO) * price / HOUR
    rate = {key: cost[key] / s for key, s in seconds.items() if s}
    return cost, rate, list(pools.values()), _said(unpriced)


def _said(unpriced: Mapping[str, set[dt.date]]) -> list[str]:
    return sorted(
        f"{what}, {len(days)} day{'s' if len(days) != 1 else ''}" for what, days in unpriced.items()
    )


def _unpooled(
    inputs: Inputs, rate: Mapping[Key, Decimal], dra: Dra, clusters: Mapping[int, str]
) -> list[str]:
    """Team use of a resource on a cluster's day no pool offered (no rate): costed nothing,
    said so. (A DRA device its pools held without a price is said as unpriced.)"""
    days: dict[tuple[str, str], set[dt.date]] = defaultdict(set)
    for row in inputs.teams:
        if row.used_seconds <= 0:
            continue
        if row.device_class:
            key = (row.cluster_id, row.day, row.resource, row.device_class)
            if key not in dra.seen:
                what = f"{row.resource} by DRA class {row.device_class}"
                days[(clusters.get(row.cluster_id, ""), what)].add(row.day)
        elif (row.cluster_id, row.day, row.resource) not in rate:
            days[(clusters.get(row.cluster_id, ""), row.resource)].add(row.day)
    return [
        f"teams' use of {resource} on {cluster} where no pool offered it "
        f"({len(found)} day{'s' if len(found) != 1 else ''})"
        for (cluster, resource), found in sorted(days.items())
    ]


def _weight(row: TeamRow, sharing: str) -> float:
    """What a team's row weighs in sharing its key's idle capacity: its quota, or its use
    (a DRA row's in GPU-hours, as its key mixes whole GPUs and MIG devices; a DRA class's
    quota counts devices, so by quota DRA idle capacity stays the platform's)."""
    if sharing == "quota":
        return 0.0 if row.device_class else row.quota_seconds
    if sharing == "use":
        return row.gpu_seconds if row.device_class else row.used_seconds
    return 0.0


def _priced(
    inputs: Inputs, rate: Mapping[Key, Decimal], dra: Dra, sharing: str
) -> tuple[list[Key], list[Decimal], dict[Key, Decimal], dict[Key, Decimal]]:
    """One pass over the team rows, in their order: each row's key and allocated cost; per
    key, the teams' allocated cost and the weight its idle capacity is shared by."""
    keys: list[Key] = []
    costs: list[Decimal] = []
    allocated: dict[Key, Decimal] = defaultdict(lambda: ZERO)
    totals: dict[Key, float] = defaultdict(float)
    for row in inputs.teams:
        key = key_of(row)
        cost = _allocated(row, rate, dra)
        keys.append(key)
        costs.append(cost)
        allocated[key] += cost
        weight = _weight(row, sharing)
        if weight > 0:
            totals[key] += weight
    return keys, costs, allocated, {key: dec(total) for key, total in totals.items()}


def _allocated(row: TeamRow, rate: Mapping[Key, Decimal], dra: Dra) -> Decimal:
    """A team's row at its rate (nothing where none holds)."""
    if row.device_class:
        device = dra.rate.get((row.cluster_id, row.day, row.resource, row.device_class))
        return dec(row.used_seconds) * device if device is not None else ZERO
    key = (row.cluster_id, row.day, row.resource)
    return dec(row.used_seconds) * rate[key] if key in rate else ZERO


def compute(
    inputs: Inputs,
    book: PriceBook,
    *,
    sharing: str,
    currency: str,
    start: dt.date,
    end: dt.date,
    teams: Iterable[str] | None = None,
) -> Chargeback:
    """The chargeback of [start, end) (see the module's rules). ``teams``: the bills kept,
    each with its days and their lines (None: every team's bill, without them); every team counts
    all the same (idle shares and the platform's line are the fleet's, whoever looks)."""
    fleet_cost, rate, pools, unpriced = _fleet(inputs, book)
    dra = _dra_fleet(inputs, book, fleet_cost)
    keys, costs, allocated, weights = _priced(inputs, rate, dra, sharing)
    idle = {key: fleet_cost[key] - allocated.get(key, ZERO) for key in fleet_cost}
    unpriced = sorted(unpriced + _said(dra.unpriced)) + _unpooled(
        inputs, rate, dra, inputs.clusters
    )
    # what one second of quota (or of use) of a key takes of its idle capacity
    idle_rate = {k: idle[k] / w for k, w in weights.items() if w and idle.get(k, ZERO) > 0}
    kept = None if teams is None else set(teams)
    bills: dict[str, TeamBill] = {}
    every_team: dict[str, Decimal] = defaultdict(lambda: ZERO)
    for row, key, line_cost in zip(inputs.teams, keys, costs, strict=True):
        share = ZERO
        if key in idle_rate:
            weight = _weight(row, sharing)
            if weight > 0:
                share = dec(weight) * idle_rate[key]
        every_team[row.team] += line_cost + share
        if kept is None or row.team in kept:
            bill = bills.get(row.team) or bills.setdefault(row.team, TeamBill(row.team))
            _add(bill, row, inputs, (line_cost, share), daily=kept is not None)
    return Chargeback(
        start=start,
        end=end,
        currency=currency,
        idle_sharing=sharing,
        teams=dict(sorted(bills.items())),
        fleet=sum(fleet_cost.values(), ZERO),
        fleet_idle=sum(idle.values(), ZERO),
        pools=sorted(
            pools + list(dra.pools.values()), key=lambda s: (s.cluster, s.name, s.dra, s.resource)
        ),
        queues=_queues(inputs, rate),
        unpriced=unpriced,
        every_team=dict(every_team),
    )


def _add(
    bill: TeamBill, row: TeamRow, inputs: Inputs, cost: tuple[Decimal, Decimal], *, daily: bool
) -> None:
    """One row of a team's use onto its bill: its line (and, ``daily``, its day's line)."""
    allocated, share = cost
    cluster = inputs.clusters.get(row.cluster_id, "")
    busy = None
    if inputs.busy:
        read = (row.cluster_id, row.day, row.namespace, row.resource)
        if read not in bill.busy_counted:
            busy = inputs.busy.get(read)
            if busy is not None:
                bill.busy_counted.add(read)
    where = (cluster, row.namespace, row.resource, row.device_class)
    line = bill.lines.get(where)
    if line is None:
        line = Line(row.team, cluster, row.namespace, row.resource, device_class=row.device_class)
        bill.lines[where] = line
    line.device_seconds += row.used_seconds
    line.gpu_seconds += row.gpu_seconds
    if busy is not None:
        line.busy_seconds = (line.busy_seconds or 0.0) + busy
    line.allocated += allocated
    line.idle_share += share
    bill.allocated += allocated
    bill.idle_share += share
    if daily:
        bill.days[row.day] += allocated + share
        bill.daily_lines.append(
            Line(
                row.team,
                cluster,
                row.namespace,
                row.resource,
                row.day,
                row.used_seconds,
                row.gpu_seconds,
                busy,
                allocated,
                share,
                row.device_class,
            )
        )


def _queues(inputs: Inputs, rate: Mapping[Key, Decimal]) -> list[Showback]:
    """Each ClusterQueue's admitted device-hours at the rate (what it ran, whoever ran it)."""
    out: dict[tuple[int, str, str, str], Showback] = {}
    for row in inputs.queues:
        key = (row.cluster_id, row.queue, row.flavor, row.resource)
        show = out.get(key) or out.setdefault(
            key,
            Showback(inputs.clusters.get(row.cluster_id, ""), row.queue, row.resource, row.flavor),
        )
        used = dec(row.used_seconds)
        show.allocated_hours += used / HOUR
        show.cost += used * rate.get((row.cluster_id, row.day, row.resource), ZERO)
    return sorted(out.values(), key=lambda s: (s.cluster, s.name, s.flavor, s.resource))
