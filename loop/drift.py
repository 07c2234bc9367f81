"""Drift: where the cluster differs from what the portal intends. Shown, never silently
"fixed": the poll records it, the applier re-applies the portal's own objects, and a MIG
layout that drifted waits for a reviewed MIG change.

Two kinds are found: a node whose MIG layout is not its pool's (or whose MIG Manager
failed), and a field of an object the portal applied that the cluster shows differently (or
the object gone). Each open difference is one row; it is closed once it no longer differs.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
from django.conf import settings

from cluster.models import AppliedObject, Cluster, Drift, ObservedNode, ObservedObject
from fleet.membership import holds
from fleet.models import NodePool
from gpus import labels as gpu_labels
from kube import ObjectRef
from loop.desired import collect_manifests
from portal.vocabulary.quantity import QuantityError, parse_quantity

# (kind, subject, field) -> (desired, observed, detail)
Found = dict[tuple[str, str, str], tuple[str, str, str]]
# Old names the portal renders for Kueue v1beta1 that a Kueue storing v1beta2 converts to
# the new one (and shows so when read back, also through v1beta1): not drift.
RENAMED = {
    "whenCanBorrow": {"Borrow": "MayStopSearch"},
    "whenCanPreempt": {"Preempt": "MayStopSearch"},
}


def record_drift(cluster: Cluster, *, now: dt.datetime) -> None:
    """Open the cluster's drift rows for what differs now, close those that no longer do."""
    found = {**mig_layout_drift(cluster.pk), **object_drift(cluster)}
    store_drift(found, cluster_id=cluster.pk, now=now)


def mig_layout_drift(cluster_id: int) -> Found:
    """Nodes of a pool with an intended MIG config that are on another one, or whose MIG
    Manager reports failed. A node that two pools select belongs to the one
    ``fleet.membership`` says (the first by name, with a config or not)."""
    found: Found = {}
    pools = list(NodePool.objects.on(cluster_id))
    for pool in pools:
        if not pool.mig_config:
            continue
        # Only the pool's nodes are loaded (jsonb containment), not the whole fleet.
        live = ObservedNode.objects.on(cluster_id).filter(gone_since__isnull=True)
        nodes = holds(live, pool, pools).only(
            "name", "mig_config", "mig_config_state", "mig_config_by", "allocatable"
        )
        for node in nodes:
            if node.mig_config == pool.mig_config and node.mig_config_state != "failed":
                continue
            offers = ", ".join(
                f"{r.removeprefix('nvidia.com/')} x {a}" for r, a, _ in node.gpu_resources()
            )
            found[(Drift.Kind.MIG_LAYOUT, node.name, gpu_labels.MIG_CONFIG)] = (
                pool.mig_config,
                f"{node.mig_config or '(none)'} ({node.mig_config_state or 'no state'})",
                f"Pool {pool.name} intends {pool.mig_config}; "
                f"the node offers {offers or 'no GPU resources'}."
                + (f" Set by {_who(node.mig_config_by)}." if node.mig_config_by else ""),
            )
    return found


def object_drift(cluster: Cluster) -> Found:
    """Fields the portal applied that the cluster shows differently, and applied objects
    that are gone. Objects not applied yet (or refused) are not drift: their apply record
    says why."""
    found: Found = {}
    observed = {
        (o.kind, o.namespace, o.name): o for o in ObservedObject.objects.filter(cluster=cluster)
    }
    applied = {
        (a.kind, a.namespace, a.name)
        for a in AppliedObject.objects.filter(
            cluster=cluster, outcome=AppliedObject.Outcome.APPLIED
        )
    }
    for manifest in collect_manifests(cluster=cluster):
        ref = ObjectRef.of(manifest)
        key = (ref.kind, ref.namespace, ref.name)
        if key not in applied:
            continue
        live = observed.get(key)
        subject = str(ref)
        if live is None:
            found[(Drift.Kind.MISSING, subject, "")] = (
                "present",
                "(absent)",
                "Deleted in the cluster after the portal applied it.",
            )
            continue
        wanted = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata")}
        wanted["metadata"] = {"labels": manifest["metadata"].get("labels", {})}
        writers = live.changed_by or []
        by = (
            " by "
            + ", ".join(f"{w['manager']} ({w['operation']}, {w['time']})" for w in writers[:2])
            if writers
            else ""
        )
        for path, desired, actual in _differences(wanted, live.spec):
            found[(Drift.Kind.OBJECT, subject, path)] = (
                _text(desired),
                _text(actual),
                f"Changed in the cluster outside the portal{by}.",
            )
    return found


def store_drift(found: Found, *, cluster_id: int, now: dt.datetime) -> None:
    """Open a row of the cluster's for each new difference, update the open ones, close
    those gone."""
    open_rows = {
        (d.kind, d.subject, d.field): d
        for d in Drift.objects.filter(cluster_id=cluster_id, resolved_at__isnull=True)
    }
    for key, (desired, actual, detail) in found.items():
        row = open_rows.get(key)
        if row is None:
            Drift.objects.create(
                cluster_id=cluster_id,
                kind=key[0],
                subject=key[1],
                field=key[2],
                desired=desired,
                observed=actual,
                detail=detail,
                first_seen=now,
                last_seen=now,
            )
        elif (row.desired, row.observed, row.detail) != (desired, actual, detail) or (
            row.last_seen < now
        ):
            Drift.objects.filter(pk=row.pk).update(
                desired=desired, observed=actual, detail=detail, last_seen=now
            )
    resolved = [row.pk for key, row in open_rows.items() if key not in found]
    if resolved:
        Drift.objects.filter(pk__in=resolved).update(resolved_at=now)


def _same(desired: Any, observed: Any) -> bool:
    if desired == observed:
        return True
    if (
        isinstance(desired, str | int)
        and isinstance(observed, str | int)
        and not isinstance(desired, bool)
    ):
        try:
            return parse_quantity(desired) == parse_quantity(observed)
        except QuantityError:
            return False
    return False


def _differences(desired: Any, observed: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Fields the portal sets whose live value differs (extra live fields are not drift)."""
    if isinstance(desired, dict):
        if not isinstance(observed, dict):
            return [(path, desired, observed)]
        out = []
        for key, value in desired.items():
            out += _differences(value, observed.get(key), f"{path}.{key}" if path else key)
        return out
    if isinstance(desired, list) and isinstance(observed, list) and len(desired) == len(observed):
        out = []
        for i, (d, o) in enumerate(zip(desired, observed, strict=True)):
            out += _differences(d, o, f"{path}[{i}]")
        return out
    if (
        _same(desired, observed)
        or RENAMED.get(path.rpartition(".")[2], {}).get(desired) == observed
    ):
        return []
    return [(path, desired, observed)]


def _text(value: Any) -> str:
    if value is None:
        return "(absent)"
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _who(owner: str) -> str:
    """``manager at time`` as a reader wants it (the portal's own writes say so)."""
    manager, _, stamp = owner.partition(" at ")
    if manager == settings.QM_FIELD_MANAGER:
        manager = "the portal"
    return f"{manager} at {stamp}" if stamp else manager
