"""The arithmetic of usage history (pure): MIG weights, integrating samples over time with
gaps, percentiles."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from gpus import catalog

GPU = "nvidia.com/gpu"


def mig_weight(model: str | None, resource: str, prefer: Sequence[str] = ()) -> float:
    """The share of a GPU one unit of ``resource`` is: 1 for a whole GPU; for a MIG profile
    the larger of its compute-slice and memory-slice fractions (mig-profiles.yaml). The same
    profile name means different shares on different models (1g.10gb is 1/4 of an A100-40GB
    but 1/7 of an A100-80GB): without the node's model, the fleet's models in ``prefer`` are
    tried first."""
    if resource == GPU:
        return 1.0
    if not resource.startswith("nvidia.com/mig-"):
        return 0.0
    profile = resource.removeprefix("nvidia.com/mig-")
    models = [model] if model else []
    models += [m for m in prefer if m not in models]
    models += [m for m in catalog.gpu_models() if m not in models]
    for name in models:
        for candidate in (profile, profile.replace(".me", "+me")):
            try:
                compute, compute_total, memory, memory_total = catalog.gpu_share(name, candidate)
            except (KeyError, StopIteration):
                continue
            return max(compute / compute_total, memory / memory_total)
    head = profile.split("g.", 1)[0]
    return int(head) / 7 if head.isdigit() else 0.0


def integrate(
    samples: Sequence[tuple[dt.datetime, float]],
    start: dt.datetime,
    end: dt.datetime,
    max_gap: float,
) -> tuple[float, float]:
    """(value x seconds, seconds covered) over [start, end). Sample i stands for
    [t_i, min(t_i+1, t_i + max_gap)): a poller that was down longer than ``max_gap`` leaves
    the rest of the gap uncovered (unknown), never filled with a guess. ``samples`` must be
    sorted by time and may begin before ``start`` and end after ``end``."""
    total = covered = 0.0
    for index, (time, value) in enumerate(samples):
        until = time + dt.timedelta(seconds=max_gap)
        if index + 1 < len(samples):
            until = min(until, samples[index + 1][0])
        lo, hi = max(time, start), min(until, end)
        seconds = (hi - lo).total_seconds()
        if seconds > 0:
            total += value * seconds
            covered += seconds
    return total, covered


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (PostgreSQL's percentile_cont)."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
