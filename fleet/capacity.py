"""What the fleet offers behind each ResourceFlavor, for the intent services' ceilings and
the queue editor: the changes app computes it with its assessment's fleet facts (above the
intent apps, so a hook, not an import) and provides it when Django starts
(``changes/apps.py``). Nothing provided (a script without that app): nothing is known, and
the pages say so instead of guessing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class FleetCapacity:
    """``behind``: (flavor, resource) -> what the nodes the flavor selects offer now;
    ``ceiling``: resource -> the most the whole fleet could ever offer of it, in its best
    MIG layout (a quota above it can never be backed); ``flavor_ceiling``: (flavor,
    resource) -> the same for the nodes behind the flavor (a queue's promise above it can
    never be backed)."""

    behind: dict[tuple[str, str], int] = field(default_factory=dict)
    ceiling: dict[str, int] = field(default_factory=dict)
    flavor_ceiling: dict[tuple[str, str], int] = field(default_factory=dict)
    known: bool = True


class Provider(Protocol):
    def __call__(
        self,
        resources: Iterable[str],
        cluster_id: int | None = None,
        *,
        flavors: Iterable[str] | None = None,
    ) -> FleetCapacity: ...


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
    fewer costs less; what is asked for is the same either way."""
    if not _provider:
        return FleetCapacity(known=False)
    return _provider[0](resources, cluster_id, flavors=flavors)
