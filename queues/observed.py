"""What the loop observed of Kueue, for the quota what-if. Queues sit below the loop, so the
cluster app provides it when Django starts (``cluster/apps.py``); nothing provided (a script
without that app): nothing is known, and the what-if says so instead of guessing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from portal.scope import cluster_id_of
from queues.whatif import Refusal, Workload


@dataclass(frozen=True)
class ObservedKueue:
    """Kueue's unfinished workloads as the last poll saw them (``queue``: the ClusterQueue
    that holds their quota, or the one their LocalQueue points at), whether Kueue runs fair
    sharing (its ClusterQueues report a ``fairSharing`` status), each namespace's
    ResourceQuota ``status.used``, and the pod creations a ResourceQuota refuses now."""

    workloads: tuple[Workload, ...] = ()
    refused: tuple[Refusal, ...] = ()
    fair_sharing: bool = False
    quota_used: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    known: bool = True


Provider = Callable[[int], ObservedKueue]
_provider: list[Provider] = []


def provide(provider: Provider) -> None:
    _provider[:] = [provider]


def observed_kueue(cluster_id: int | None) -> ObservedKueue:
    """What the loop observed on cluster ``cluster_id`` (a row's key: None is refused)."""
    if not _provider:
        return ObservedKueue(known=False)
    return _provider[0](cluster_id_of(cluster_id))
