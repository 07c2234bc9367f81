"""Reads of costs: the prices, the policy, the rollups of a period per day, and a period's
chargeback for the acting user (their teams; approvers and platform admins every team).

Every read is a fixed number of queries whatever the number of teams, days, pools or
nodes: the rollups of the whole period are summed per day in one query."""

from __future__ import annotations

import calendar
import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Min
from django.http import Http404

from cluster.models import Cluster, ObservedNode
from costs.chargeback import Chargeback, Inputs, PoolRow, QueueRow, TeamRow, compute
from costs.models import BusyDay, CostPolicy, Price
from costs.pricing import GPU, PriceBook, PriceRow, held_cost
from fleet.membership import pool_of
from fleet.models import NodePool
from gpus.catalog import model_for_product, resource_name
from portal.access.permissions import sees_every_team
from portal.infra.collector import no_cyclic_gc
from tenants.models import Team
from tenants.selectors import list_teams_for_user
from usage.models import Rollup, Sample, SamplingState

PRODUCT_LABEL = "nvidia.com/gpu.product"
NO_POOL = "(no pool)"  # the sampler's name for nodes of no pool


def policy() -> CostPolicy:
    """The cost policy (its defaults while none was saved)."""
    return CostPolicy.objects.order_by("pk").first() or CostPolicy()


def price_book() -> PriceBook:
    return PriceBook(
        PriceRow(p.gpu_model, p.profile, p.per_hour, p.effective_from, p.device_class)
        for p in Price.objects.all()
    )


BAD_MONTH = "No such month: a month is written YYYY-MM, e.g. 2026-11."


def month_of(text: str) -> dt.date:
    """``2026-11`` -> 1 November 2026 (a ValueError for anything else, and for a year
    before 1970 or after 2999)."""
    year, month = text.split("-")
    if len(year) != 4 or len(month) != 2 or not 1970 <= int(year) <= 2999:
        raise ValueError(text)
    return dt.date(int(year), int(month), 1)


def month_end(first: dt.date) -> dt.date:
    """The first day of the next month."""
    return first + dt.timedelta(days=calendar.monthrange(first.year, first.month)[1])


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(0), tzinfo=dt.UTC)


def rolled_up_to() -> dt.datetime | None:
    return SamplingState.objects.values_list("rolled_up_to", flat=True).first()


def first_month() -> dt.date | None:
    """The first day of the month of the first pool history kept (None: none yet), for the
    pages' month links. Two index lookups (daily rollups, else today's hourly ones)."""
    firsts = [
        Rollup.objects.on_every_cluster()
        .filter(period=period, kind=Sample.Kind.POOL)
        .aggregate(first=Min("start"))["first"]
        for period in (Rollup.Period.DAY, Rollup.Period.HOUR)
    ]
    found = [f for f in firsts if f is not None]
    return min(found).astimezone(dt.UTC).date().replace(day=1) if found else None


_SERIES = "cluster_id, (start AT TIME ZONE 'UTC')::date, kind, owner, scope, flavor, resource"
_ROLLUPS_SQL = (
    f"SELECT {_SERIES}, used_seconds, gpu_seconds, capacity_seconds FROM {{table}} "
    "WHERE period = %s AND start >= %s AND start < %s UNION ALL "
    f"SELECT {_SERIES}, SUM(used_seconds), SUM(gpu_seconds), SUM(capacity_seconds) "
    "FROM {table} WHERE period = %s AND start >= %s AND start < %s GROUP BY 1, 2, 3, 4, 5, 6, 7"
).format(table=Rollup._meta.db_table)


def _rollups(start: dt.date, end: dt.date, upto: dt.datetime | None) -> list[tuple[Any, ...]]:
    """Every rollup of [start, end) per cluster, day and series: the daily rollups up to the
    last whole day rolled up, as they are (one a series and day, at its midnight UTC), and
    the hourly ones after it (today so far) summed per day. Written out: grouping the daily
    rows too (a no-op) spilled the database's hash to disk, and the ORM's conversion of each
    of the month's 60,000 rows took longer than the database did."""
    lo, hi = _midnight(start), _midnight(end)
    partial = lo
    if upto is not None:
        partial = min(
            max(upto.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0), lo), hi
        )
    with connection.cursor() as cursor:
        cursor.execute(
            _ROLLUPS_SQL, [Rollup.Period.DAY, lo, partial, Rollup.Period.HOUR, partial, hi]
        )
        return cursor.fetchall()


def model_of(product: str) -> str:
    """The price's key of a GPU product label: its catalog model (A100-80GB), else, for a
    GPU the MIG catalog does not hold, the label itself (NVIDIA-L40S)."""
    return model_for_product(product) or product.split("-MIG-")[0]


def pool_models() -> dict[tuple[int, str], str]:
    """Each pool's GPU model: the product its node selector names, else the model most of its
    nodes now carry (nodes of no pool: ``(no pool)``). History is priced by today's pools."""
    pools: dict[int, list[NodePool]] = defaultdict(list)
    out: dict[tuple[int, str], str] = {}
    for pool in NodePool.objects.on_every_cluster().order_by("cluster_id", "name"):
        cluster_id = int(pool.cluster_id or 0)
        pools[cluster_id].append(pool)
        product = (pool.node_selector or {}).get(PRODUCT_LABEL)
        if product:
            out[(cluster_id, pool.name)] = model_of(str(product))
    seen: dict[tuple[int, str], Counter[str]] = defaultdict(Counter)
    nodes = ObservedNode.objects.on_every_cluster().filter(gone_since__isnull=True)
    for cluster_id, labels, product in nodes.exclude(gpu_product="").values_list(
        "cluster_id", "labels", "gpu_product"
    ):
        if product:
            held = pool_of(labels or {}, pools.get(cluster_id, []))
            seen[(cluster_id, held.name if held else NO_POOL)][model_of(product)] += 1
    for key, models in seen.items():
        out.setdefault(key, models.most_common(1)[0][0])
    return out


def inputs(start: dt.date, end: dt.date) -> Inputs:
    """What a chargeback of [start, end) is computed from."""
    teams, pools, queues = [], [], []
    for cluster_id, day, kind, owner, scope, flavor, resource, used, gpu, cap in _rollups(
        start, end, rolled_up_to()
    ):
        if kind == Sample.Kind.TEAM:
            if owner:  # a namespace of no team is no team's to pay
                teams.append(
                    TeamRow(cluster_id, day, owner, scope, resource, used, gpu, cap, flavor)
                )
        elif kind == Sample.Kind.POOL:
            pools.append(PoolRow(cluster_id, day, owner, resource, used, cap, flavor, gpu))
        else:
            queues.append(QueueRow(cluster_id, day, owner, flavor, resource, used, gpu))
    clusters = dict(Cluster.objects.values_list("pk", "name"))
    busy = {
        (cluster_id, day, namespace, resource): seconds
        for cluster_id, day, namespace, resource, seconds in BusyDay.objects.on_every_cluster()
        .filter(day__gte=start, day__lt=end)
        .values_list("cluster_id", "day", "namespace", "resource", "busy_seconds")
    }
    return Inputs(teams, pools, queues, pool_models(), clusters, busy)


def chargeback(start: dt.date, end: dt.date, teams: list[str] | None = None) -> Chargeback:
    """The chargeback of [start, end), every team's bill or those of ``teams``. A month of
    1,000 teams is 60,000 rows priced one by one, without the cyclic collector
    (``no_cyclic_gc``: it took a third of the time)."""
    rules = policy()
    with no_cyclic_gc():
        return compute(
            inputs(start, end),
            price_book(),
            sharing=rules.idle_sharing,
            currency=rules.currency,
            start=start,
            end=end,
            teams=teams,
        )


def team_cost(team: str, start: dt.date, end: dt.date) -> Decimal:
    """What ``team`` (its slug) cost over the days [start, end), to the cent, as its invoice
    says it (the allocated hours and its share of idle capacity, by the policy)."""
    bill = chargeback(start, end, teams=[team]).teams.get(team)
    return bill.total if bill is not None else Decimal("0.00")


def teams_for_user(user: Any, team: str = "") -> list[str] | None:
    """The user's teams (None: every team, for approvers and platform admins), narrowed to
    ``team``; a team outside them, or none of that name, is a 404."""
    mine = (
        None
        if sees_every_team(user)
        else list(list_teams_for_user(user).values_list("slug", flat=True))
    )
    if not team:
        return mine
    if mine is not None and team not in mine:
        raise Http404("No such team among yours.")
    if mine is None and not Team.objects.filter(slug=team).exists():
        raise Http404("No such team.")
    return [team]


def chargeback_for_user(user: Any, first: dt.date, team: str = "") -> Chargeback:
    """A month's chargeback as ``user`` may see it: their teams' bills only (another team's
    is never named; the platform's line and the fleet's total are the fleet's)."""
    return chargeback(first, month_end(first), teams_for_user(user, team))


def idle_costs(spells: Sequence[Any], now: dt.datetime) -> tuple[str, dict[int, Decimal | None]]:
    """What each idle spell's wasted GPU-hours cost: its devices (whole GPUs, MIG slices) of
    its pool's GPU model held from its start to its end (or ``now``), each day at the price
    that held then (a device allocated through a DRA class at that class's price, where it
    has one), exact; None where no price holds. The policy's currency. Four queries
    whatever the number of spells (the idle list's money, ``idle.selectors.priced_by``)."""
    rules = policy()
    if not spells:
        return rules.currency, {}
    book, models = price_book(), pool_models()
    out: dict[int, Decimal | None] = {}
    for spell in spells:
        model = models.get((int(spell.cluster_id), spell.pool or NO_POOL))
        held = [
            (
                resource_name(str(d["profile"])) if d.get("profile") else GPU,
                str(d.get("device_class") or ""),  # allocated through a DRA class: its price
            )
            for d in spell.devices or ()
        ]
        end = spell.ended_at or now
        # no device kept (a spell of before devices were): nothing to price, said so
        out[spell.pk] = held_cost(book, model, held, spell.idle_since, end) if held else None
    return rules.currency, out


def price_deletion(price: Price) -> list[str]:
    """What deleting ``price`` changes, said before it is confirmed: the days it holds and
    the price they take instead (the one before it, else the default of a MIG profile or a
    DRA class, else none), and that the months priced with it are priced again."""
    same = Price.objects.filter(
        gpu_model=price.gpu_model, profile=price.profile, device_class=price.device_class
    ).exclude(pk=price.pk)
    before = same.filter(effective_from__lt=price.effective_from).order_by("-effective_from")
    after = same.filter(effective_from__gt=price.effective_from).order_by("effective_from")
    earlier, later = before.first(), after.first()
    until = f"until {later.effective_from:%Y-%m-%d} (its next price)" if later else "on"
    days = f"From {price.effective_from:%Y-%m-%d} {until}"
    if earlier is not None:
        instead = (
            f"the price before it holds instead: {earlier.per_hour} an hour from "
            f"{earlier.effective_from:%Y-%m-%d}."
        )
    elif price.device_class:
        instead = (
            "a device by this class costs what it costs through the device plugin instead "
            "(its share of the whole GPU)."
        )
    elif price.profile:
        instead = "a slice of this profile costs its share of the whole GPU's price instead."
    else:
        instead = (
            "no price holds: these GPUs' hours cost nothing and every report names them as "
            "not priced."
        )
    return [
        f"{days}, {instead}",
        "Every month covering those days is priced again: its showback and invoices change, "
        "months already invoiced included.",
    ]
