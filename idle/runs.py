"""When an allocated GPU or MIG instance is idle: pure (no Django), from the DCGM readings.

Each device keeps one *run*: since when its readings stayed under its pool's threshold,
read after read without a gap. A reading at or over the threshold ends the run; so does a
reading without utilisation, a gap between two readings longer than ``max_gap``, another
pod on the device, or another threshold. A device is idle once its run is as long as its
pool's period and its last reading is recent; a device without a recent reading is *not
read*, never idle: nothing is concluded from missing metrics.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# A device's key: (node, GPU index, MIG instance id; 0 for a whole GPU).
Key = tuple[str, int, int]


@dataclass(frozen=True)
class Reading:
    """One device as the DCGM exporter last reported it, and the pod it is given to."""

    node: str
    gpu: int
    instance: int
    profile: str
    model: str
    namespace: str
    pod: str
    util: float | None

    @property
    def key(self) -> Key:
        return (self.node, self.gpu, self.instance)


@dataclass(frozen=True)
class Run:
    """What is kept of a device's history: its last reading and its run under the threshold."""

    namespace: str
    pod: str
    read_at: dt.datetime
    util: float | None
    low_since: dt.datetime | None
    threshold: float
    peak: float | None


def readings_of(node: str, gpus: Iterable[Mapping[str, Any]]) -> list[Reading]:
    """The devices of one node's stored readings (``health`` keeps them as JSON): each MIG
    instance of a MIG GPU, else the whole GPU."""
    out = []
    for gpu in gpus:
        model = str(gpu.get("model") or "")
        instances = gpu.get("instances") or []
        if instances:
            for item in instances:
                out.append(
                    Reading(
                        node,
                        int(gpu["index"]),
                        int(item["instance"]),
                        str(item.get("profile") or ""),
                        model,
                        str(item.get("namespace") or ""),
                        str(item.get("pod") or ""),
                        _number(item.get("util")),
                    )
                )
            continue
        out.append(
            Reading(
                node,
                int(gpu["index"]),
                0,
                "",
                model,
                str(gpu.get("namespace") or ""),
                str(gpu.get("pod") or ""),
                _number(gpu.get("util")),
            )
        )
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def next_run(
    before: Run | None,
    reading: Reading,
    *,
    threshold: float,
    now: dt.datetime,
    max_gap: dt.timedelta,
) -> Run:
    """The device's run after ``reading``, taken at ``now``."""
    low = reading.util is not None and reading.util < threshold
    goes_on = (
        low
        and before is not None
        and before.low_since is not None
        and (before.namespace, before.pod) == (reading.namespace, reading.pod)
        and before.threshold == threshold
        and dt.timedelta(0) <= now - before.read_at <= max_gap
    )
    if goes_on and before is not None:
        peak = max(before.peak or 0.0, reading.util or 0.0)
        return Run(
            reading.namespace, reading.pod, now, reading.util, before.low_since, threshold, peak
        )
    return Run(
        reading.namespace,
        reading.pod,
        now,
        reading.util,
        now if low else None,
        threshold,
        reading.util if low else None,
    )


def state_of(run: Run, *, period: dt.timedelta, now: dt.datetime, max_gap: dt.timedelta) -> str:
    """``idle``, ``busy`` (used, or under the threshold for less than the period) or
    ``not read`` (no recent reading, or one without utilisation)."""
    if now - run.read_at > max_gap or run.util is None:
        return "not read"
    if run.low_since is not None and now - run.low_since >= period:
        return "idle"
    return "busy"


def gpu_weight(profile: str) -> float:
    """How much of a GPU a device is: 1 for a whole GPU, a MIG instance its compute slices
    over seven (the A100's and H100's; ``3g.40gb``: 3/7)."""
    if not profile:
        return 1.0
    head = profile.split("g", 1)[0]
    return min(1.0, int(head) / 7) if head.isdigit() else 1 / 7
