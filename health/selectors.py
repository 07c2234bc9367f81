"""Reads of GPU health. Nodes are not team data; the pods on them are: another team's pod is
counted, not named (approvers and platform admins see every name)."""

from __future__ import annotations

from typing import Any

from cluster.models import ObservedNode
from gpus.strips import gpu_strips
from health.models import NodeHealth
from portal.access.permissions import User
from portal.access.selectors import pod_names_for


def health_of(nodes: list[ObservedNode]) -> dict[tuple[int | None, str], NodeHealth]:
    """(cluster id, node name) -> the node's last GPU health, for ``nodes`` of any cluster
    (one query)."""
    return {
        (h.cluster_id, h.node): h
        for h in NodeHealth.objects.on_every_cluster().filter(
            cluster_id__in={n.cluster_id for n in nodes}, node__in={n.name for n in nodes}
        )
    }


def attach_health(
    nodes: list[ObservedNode], health: dict[tuple[int | None, str], NodeHealth] | None = None
) -> None:
    """Each node's last GPU health (or None), average utilisation and its GPUs drawn as
    strips (one query, none when ``health_of`` was read)."""
    if health is None:
        health = health_of(nodes)
    for node in nodes:
        row = health.get((node.cluster_id, node.name))
        node.health = row  # type: ignore[attr-defined]
        utils = [
            g["util"] for g in (row.gpus if row is not None else []) if g.get("util") is not None
        ]
        node.gpu_util = round(sum(utils) / len(utils)) if utils else None  # type: ignore[attr-defined]
        node.strips = gpu_strips(  # type: ignore[attr-defined]
            product=node.gpu_product,
            gpu_count=node.gpu_count,
            mig_config=node.mig_config,
            allocated={k: int(v) for k, v in node.allocated.items() if str(v).isdigit()},
            health_gpus=row.gpus if row is not None and row.gpus else None,
        )


def health_for_user(
    user: User, *, node: str = "", worst: str = "", cluster: Any = None
) -> list[dict[str, Any]]:
    """Every node's health (one node's, or those at one level; of one cluster or all),
    pods of other teams unnamed."""
    rows = (
        NodeHealth.objects.on_every_cluster() if cluster is None else NodeHealth.objects.on(cluster)
    ).select_related("cluster")
    if node:
        rows = rows.filter(node=node)
    if worst:
        rows = rows.filter(worst=worst)
    names = pod_names_for(user)

    def scoped(item: dict[str, Any], cluster: int) -> dict[str, Any]:
        """One GPU or MIG instance of a node of ``cluster``, its pod named or not."""
        if item.get("pod") and not names.named(cluster, item.get("namespace") or ""):
            return {**item, "namespace": "", "pod": "(another team's pod)"}
        return item

    return [
        {
            "node": row.node,
            "cluster": row.cluster.name,
            "observed_at": row.observed_at,
            "error": row.error,
            "worst": row.worst,
            "findings": row.findings,
            "gpus": [
                {
                    **scoped(g, row.cluster.pk),
                    "instances": [scoped(i, row.cluster.pk) for i in g.get("instances", [])],
                }
                for g in row.gpus
            ],
        }
        for row in rows.order_by("node", "cluster__name")
    ]
