"""Which price an hour takes (pure): a GPU model's price on a day, a MIG profile's, and a
DRA device class's.

A price holds from its effective day until the next price of the same model and profile
begins, so every day of the history is priced at the price that held on it. A MIG profile
without a price of its own costs its share of the whole GPU's price that day: the larger of
its compute-slice and memory-slice fractions (the share GPU-hours weigh it by), exactly, as
a fraction (a 1g.10gb of an A100-80GB is 1/7 of the GPU's price). A device allocated
through a DRA device class without a price of its own costs what the same device costs
through the device plugin: a whole GPU the GPU's price, a MIG device its profile's (its own,
else its share of the GPU's): its share of the whole GPU, as a MIG slice's."""

from __future__ import annotations

import bisect
import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from gpus import catalog

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True)
class PriceRow:
    """A price as the book reads it: ``profile`` blank for the whole GPU, ``device_class``
    blank for the device plugin's."""

    gpu_model: str
    profile: str
    per_hour: Decimal
    effective_from: dt.date
    device_class: str = ""


def profile_of(resource: str) -> str:
    """``nvidia.com/mig-1g.10gb.me`` -> ``1g.10gb+me`` (the catalog's spelling); a whole GPU:
    blank."""
    if resource == GPU:
        return ""
    profile = resource.removeprefix(MIG_PREFIX)
    return profile[:-3] + "+me" if profile.endswith(".me") else profile


def profile_share(gpu_model: str, profile: str) -> Fraction | None:
    """The share of a ``gpu_model`` GPU one ``profile`` slice is (None: not a profile of it)."""
    try:
        compute, compute_total, memory, memory_total = catalog.gpu_share(gpu_model, profile)
    except (KeyError, StopIteration):
        return None
    return max(Fraction(compute, compute_total), Fraction(memory, memory_total))


class PriceBook:
    """Every price, found by model, profile (or DRA device class) and day."""

    def __init__(self, rows: Iterable[PriceRow]) -> None:
        self._rows: dict[tuple[str, str, str], list[PriceRow]] = defaultdict(list)
        for row in sorted(rows, key=lambda r: r.effective_from):
            self._rows[(row.gpu_model, row.profile, row.device_class)].append(row)

    def _held(
        self, gpu_model: str, profile: str, day: dt.date, device_class: str = ""
    ) -> Decimal | None:
        rows = self._rows.get((gpu_model, profile, device_class))
        if not rows:
            return None
        index = bisect.bisect_right([r.effective_from for r in rows], day)
        return rows[index - 1].per_hour if index else None

    def per_hour(
        self, gpu_model: str | None, resource: str, day: dt.date, device_class: str = ""
    ) -> Decimal | None:
        """One hour of one ``resource`` device (a whole GPU or a MIG slice) of ``gpu_model``
        on ``day``, allocated through the DRA ``device_class`` (blank: the device plugin);
        None: no price holds (unknown model, or no price set by that day)."""
        if gpu_model is None or not (resource == GPU or resource.startswith(MIG_PREFIX)):
            return None
        if device_class:
            own_class = self._held(gpu_model, "", day, device_class)
            if own_class is not None:
                return own_class
        profile = profile_of(resource)
        if not profile:
            return self._held(gpu_model, "", day)
        own = self._held(gpu_model, profile, day)
        if own is not None:
            return own
        whole, share = self._held(gpu_model, "", day), profile_share(gpu_model, profile)
        if whole is None or share is None:
            return None
        return whole * share.numerator / share.denominator

    def models(self) -> set[str]:
        return {model for model, _, _ in self._rows}


def _seconds(delta: dt.timedelta) -> Decimal:
    return Decimal(delta.days * 86400 + delta.seconds) + Decimal(delta.microseconds) / 10**6


def held_cost(
    book: PriceBook,
    gpu_model: str | None,
    devices: Sequence[tuple[str, str]],
    start: dt.datetime,
    end: dt.datetime,
) -> Decimal | None:
    """What holding ``devices`` (of ``gpu_model``: each its resource and the DRA device
    class it was allocated through, blank for the device plugin) from ``start`` to ``end``
    cost, each UTC day's hours at the price that held that day; exact (rounded by whoever
    shows it). None: a device had no price on a day it was held."""
    total = Decimal(0)
    start, end = start.astimezone(dt.UTC), end.astimezone(dt.UTC)
    day = start.date()
    while start < end:
        midnight = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(0), tzinfo=dt.UTC)
        hours = _seconds(min(end, midnight) - start) / 3600
        for resource, device_class in devices:
            price = book.per_hour(gpu_model, resource, day, device_class)
            if price is None:
                return None
            total += price * hours
        start, day = midnight, day + dt.timedelta(days=1)
    return total
