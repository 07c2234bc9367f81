"""ClusterQueue quotas on DRA devices: what Kueue's configuration on a cluster maps (read from
the last poll's copy of its ConfigMap, ``queues.kueue_config``), the most devices each mapped
resource could ever be backed by (the devices of its classes the cluster's DRA drivers publish,
as many at once as a partitionable GPU's counters allow) and what the ClusterQueue page says of
a quota Kueue would count nothing in."""

from __future__ import annotations

from collections.abc import Iterable

from cluster.models import ObservedDeviceClass, ObservedNode, ObservedObject
from cluster.scope import cluster_id_of
from cluster.selectors import device_class_ceilings
from queues.kueue_config import CONFIGMAP, CONFIGMAP_KEY, KUEUE_NAMESPACE, KueueDra, parse
from queues.kueue_config import quota_notes as notes_for


def kueue_dra(cluster: int | None) -> KueueDra:
    """Kueue's DRA settings on ``cluster`` as its last poll read them (one query)."""
    data = (
        ObservedObject.objects.on(cluster_id_of(cluster))
        .filter(kind="ConfigMap", namespace=KUEUE_NAMESPACE, name=CONFIGMAP)
        .values_list("spec", flat=True)
        .first()
    )
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
    classes = dict(ObservedDeviceClass.objects.on(cid).values_list("name", "extended_resource"))
    if not classes:
        return {}
    resources = list(resources)
    offered = {
        name
        for allocatable in ObservedNode.objects.on(cid).values_list("allocatable", flat=True)
        for name in (allocatable or {})
        if name in resources
    }
    config = config if config is not None else kueue_dra(cid)
    return notes_for(resources, config, device_classes=classes, offered=offered)
