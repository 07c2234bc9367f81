"""What the fleet offers behind each ResourceFlavor, for the intent services' ceilings and
the queue editor: the changes app computes it with its assessment's fleet facts (above the
intent apps, so a hook, not an import) and provides it when Django starts
(``changes/apps.py``). Nothing provided (a script without that app): nothing is known, and
the pages say so instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from portal.infra.round_trips import Read, read_together


@dataclass(frozen=True)
class FleetCapacity:
    """``behind``: (flavor, resource) -> what the nodes the flavor selects offer now;
    ``ceiling``: resource -> the most the whole fleet could ever offer of it, in its best
    MIG layout (a quota above it can never be backed; empty when the caller asked for its
    flavors' rows only: ``whole=False``); ``flavor_ceiling``: (flavor,
    resource) -> the same for the nodes behind the flavor (a queue's promise above it can
    never be backed)."""

    behind: dict[tuple[str, str], int] = field(default_factory=dict)
    ceiling: dict[str, int] = field(default_factory=dict)
    flavor_ceiling: dict[tuple[str, str], int] = field(default_factory=dict)
    known: bool = True


@dataclass(frozen=True)
class CapacityRead:
    """The fleet's capacity as reads a page may send with its own in one round trip
    (``portal.infra.round_trips``), and ``answer``: the capacity from their rows, in order."""

    reads: tuple[Read, ...]
    answer: Callable[[Sequence[list[Any]]], FleetCapacity]


class Provider(Protocol):
    def __call__(
        self,
        resources: Iterable[str],
        cluster_id: int | None = None,
        *,
        flavors: Iterable[str] | None = None,
        whole: bool = True,
    ) -> CapacityRead: ...


_provider: list[Provider] = []


def provide(provider: Provider) -> None:
    _provider[:] = [provider]


def fleet_capacity(
    resources: Iterable[str],
    cluster_id: int | None = None,
    *,
    flavors: Iterable[str] | None = None,
) -> FleetCapacity:
    """The fleet's capacity for ``resources`` (GPU resources) on one cluster (by default the
    settings' one), or an unknown one. ``flavors``: the flavors whose rows the caller reads
    (``behind``, ``flavor_ceiling``); ``()`` for none, every flavor by default. Asking for
    fewer costs less; what is asked for is the same either way. One round trip."""
    asked = fleet_capacity_read(resources, cluster_id, flavors=flavors)
    return asked.answer(read_together(*asked.reads))


def fleet_capacity_read(
    resources: Iterable[str],
    cluster_id: int | None = None,
    *,
    flavors: Iterable[str] | None = None,
    whole: bool = True,
) -> CapacityRead:
    """``fleet_capacity``'s reads, for a page that sends them with its own, and its answer
    from their rows. ``whole=False``: not the whole fleet's ceiling (``ceiling`` is left
    empty), for a caller that reads its flavors' rows alone: it is the one figure that
    weighs every node. The reads read the observed nodes and the ResourceFlavors alone (a
    page may keep their rows under those rows' version)."""
    if not _provider:
        return CapacityRead((), lambda rows: FleetCapacity(known=False))
    return _provider[0](resources, cluster_id, flavors=flavors, whole=whole)
