"""A made history for the cost tests: two pools (whole H100s; an A100-80GB sliced into
3g.40gb and 1g.10gb), two teams, four days of November 2026 with the H100's price changed
on the 16th; and, with ``dra()``, a third pool of two A100-80GBs published through DRA."""

from __future__ import annotations

import datetime as dt
import functools
from decimal import Decimal

from cluster.scope import settings_cluster_id
from costs.models import Price
from fleet.models import NodePool
from usage.models import DRA_GPUS, Rollup, SamplingState

DAY_S = 86400.0
DAYS = [dt.date(2026, 11, d) for d in (14, 15, 16, 17)]
NOVEMBER = dt.date(2026, 11, 1)
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
GPU, MIG_3G, MIG_1G = "nvidia.com/gpu", "nvidia.com/mig-3g.40gb", "nvidia.com/mig-1g.10gb"


def midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(0), tzinfo=dt.UTC)


def prices() -> None:
    Price.objects.create(
        gpu_model="H100-80GB", per_hour=Decimal("4.00"), effective_from=dt.date(2026, 10, 1)
    )
    Price.objects.create(
        gpu_model="H100-80GB", per_hour=Decimal("5.00"), effective_from=dt.date(2026, 11, 16)
    )
    Price.objects.create(
        gpu_model="A100-80GB", per_hour=Decimal("2.00"), effective_from=dt.date(2026, 1, 1)
    )


def pools() -> None:
    NodePool.objects.create(name="h100", node_selector={"nvidia.com/gpu.product": H100})
    NodePool.objects.create(name="a100", node_selector={"nvidia.com/gpu.product": A100})


def rollup(
    day: dt.date,
    kind: str,
    owner: str,
    resource: str,
    used: float,
    cap: float,
    scope: str = "",
    weight: float = 1.0,
    flavor: str = "",
    *,
    cluster_id: int,
) -> Rollup:
    """A day's rollup on cluster ``cluster_id`` (asked once by the caller: a row built
    without a cluster asks the database for the settings' one)."""
    return Rollup(
        cluster_id=cluster_id,
        period="day",
        start=midnight(day),
        kind=kind,
        owner=owner,
        scope=scope,
        flavor=flavor,
        resource=resource,
        covered_seconds=DAY_S,
        used_seconds=used * DAY_S,
        gpu_seconds=used * weight * DAY_S,
        capacity_seconds=cap * DAY_S,
    )


def usage(teams: int = 0) -> None:
    """Per day: team-a runs 2 H100s (quota 4) and 3 1g.10gb slices (quota 7) in team-a-work;
    team-b 1 H100 (no quota) and 4 3g.40gb slices (quota 8) in team-b-work; ``teams`` more
    teams each with one 1g.10gb slice for the first hour of each day; the pools offer 4 H100s,
    8 3g.40gb and 14 1g.10gb slices."""
    row = functools.partial(rollup, cluster_id=settings_cluster_id())  # asked once
    rows = []
    for day in DAYS:
        rows += [
            row(day, "team", "team-a", GPU, 2, 4, "team-a-work"),
            row(day, "team", "team-a", MIG_1G, 3, 7, "team-a-work", 1 / 7),
            row(day, "team", "team-b", GPU, 1, 0, "team-b-work"),
            row(day, "team", "team-b", MIG_3G, 4, 8, "team-b-work", 0.5),
            row(day, "pool", "h100", GPU, 3, 4),
            row(day, "pool", "a100", MIG_3G, 4, 8, weight=0.5),
            row(day, "pool", "a100", MIG_1G, 3, 14, weight=1 / 7),
            row(day, "queue", "cq-train", GPU, 3, 4),
        ]
        rows += [
            row(day, "team", f"extra-{i:03d}", MIG_1G, 1 / 24, 0, f"extra-{i:03d}", 1 / 7)
            for i in range(teams)
        ]
    Rollup.objects.bulk_create(rows)
    SamplingState.objects.update_or_create(
        pk=SamplingState.objects.values_list("pk", flat=True).first(),
        defaults={"rolled_up_to": midnight(dt.date(2026, 12, 1))},
    )


def made(teams: int = 0) -> None:
    prices()
    pools()
    usage(teams)


def dra() -> None:
    """A pool ``a100-dra`` of two A100-80GBs published through DRA, every day: team-a holds
    one whole GPU by the class gpu.nvidia.com in team-a-work (beside its device plugin H100s
    there), team-b two 3g.40gb devices by mig.nvidia.com (the other GPU, full); mig.nvidia.com
    has its own A100-80GB price, 0.50 an hour, from the 16th (before it: the profile's share
    of the GPU's 2.00, 1.00)."""
    NodePool.objects.create(name="a100-dra", node_selector={"nvidia.com/gpu.product": A100})
    Price.objects.create(
        gpu_model="A100-80GB",
        device_class="mig.nvidia.com",
        per_hour=Decimal("0.50"),
        effective_from=dt.date(2026, 11, 16),
    )
    row = functools.partial(rollup, cluster_id=settings_cluster_id())  # asked once
    rows = []
    for day in DAYS:
        rows += [
            row(day, "pool", "a100-dra", GPU, 0, 2, flavor=DRA_GPUS),
            row(day, "pool", "a100-dra", GPU, 1, 0, flavor="gpu.nvidia.com"),
            row(day, "pool", "a100-dra", MIG_3G, 2, 0, weight=0.5, flavor="mig.nvidia.com"),
            row(day, "team", "team-a", GPU, 1, 0, "team-a-work", flavor="gpu.nvidia.com"),
            row(day, "team", "team-b", MIG_3G, 2, 0, "team-b-work", 0.5, "mig.nvidia.com"),
        ]
    Rollup.objects.bulk_create(rows)
