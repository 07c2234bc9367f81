"""ClusterQueue quotas on DRA devices: what Kueue's configuration on a cluster maps (read from
the last poll's copy of its ConfigMap, ``queues.kueue_config``), the most devices each mapped
resource could ever be backed by (the devices of its classes the cluster's DRA drivers publish,
as many at once as a partitionable GPU's counters allow) and what the ClusterQueue page says of
a quota Kueue would count nothing in."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cluster.models import ObservedObject
from cluster.scope import cluster_id_of
from cluster.selectors import device_class_ceilings
from portal.infra.round_trips import Read, read_together
from queues.kueue_config import CONFIGMAP, CONFIGMAP_KEY, KUEUE_NAMESPACE, KueueDra, parse
from queues.kueue_config import quota_notes as notes_for
from queues.selectors import device_classes_read, kueue_config_read


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


def device_ceilings(
    cluster: int | None, resources: Iterable[str], config: KueueDra | None = None
) -> dict[str, int]:
    """Resource -> the most devices of the classes Kueue charges in it the cluster's DRA
    fleet could give at once, for the ``resources`` Kueue counts in devices there (others are
    left out). Classes that share GPUs (whole GPUs and their MIG devices) are each counted
    alone: a sum of them is the most, never a layout."""
    cid = cluster_id_of(cluster)
    config = config if config is not None else kueue_dra(cid)
    mapped = {r: c for r, c in config.devices.items() if r in set(resources)}
    if not mapped:
        return {}
    most = device_class_ceilings(cid, sorted({c for classes in mapped.values() for c in classes}))
    return {r: sum(most.get(c, 0) for c in classes) for r, classes in mapped.items()}


def quota_notes(
    cluster: int | None, resources: Iterable[str], config: KueueDra | None = None
) -> dict[str, str]:
    """Resource -> why Kueue would count nothing in a ClusterQueue quota of it (or not in
    devices), on a cluster whose poll saw DRA device classes; nothing on any other
    (``config``: Kueue's settings there, when the caller read them already)."""
    cid = cluster_id_of(cluster)
    resources = list(resources)
    rows = read_together(device_classes_read(cid, resources))[0]
    return quota_notes_from(rows, resources, lambda: kueue_dra(cid) if config is None else config)


def quota_notes_from(
    rows: Sequence[tuple[Any, ...]], resources: Iterable[str], config: Callable[[], KueueDra]
) -> dict[str, str]:
    """``quota_notes`` from the rows of ``device_classes_read`` (``config``: Kueue's
    settings on the cluster, asked only when it has DRA device classes)."""
    classes = {name: extended for name, extended, _ in rows if name is not None}
    if not classes:
        return {}
    offered = {resource for name, _, resource in rows if name is None}
    return notes_for(list(resources), config(), device_classes=classes, offered=offered)
