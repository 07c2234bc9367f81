"""Impact assessment of a MIG change: a pure function over observed state and desired quotas.

Given the fleet as plain facts (built by :func:`fleet.changes.fleet_facts` from the observed
tables, or by hand in tests), it says what the change does to capacity, queues, quotas,
running and pending work and node pools, and ends in a verdict:

- ``blocked``: it cannot or must not run (unknown or busy nodes, a config the GPUs cannot
  take, nothing to change);
- ``breaks_quota``: queues or team quotas would promise capacity that no longer exists;
- ``needs_drain``: GPU pods on the nodes must be evicted first (MIG Manager fails on a GPU
  in use and never evicts anything itself);
- ``safe``.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fleet.catalog import config_layout, layout_resources, standard_configs

VERDICTS = ("safe", "needs_drain", "breaks_quota", "blocked")  # from best to worst
VERDICT_LABELS = {
    "safe": "Safe",
    "needs_drain": "Needs a drain",
    "breaks_quota": "Breaks quota",
    "blocked": "Blocked",
}
MIG_CONFIG_LABEL = "nvidia.com/mig.config"


@dataclass(frozen=True)
class NodeFacts:
    name: str
    model: str | None
    gpu_count: int
    mig_config: str
    mig_state: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]  # GPU resources > 0
    gone: bool = False


@dataclass(frozen=True)
class PodFacts:
    namespace: str
    name: str
    node: str
    phase: str
    gpu: Mapping[str, int]
    team: str = ""


@dataclass(frozen=True)
class QueueQuota:
    cluster_queue: str
    flavor: str
    resource: str
    nominal: int


@dataclass(frozen=True)
class NamespaceQuota:
    namespace: str
    team: str
    resource: str  # the resource itself, e.g. nvidia.com/mig-3g.40gb
    hard: int


@dataclass(frozen=True)
class PoolFacts:
    name: str
    selector: Mapping[str, str]
    mig_config: str


@dataclass
class Fleet:
    nodes: Sequence[NodeFacts]
    pods: Sequence[PodFacts] = ()
    queues: Sequence[QueueQuota] = ()
    flavors: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # flavor -> nodeLabels
    quotas: Sequence[NamespaceQuota] = ()
    pools: Sequence[PoolFacts] = ()
    busy: Mapping[str, int] = field(default_factory=dict)  # node -> open request id
    custom_configs: Mapping[str, tuple[str, Mapping[str, int]]] = field(default_factory=dict)


def config_entries(name: str, fleet: Fleet) -> list[dict[str, Any]] | None:
    """A config's mig-parted entries: standard, or custom (same devices on every GPU)."""
    if name in fleet.custom_configs:
        model, devices = fleet.custom_configs[name]
        return [
            {"devices": "all", "mig-enabled": True, "mig-devices": dict(devices), "_model": model}
        ]
    return standard_configs().get(name)


def promised_resources(
    config: str, node: NodeFacts, fleet: Fleet
) -> tuple[dict[str, int] | None, list[str]]:
    """What the node will offer on ``config`` (None when the config cannot apply)."""
    entries = config_entries(config, fleet)
    if entries is None:
        return None, [f"There is no MIG config named {config}."]
    if node.model is None:
        return None, [f"{node.name} has no GPU model the portal knows."]
    custom_model = entries[0].get("_model")
    if custom_model and custom_model != node.model:
        return None, [
            f"{config} is defined for {custom_model}, but {node.name} has {node.model} GPUs."
        ]
    layout, errors = config_layout(entries, node.model, node.gpu_count)
    if errors:
        return None, [f"{config} cannot be applied to {node.model}: {errors[0]}"]
    if all(gpu is None for gpu in layout):
        return None, [
            f"{config} matches none of {node.name}'s {node.model} GPUs: MIG Manager would "
            "report success and change nothing."
        ]
    return layout_resources(layout), []


def valid_configs(node: NodeFacts, fleet: Fleet) -> list[str]:
    """Config names a node's GPU model can take (what a request form offers)."""
    names = sorted(set(standard_configs()) | set(fleet.custom_configs))
    return [n for n in names if promised_resources(n, node, fleet)[0] is not None]


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _short(resource: str) -> str:
    return resource.removeprefix("nvidia.com/")


def assess(
    fleet: Fleet,
    *,
    targets: Iterable[str],
    config: str,
    request_id: int | None = None,
    drain: bool = False,
) -> dict[str, Any]:
    """The assessment as a JSON-ready dict (stored with the request). ``drain``: the nodes are
    cordoned and drained instead of re-sliced (their GPUs leave the fleet until returned)."""
    names = list(dict.fromkeys(targets))
    by_name = {n.name: n for n in fleet.nodes if not n.gone}
    blocked: list[str] = []
    quota_reasons: list[str] = []
    notes: list[str] = []
    if not names:
        blocked.append("Choose at least one node.")
    missing = [n for n in names if n not in by_name]
    if missing:
        blocked.append(f"Not in the fleet (or gone): {', '.join(missing)}.")
    nodes = [by_name[n] for n in names if n in by_name]
    models = {n.model for n in nodes}
    if len(models) > 1:
        blocked.append("The nodes have different GPU models; request one change per model.")
    after_of: dict[str, dict[str, int]] = {}
    for node in nodes:
        promised, errors = ({}, []) if drain else promised_resources(config, node, fleet)
        blocked.extend(e for e in errors if e not in blocked)
        if promised is not None:
            after_of[node.name] = promised
        other = fleet.busy.get(node.name)
        if other is not None and other != request_id:
            blocked.append(f"{node.name} is already part of open request #{other}.")
    unchanged = [
        n.name
        for n in nodes
        if n.mig_config == config
        and n.mig_state == "success"
        and n.name in after_of
        and dict(n.allocatable) == after_of[n.name]
    ]
    if nodes and len(unchanged) == len(nodes) and not drain:
        blocked.append(f"Every node is already on {config}: there is nothing to change.")

    # Capacity per resource, whole fleet, before and after.
    before: dict[str, int] = defaultdict(int)
    after: dict[str, int] = defaultdict(int)
    for node in by_name.values():
        for resource, amount in node.allocatable.items():
            before[resource] += amount
            if node.name not in after_of:
                after[resource] += amount
        for resource, amount in after_of.get(node.name, {}).items():
            after[resource] += amount

    # After a change a node's mig.config label moves: flavors keyed on it follow.
    def labels_after(node: NodeFacts) -> Mapping[str, str]:
        return {**node.labels, MIG_CONFIG_LABEL: config} if node.name in after_of else node.labels

    flavor_before: dict[tuple[str, str], int] = defaultdict(int)
    flavor_after: dict[tuple[str, str], int] = defaultdict(int)
    for flavor, node_labels in fleet.flavors.items():
        for node in by_name.values():
            if _selects(node_labels, node.labels):
                for resource, amount in node.allocatable.items():
                    flavor_before[(flavor, resource)] += amount
            if _selects(node_labels, labels_after(node)):
                offer = after_of.get(node.name, node.allocatable)
                for resource, amount in offer.items():
                    flavor_after[(flavor, resource)] += amount
    nominal: dict[tuple[str, str], int] = defaultdict(int)
    queues_of: dict[tuple[str, str], list[QueueQuota]] = defaultdict(list)
    for quota in fleet.queues:
        nominal[(quota.flavor, quota.resource)] += quota.nominal
        queues_of[(quota.flavor, quota.resource)].append(quota)
    queue_rows = []
    proposals = []
    for key, total in sorted(nominal.items()):
        flavor, resource = key
        cap_before, cap_after = flavor_before.get(key, 0), flavor_after.get(key, 0)
        if cap_before == cap_after:
            continue
        queue_rows.append(
            {
                "flavor": flavor,
                "resource": resource,
                "nominal": total,
                "capacity_before": cap_before,
                "capacity_after": cap_after,
            }
        )
        if total > cap_after and cap_after < cap_before:
            owners = ", ".join(f"{q.cluster_queue} ({q.nominal})" for q in queues_of[key])
            quota_reasons.append(
                f"Queues promise {total} {_short(resource)} on flavor {flavor} ({owners}), "
                f"but after "
                f"the change its nodes offer {cap_after} (now {cap_before})."
            )
            remaining = cap_after
            for quota in sorted(queues_of[key], key=lambda q: -q.nominal):
                share = min(quota.nominal, round(quota.nominal * cap_after / total) if total else 0)
                share = min(share, remaining)
                remaining -= share
                if share != quota.nominal:
                    proposals.append(
                        {
                            "cluster_queue": quota.cluster_queue,
                            "flavor": flavor,
                            "resource": resource,
                            "from": quota.nominal,
                            "to": share,
                        }
                    )
    for ns_quota in fleet.quotas:
        offered = after.get(ns_quota.resource, 0)
        if ns_quota.hard > offered and offered < before.get(ns_quota.resource, 0):
            quota_reasons.append(
                f"{ns_quota.team or ns_quota.namespace}'s quota allows {ns_quota.hard} "
                f"{_short(ns_quota.resource)} "
                f"in {ns_quota.namespace}, but the fleet would offer {offered}."
            )

    evictions: list[dict[str, Any]] = [
        {
            "namespace": p.namespace,
            "pod": p.name,
            "node": p.node,
            "team": p.team,
            "resources": dict(p.gpu),
        }
        for p in fleet.pods
        if p.node in after_of and p.gpu and p.phase not in ("Succeeded", "Failed")
    ]
    schedulable: list[dict[str, Any]] = []
    for pod in fleet.pods:
        if pod.node or pod.phase != "Pending" or not pod.gpu:
            continue
        for node_name, offer in after_of.items():
            if all(offer.get(r, 0) >= a for r, a in pod.gpu.items()) and not all(
                by_name[node_name].allocatable.get(r, 0) >= a for r, a in pod.gpu.items()
            ):
                schedulable.append(
                    {
                        "namespace": pod.namespace,
                        "pod": pod.name,
                        "team": pod.team,
                        "resources": dict(pod.gpu),
                        "node": node_name,
                    }
                )
                break

    if drain:
        # Taking broken hardware out is not a choice to weigh against queue promises: the
        # shortfall is shown, not held against the request.
        notes.extend(quota_reasons)
        quota_reasons, proposals, schedulable = [], [], []
        notes.append("The nodes stay cordoned until an admin returns them to service.")
    for pool in [] if drain else fleet.pools:
        members = [n for n in by_name.values() if _selects(pool.selector, n.labels)]
        touched = [n for n in members if n.name in after_of]
        if not touched:
            continue
        layouts = {config if n.name in after_of else n.mig_config for n in members}
        if len(layouts) > 1:
            notes.append(
                f"Pool {pool.name} would mix MIG layouts ({', '.join(sorted(layouts))}); "
                "keep one layout per pool."
            )
        if pool.mig_config and config != pool.mig_config:
            notes.append(
                f"Pool {pool.name} intends {pool.mig_config}; this moves "
                f"{_plural(len(touched), 'node')} away from it (the fleet will show drift)."
            )
        elif pool.mig_config == config:
            notes.append(
                f"Brings {_plural(len(touched), 'node')} of pool {pool.name} back to its "
                f"intended {config}."
            )

    reasons: list[str] = []
    if blocked:
        verdict = "blocked"
        reasons = blocked
    elif quota_reasons:
        verdict = "breaks_quota"
        reasons = quota_reasons
    elif evictions:
        verdict = "needs_drain"
    else:
        verdict = "safe"
    if evictions:
        teams = sorted({e["team"] or e["namespace"] for e in evictions})
        reasons.append(
            f"{_plural(len(evictions), 'GPU pod')} of {', '.join(teams)} must be evicted first "
            "(MIG Manager fails on a GPU in use)."
        )
    if schedulable:
        reasons.append(
            f"{_plural(len(schedulable), 'Pending pod')} would fit afterwards "
            f"({', '.join(sorted({s['namespace'] + '/' + s['pod'] for s in schedulable}))})."
        )
    if verdict == "safe" and not reasons:
        reasons.append(
            "No running GPU work is affected."
            if drain
            else "No running GPU work is affected and every queue stays backed by capacity."
        )
    changed = sorted(set(before) | set(after))
    return {
        "verdict": verdict,
        "verdict_label": VERDICT_LABELS[verdict],
        "drain": drain,
        "reasons": reasons,
        "notes": notes,
        "config": config,
        "nodes": [
            {
                "name": n.name,
                "model": n.model,
                "gpu_count": n.gpu_count,
                "config_before": n.mig_config,
                "state_before": n.mig_state,
                "before": dict(n.allocatable),
                "after": after_of.get(n.name),
            }
            for n in nodes
        ],
        "capacity": [
            {"resource": r, "before": before.get(r, 0), "after": after.get(r, 0)}
            for r in changed
            if before.get(r, 0) != after.get(r, 0)
        ],
        "queues": queue_rows,
        "proposed_queue_changes": proposals,
        "evictions": evictions,
        "schedulable": schedulable,
        "fingerprint": fingerprint(nodes, fleet.pods, after_of),
    }


def fingerprint(
    nodes: Sequence[NodeFacts], pods: Sequence[PodFacts], after_of: Mapping[str, Any]
) -> str:
    """A hash of the observed facts the verdict rests on (targets and their pods)."""
    names = {n.name for n in nodes}
    data = [
        [asdict(n) for n in sorted(nodes, key=lambda n: n.name)],
        sorted(
            [p.namespace, p.name, p.node, p.phase, dict(p.gpu)] for p in pods if p.node in names
        ),
        {k: after_of[k] for k in sorted(after_of)},
    ]
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def worse(new: str, old: str) -> bool:
    return VERDICTS.index(new) > VERDICTS.index(old)


def flavor_shortfalls(fleet: Fleet) -> list[dict[str, Any]]:
    """Every (flavor, resource) whose queues' total nominal quota exceeds the allocatable
    capacity of the nodes behind the flavor (queues promising what does not exist)."""
    capacity: dict[tuple[str, str], int] = defaultdict(int)
    for flavor, node_labels in fleet.flavors.items():
        for node in fleet.nodes:
            if not node.gone and _selects(node_labels, node.labels):
                for resource, amount in node.allocatable.items():
                    capacity[(flavor, resource)] += amount
    nominal: dict[tuple[str, str], int] = defaultdict(int)
    owners: dict[tuple[str, str], list[str]] = defaultdict(list)
    for quota in fleet.queues:
        nominal[(quota.flavor, quota.resource)] += quota.nominal
        owners[(quota.flavor, quota.resource)].append(f"{quota.cluster_queue} ({quota.nominal})")
    return [
        {
            "flavor": flavor,
            "resource": resource,
            "nominal": total,
            "capacity": capacity.get((flavor, resource), 0),
            "queues": owners[(flavor, resource)],
        }
        for (flavor, resource), total in sorted(nominal.items())
        if total > capacity.get((flavor, resource), 0)
    ]
