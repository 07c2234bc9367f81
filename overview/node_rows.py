"""The rows of a node list, each drawn once per what it shows.

A page of the node list is fifty rows of GPU strips, allocation bars and health; drawing
them is most of the page's time, and between two polls a row shows what it showed before.
Each row's HTML is kept in this process under everything it is drawn from (the node's
shown fields, its health, the pool's intended config, the columns, the time zone and the
day its times are written against), so a row whose facts moved is drawn again and one
whose facts did not is never stale (``portal.infra.process_cache``, bounded: the least
recently used first out).

A node whose GPUs a DRA driver publishes shows them as the node page does: its GPUs drawn
from its ResourceSlices and the claims holding them, and per kind of device how many are
allocated of those published, with the memory slices its partitionable GPUs' counters
have left (``cluster.dra``); a node of both worlds shows both, each said.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from cluster import dra
from cluster.models import ObservedNode
from cluster.selectors import NodeDra, nodes_dra
from gpus.strips import GpuStrip
from health.models import NodeHealth
from health.selectors import attach_health, health_of
from portal.infra.process_cache import ProcessCache

ROWS_KEPT = 20_000  # rows kept per process: four fleets of 5,000 nodes
_ROWS: ProcessCache[tuple[Any, ...], str] = ProcessCache("node rows", ROWS_KEPT)


def node_rows(
    nodes: list[ObservedNode], *, cluster_column: bool, pool_column: bool
) -> list[SafeString]:
    """The ``<tr>`` of each node (each carrying ``of_cluster``, ``pool_name`` and
    ``intended``), drawn only when this process has not drawn it from the same facts
    (two queries: the nodes' health, their DRA slices; a third where slices are published:
    the claims holding their devices)."""
    health = health_of(nodes)
    published = nodes_dra([(n.cluster_id, n.name) for n in nodes if n.cluster_id is not None])
    for node in nodes:
        by_dra = published.get((node.cluster_id, node.name))  # type: ignore[arg-type]
        node.dra = RowDra.of(by_dra) if by_dra else None  # type: ignore[attr-defined]
    columns = (cluster_column, pool_column, timezone.get_current_timezone_name())
    today = timezone.localdate()
    keys = [
        (columns, today, _node_key(node), _health_key(health.get((node.cluster_id, node.name))))
        for node in nodes
    ]
    kept = _ROWS.found(keys)
    missing = [node for node, key in zip(nodes, keys, strict=True) if key not in kept]
    if missing:
        attach_health(missing, health)
        context = {"cluster_column": cluster_column, "pool": not pool_column}
        drawn = {
            key: render_to_string("overview/fleet_nodes.html#node-row", {**context, "node": node})
            for node, key in zip(nodes, keys, strict=True)
            if key not in kept
        }
        _ROWS.keep(drawn)
        kept.update(drawn)
    return [mark_safe(kept[key]) for key in keys]  # drawn by the template, escaped there


def _node_key(node: Any) -> tuple[Any, ...]:
    cluster = node.of_cluster
    return (
        node.pk,
        node.name,
        (cluster.name, cluster.display_name) if cluster is not None else None,
        node.pool_name,
        node.intended,
        node.gpu_count,
        node.gpu_product,
        node.mig_config,
        node.mig_config_state,
        node.ready,
        node.unschedulable,
        json.dumps(node.allocated, sort_keys=True),
        json.dumps(node.allocatable, sort_keys=True),
        node.dra.key if node.dra is not None else None,
    )


@dataclass(frozen=True)
class RowDra:
    """What a node's row shows of its GPUs by DRA: how many and which, drawn as strips,
    per kind of device allocated of published, and the memory slices its partitionable
    GPUs' counters have left (of how many)."""

    gpus: int
    product: str
    strips: tuple[GpuStrip, ...]
    offers: tuple[dra.Offer, ...]
    left: int
    slices: int

    @classmethod
    def of(cls, by_dra: NodeDra) -> RowDra:
        counted = [g.memory_slices() for g in by_dra.gpus if g.partitionable]
        products = sorted({g.product for g in by_dra.gpus if g.product})
        return cls(
            len(by_dra.gpus),
            " + ".join(products),
            tuple(dra.strip(gpu, i) for i, gpu in enumerate(by_dra.gpus)),
            tuple(dra.offers(by_dra.gpus)),
            sum(left for left, _ in counted),
            sum(total for _, total in counted),
        )

    @property
    def key(self) -> tuple[Any, ...]:
        """Everything the row draws of it, for the rows' cache."""
        return (
            self.gpus,
            self.product,
            tuple(
                (s.label, s.lost, tuple((x.busy, x.width) for x in s.slices)) for s in self.strips
            ),
            tuple(
                (o.what, o.product, o.devices, o.taken, o.available, o.tainted) for o in self.offers
            ),
            self.left,
            self.slices,
        )


def _health_key(row: NodeHealth | None) -> tuple[Any, ...] | None:
    if row is None:
        return None
    return (
        row.pk,
        row.observed_at,
        row.worst,
        row.error,
        json.dumps(row.findings, sort_keys=True),
        json.dumps(row.gpus, sort_keys=True),
    )
