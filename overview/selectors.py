"""Reads of the fleet page: nodes grouped by pool, those needing attention first."""

from __future__ import annotations

from dataclasses import dataclass, field

from cluster.models import ObservedNode
from fleet.models import NodePool
from health.selectors import attach_health, unhealthy_nodes


@dataclass
class PoolView:
    name: str
    mig_config: str
    purpose: str
    nodes: list[ObservedNode] = field(default_factory=list)
    total: int = 0  # nodes in the pool (matching the search), before the page's cap

    @property
    def hidden(self) -> int:
        return self.total - len(self.nodes)


def needs_attention(
    node: ObservedNode, pool: PoolView, unhealthy: frozenset[str] = frozenset()
) -> bool:
    return (
        node.name in unhealthy
        or not node.ready
        or node.unschedulable
        or node.mig_config_state in ("failed", "pending")
        or bool(pool.mig_config and node.mig_config != pool.mig_config)
    )


def fleet_by_pool(*, search: str = "", pool: str = "", cap: int | None = None) -> list[PoolView]:
    """Nodes grouped by the first pool whose selector matches (two queries in all: pools,
    then nodes).

    ``search`` keeps nodes whose name contains it, ``pool`` keeps one pool. With ``cap``,
    each pool keeps that many nodes, those needing attention (not ready, cordoned, MIG
    failed or reconfiguring, drifted) first; ``total`` says how many there were.
    """
    grouped = fleet_by_pool_all(search)
    if pool:
        grouped = [p for p in grouped if p.name == pool]
    unhealthy = unhealthy_nodes()
    for view in grouped:
        view.total = len(view.nodes)
        if cap is not None and view.total > cap:
            view.nodes.sort(
                key=lambda node: (not needs_attention(node, view, unhealthy), node.name)
            )
            view.nodes = view.nodes[:cap]
    attach_health([node for view in grouped for node in view.nodes])
    return grouped


def fleet_by_pool_all(search: str = "") -> list[PoolView]:
    rows = list(NodePool.objects.all())
    pools = [PoolView(p.name, p.mig_config, p.get_purpose_display()) for p in rows]
    other = PoolView("(no pool)", "", "")
    nodes = ObservedNode.objects.filter(gone_since__isnull=True).order_by("name")
    if search:
        nodes = nodes.filter(name__icontains=search)
    for node in nodes:
        for pool, row in zip(pools, rows, strict=True):
            if row.selects(node.labels):
                pool.nodes.append(node)
                break
        else:
            other.nodes.append(node)
    return [p for p in [*pools, other] if p.nodes or (p.name != "(no pool)" and not search)]
