"""ClusterQueue quotas on DRA devices: what Kueue's configuration on a cluster maps (read from
the last poll's copy of its ConfigMap, ``queues.kueue_config``), the most devices each mapped
resource could ever be backed by (the devices of its classes the cluster's DRA drivers publish,
as many at once as a partitionable GPU's counters allow; for a resource Kueue charges in a
counter's units, the counter its partitionable GPUs share, summed) and what the ClusterQueue
page says of a quota Kueue would count nothing in."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster.models import ObservedObject
from cluster.scope import cluster_id_of
from cluster.selectors import counter_ceilings as cluster_counter_ceilings
from cluster.selectors import device_class_ceilings, device_classes_read, kueue_config_read
from portal.infra.round_trips import Read, read_together
from queues.kueue_config import (
    CONFIGMAP,
    CONFIGMAP_KEY,
    KUEUE_NAMESPACE,
    KueueDra,
    counter_text,
    parse,
)
from queues.kueue_config import quota_notes as notes_for


def kueue_dra(cluster: int | None) -> KueueDra:
    """Kueue's DRA settings on ``cluster`` as its last poll read them (one query)."""
    return kueue_dra_from(read_together(kueue_dra_read(cluster))[0])


def kueue_dra_read(cluster: int | None) -> Read:
    """The read of ``kueue_dra``, for a page that sends it with others in one round trip
    (``kueue_dra_from`` its rows)."""
    return kueue_config_read(cluster_id_of(cluster), KUEUE_NAMESPACE, CONFIGMAP)


def kueue_dra_from(rows: Sequence[ObservedObject]) -> KueueDra:
    """Kueue's DRA settings from the rows of ``kueue_dra_read``."""
    data = rows[0].spec if rows else None
    if data is None:
        return parse(None)
    text = ((data or {}).get("data") or {}).get(CONFIGMAP_KEY)
    return parse(str(text) if text is not None else "")


@dataclass(frozen=True)
class Ceiling:
    """The most a ClusterQueue quota of a DRA-mapped resource can be backed by: ``amount``
    in ``unit`` (``devices``, or the counter a counter source names), of ``classes``."""

    amount: int
    unit: str
    classes: tuple[str, ...]

    @property
    def counted(self) -> bool:
        """Charged in a counter's units, not in devices."""
        return self.unit != "devices"

    def said(self) -> str:
        """``3 devices``, ``160Gi of the DRA counter memory``."""
        if not self.counted:
            return f"{self.amount} devices"
        return f"{counter_text(self.amount)} of the DRA counter {self.unit}"


def dra_ceilings(
    cluster: int | None, resources: Iterable[str], config: KueueDra | None = None
) -> dict[str, Ceiling]:
    """Resource -> the most the cluster's DRA fleet could give at once of what Kueue charges
    in it, for the ``resources`` Kueue's mappings name there (others are left out): in
    devices, the most devices of its classes (classes that share GPUs, whole GPUs and their
    MIG devices, each counted alone: a sum of them is the most, never a layout); in a
    counter's units (a counter source), the counter's value in the shared counter set of
    every GPU whose devices of its classes consume it, summed (one not known here is left
    out)."""
    cid = cluster_id_of(cluster)
    config = config if config is not None else kueue_dra(cid)
    wanted = set(resources)
    out = {}
    mapped = {r: c for r, c in config.devices.items() if r in wanted}
    if mapped:
        most = device_class_ceilings(
            cid, sorted({c for classes in mapped.values() for c in classes})
        )
        for r, classes in mapped.items():
            out[r] = Ceiling(sum(most.get(c, 0) for c in classes), "devices", classes)
    for r, amount in counter_ceilings(cid, wanted, config).items():
        if amount is not None:
            out[r] = Ceiling(amount, config.unit(r), config.mapped.get(r, ()))
    return out


def counter_ceilings(
    cluster: int | None, resources: Iterable[str], config: KueueDra
) -> dict[str, int | None]:
    """Resource -> the most of its counter the cluster's DRA fleet could give at once, for
    the ``resources`` Kueue charges in a counter's units there (None: not known here)."""
    if not config.enabled:
        return {}
    wanted = {
        r: (
            config.mapped.get(r, ()),
            [(s.name, s.driver, s.selector) for s in config.counters[r]],
        )
        for r in set(resources)
        if r in config.counters
    }
    return cluster_counter_ceilings(cluster_id_of(cluster), wanted) if wanted else {}


def quota_notes(
    cluster: int | None, resources: Iterable[str], config: KueueDra | None = None
) -> dict[str, str]:
    """Resource -> why Kueue would count nothing in a ClusterQueue quota of it (or not in
    devices), on a cluster whose poll saw DRA device classes; nothing on any other
    (``config``: Kueue's settings there, when the caller read them already)."""
    cid = cluster_id_of(cluster)
    resources = list(resources)
    rows = read_together(device_classes_read(cid, resources))[0]
    return quota_notes_from(
        cid, rows, resources, lambda: kueue_dra(cid) if config is None else config
    )


def quota_notes_from(
    cluster: int | None,
    rows: Sequence[tuple[Any, ...]],
    resources: Iterable[str],
    config: Callable[[], KueueDra],
    counters: Mapping[str, int | None] | None = None,
) -> dict[str, str]:
    """``quota_notes`` from the rows of ``device_classes_read`` (``config``: Kueue's
    settings on the cluster, asked only when it has DRA device classes; ``counters``: the
    counter ceilings of ``resources`` when the caller summed them already, as
    ``dra_ceilings`` does)."""
    classes = {name: extended for name, extended, _ in rows if name is not None}
    if not classes:
        return {}
    resources = list(resources)
    offered = {resource for name, _, resource in rows if name is None}
    kueue = config()
    return notes_for(
        resources,
        kueue,
        device_classes=classes,
        offered=offered,
        counter_ceilings=(
            counters if counters is not None else counter_ceilings(cluster, resources, kueue)
        ),
    )
