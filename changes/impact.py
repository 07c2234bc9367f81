"""Impact assessment of a MIG change or a drain: a pure function over observed state and
desired quotas.

Given the fleet as plain facts (built by :func:`changes.facts.fleet_facts` from the observed
tables, or by hand in tests), it says what the change does to capacity, queues, quotas,
running and pending work and node pools, and ends in a verdict:

- ``blocked``: it cannot or must not run (unknown or busy nodes, a config the GPUs cannot
  take, nothing to change);
- ``breaks_quota``: queues or team quotas would promise capacity that no longer exists;
- ``needs_drain``: GPU pods on the nodes must be evicted first (MIG Manager fails on a GPU
  in use and never evicts anything itself);
- ``safe``.

The result is an :class:`Assessment`; its :meth:`~Assessment.as_json` is what a request
stores and the pages and the API show.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from cluster.disruption import Budget, Owner, PodWork
from fleet.membership import in_order, pool_of
from gpus import labels as gpu_labels
from gpus.catalog import CustomConfigs, most_per_gpu, promised_resources
from portal.vocabulary.names import selector_matches

VERDICTS = ("safe", "needs_drain", "breaks_quota", "blocked")  # from best to worst
VERDICT_LABELS = {
    "safe": "Safe",
    "needs_drain": "Needs a drain",
    "breaks_quota": "Breaks quota",
    "blocked": "Blocked",
}
Resources = dict[str, int]


def verdict_label(verdict: str) -> str:
    """A verdict in words ("Breaks quota"), also one this release does not know."""
    return VERDICT_LABELS.get(verdict, verdict.replace("_", " "))


SCHEDULABLE_SUFFIX = " would fit afterwards."


# ----------------------------------------------------------------------------- facts


@dataclass(frozen=True, slots=True)
class NodeFacts:
    name: str
    model: str | None
    gpu_count: int
    mig_config: str
    mig_state: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]  # GPU resources > 0
    gone: bool = False


@dataclass(frozen=True, slots=True)
class PodFacts:
    namespace: str
    name: str
    node: str
    phase: str
    gpu: Mapping[str, int]
    team: str = ""


@dataclass(frozen=True, slots=True)
class QueueQuota:
    cluster_queue: str
    flavor: str
    resource: str
    nominal: int
    teams: tuple[str, ...] = ()  # the teams whose LocalQueues submit to it


@dataclass(frozen=True, slots=True)
class NamespaceQuota:
    namespace: str
    team: str
    resource: str  # the resource itself, e.g. nvidia.com/mig-3g.40gb
    hard: int


@dataclass(frozen=True, slots=True)
class PoolFacts:
    name: str
    selector: Mapping[str, str]
    mig_config: str


@dataclass(frozen=True)
class Disruption:
    """What decides each eviction's outcome, read from the cluster for the changed nodes:
    their pods' labels and owners, and the PodDisruptionBudgets of their namespaces."""

    pods: Mapping[tuple[str, str], PodWork] = field(default_factory=dict)
    budgets: Sequence[Budget] = ()
    unread: str = ""  # why it could not be read ("" when it was)


@dataclass
class Fleet:
    nodes: Sequence[NodeFacts]
    pods: Sequence[PodFacts] = ()
    queues: Sequence[QueueQuota] = ()
    flavors: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # flavor -> nodeLabels
    quotas: Sequence[NamespaceQuota] = ()
    pools: Sequence[PoolFacts] = ()
    busy: Mapping[str, int] = field(default_factory=dict)  # node -> open request id
    custom_configs: CustomConfigs = field(default_factory=dict)
    disruption: Disruption | None = None  # None: not read (no cluster to ask)


def promised_on(config: str, node: NodeFacts, fleet: Fleet) -> tuple[Resources | None, list[str]]:
    """What ``node`` will offer on ``config`` (None, with the reasons, when it cannot)."""
    return promised_resources(
        config,
        node=node.name,
        model=node.model,
        gpu_count=node.gpu_count,
        custom=fleet.custom_configs,
    )


# ----------------------------------------------------------------------------- result


@dataclass(frozen=True, slots=True)
class NodeChange:
    name: str
    model: str | None
    gpu_count: int
    config_before: str
    state_before: str
    before: Resources
    after: Resources | None  # None: drained (its GPUs leave the fleet until returned)


@dataclass(frozen=True, slots=True)
class CapacityChange:
    resource: str
    before: int
    after: int


@dataclass(frozen=True, slots=True)
class FlavorCapacity:
    """A flavor whose capacity the change moves, next to what its queues promise."""

    flavor: str
    resource: str
    nominal: int
    capacity_before: int
    capacity_after: int


@dataclass(frozen=True, slots=True)
class QueueChange:
    """A ClusterQueue nominal quota the change should lower to stay backed by capacity."""

    cluster_queue: str
    flavor: str
    resource: str
    before: int
    after: int

    def as_json(self) -> dict[str, Any]:
        return {
            "cluster_queue": self.cluster_queue,
            "flavor": self.flavor,
            "resource": self.resource,
            "from": self.before,
            "to": self.after,
        }


@dataclass(frozen=True, slots=True)
class Eviction:
    namespace: str
    pod: str
    node: str
    team: str
    resources: Resources
    outcome: str = ""  # what evicting it does to its work ("" when not known)
    ends_work: bool | None = None  # True: work is lost; False: rescheduled; None: unknown
    budget: str = ""  # namespace/name of the PodDisruptionBudget that covers it
    budget_allows: int | None = None  # the disruptions that budget allows now


@dataclass(frozen=True, slots=True)
class Schedulable:
    """A Pending pod that would fit on one of the changed nodes afterwards."""

    namespace: str
    pod: str
    team: str
    resources: Resources
    node: str


# The stored assessment's shape: 1 had no "version" key (stored before it was typed); 2
# adds it and nothing else, so a version-1 row reads as one of today's.
ASSESSMENT_VERSION = 2


@dataclass(frozen=True, slots=True)
class Assessment:
    """A MIG change's (or drain's) impact: stored with the request as :meth:`as_json`, read
    back with :meth:`from_json` (any stored version)."""

    verdict: str
    drain: bool
    reasons: list[str]
    notes: list[str]
    config: str
    nodes: list[NodeChange]
    capacity: list[CapacityChange]
    queues: list[FlavorCapacity]
    proposed_queue_changes: list[QueueChange]
    evictions: list[Eviction]
    schedulable: list[Schedulable]
    fingerprint: str
    teams_hit: list[str] = field(default_factory=list)
    version: int = ASSESSMENT_VERSION

    @property
    def verdict_label(self) -> str:
        return VERDICT_LABELS[self.verdict]

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Assessment:
        """The assessment a request stores (``{}``, or None, for one never assessed: a
        blocked verdict with no reason). Keys a stored version lacks read as empty."""
        data = data or {}
        return cls(
            verdict=str(data.get("verdict") or "blocked"),
            drain=bool(data.get("drain", False)),
            reasons=list(data.get("reasons") or []),
            notes=list(data.get("notes") or []),
            config=str(data.get("config") or ""),
            nodes=[_node_change(n) for n in data.get("nodes") or []],
            capacity=[CapacityChange(**c) for c in data.get("capacity") or []],
            queues=[FlavorCapacity(**q) for q in data.get("queues") or []],
            proposed_queue_changes=[
                QueueChange(q["cluster_queue"], q["flavor"], q["resource"], q["from"], q["to"])
                for q in data.get("proposed_queue_changes") or []
            ],
            evictions=[_eviction(e) for e in data.get("evictions") or []],
            schedulable=[Schedulable(**s) for s in data.get("schedulable") or []],
            fingerprint=str(data.get("fingerprint") or ""),
            teams_hit=list(data.get("teams_hit") or []),
            version=int(data.get("version") or 1),
        )

    def as_json(self) -> dict[str, Any]:
        """The assessment as stored with the request and shown by the pages and the API
        (built field by field: ``asdict`` deep-copies, and an assessment may name tens of
        thousands of pods; their resource maps are the assessment's own, not copied)."""
        return {
            "verdict": self.verdict,
            "verdict_label": self.verdict_label,
            "drain": self.drain,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "config": self.config,
            "nodes": [
                {
                    "name": n.name,
                    "model": n.model,
                    "gpu_count": n.gpu_count,
                    "config_before": n.config_before,
                    "state_before": n.state_before,
                    "before": dict(n.before),
                    "after": None if n.after is None else dict(n.after),
                }
                for n in self.nodes
            ],
            "capacity": [
                {"resource": c.resource, "before": c.before, "after": c.after}
                for c in self.capacity
            ],
            "queues": [
                {
                    "flavor": q.flavor,
                    "resource": q.resource,
                    "nominal": q.nominal,
                    "capacity_before": q.capacity_before,
                    "capacity_after": q.capacity_after,
                }
                for q in self.queues
            ],
            "proposed_queue_changes": [q.as_json() for q in self.proposed_queue_changes],
            "evictions": [
                {
                    "namespace": e.namespace,
                    "pod": e.pod,
                    "node": e.node,
                    "team": e.team,
                    "resources": e.resources,
                    "outcome": e.outcome,
                    "ends_work": e.ends_work,
                    "budget": e.budget,
                    "budget_allows": e.budget_allows,
                }
                for e in self.evictions
            ],
            "schedulable": [
                {
                    "namespace": s.namespace,
                    "pod": s.pod,
                    "team": s.team,
                    "resources": s.resources,
                    "node": s.node,
                }
                for s in self.schedulable
            ],
            "fingerprint": self.fingerprint,
            "teams_hit": list(self.teams_hit),
            "version": ASSESSMENT_VERSION,
        }


def _node_change(data: Mapping[str, Any]) -> NodeChange:
    after = data.get("after")
    return NodeChange(
        name=data["name"],
        model=data.get("model"),
        gpu_count=int(data.get("gpu_count") or 0),
        config_before=str(data.get("config_before") or ""),
        state_before=str(data.get("state_before") or ""),
        before=dict(data.get("before") or {}),
        after=None if after is None else dict(after),
    )


def _eviction(data: Mapping[str, Any]) -> Eviction:
    return Eviction(
        namespace=data["namespace"],
        pod=data["pod"],
        node=data.get("node", ""),
        team=data.get("team", ""),
        resources=dict(data.get("resources") or {}),
        outcome=data.get("outcome", ""),
        ends_work=data.get("ends_work"),
        budget=data.get("budget", ""),
        budget_allows=data.get("budget_allows"),
    )


# ----------------------------------------------------------------------------- assess


@dataclass
class _Targets:
    """The nodes a change touches and what each offers afterwards."""

    nodes: list[NodeFacts]
    after_of: dict[str, Resources]
    blocked: list[str]


def assess(
    fleet: Fleet,
    *,
    targets: Iterable[str],
    config: str,
    request_id: int | None = None,
    drain: bool = False,
) -> Assessment:
    """The assessment of moving ``targets`` to ``config`` (``drain``: cordoning and draining
    them instead; their GPUs leave the fleet until returned)."""
    by_name = {n.name: n for n in fleet.nodes if not n.gone}
    chosen = _targets(fleet, by_name, list(dict.fromkeys(targets)), config, request_id, drain)
    before, after = _capacity(by_name, chosen.after_of)
    queue_rows, proposals, quota_reasons, queue_notes = _queue_effects(
        fleet, by_name, chosen.after_of, config
    )
    quota_reasons += _namespace_quota_effects(fleet, before, after)
    evictions = _evictions(fleet, chosen.after_of)
    schedulable = _schedulable(fleet, by_name, chosen.after_of)
    notes: list[str] = []
    if drain:
        # One verdict rule for drains and MIG changes: promises left without capacity break
        # quota either way (the approver decides whether broken hardware goes out anyway);
        # a drain proposes no lower quotas, since the node comes back once repaired.
        proposals, schedulable = [], []
        notes.append("The nodes stay cordoned until an admin returns them to service.")
    else:
        notes.extend(queue_notes)
        notes.extend(_pool_notes(fleet, by_name, chosen.after_of, config))
        empty = [name for name, offer in chosen.after_of.items() if not offer]
        if empty:
            notes.insert(
                0,
                f"On {config}, {', '.join(empty)} would offer no GPU at all: MIG mode on with "
                "no instance (MIG Manager reports success; the device plugin advertises "
                "nothing) until another config creates instances.",
            )
    disrupting = _disruption_reasons(fleet.disruption, evictions)
    if fleet.disruption is not None and fleet.disruption.unread and evictions:
        notes.append(
            "Whether the evictions end work or are held by a PodDisruptionBudget could not "
            f"be read: {fleet.disruption.unread}"
        )
    verdict, reasons = _verdict(
        chosen.blocked, quota_reasons, evictions, schedulable, drain, disrupting
    )
    if verdict == "blocked":  # what it would evict or let run is a note: it cannot run as asked
        notes[:0] = [r for r in reasons if r not in chosen.blocked]
        reasons = list(chosen.blocked)
    hit = {e.team for e in evictions} | _teams_losing_backing(fleet, proposals, before, after)
    node_changes = _node_changes(chosen)
    capacity = [
        CapacityChange(r, before.get(r, 0), after.get(r, 0))
        for r in sorted(set(before) | set(after))
        if before.get(r, 0) != after.get(r, 0)
    ]
    return Assessment(
        verdict=verdict,
        drain=drain,
        reasons=reasons,
        notes=notes,
        config=config,
        nodes=node_changes,
        capacity=capacity,
        queues=queue_rows,
        proposed_queue_changes=proposals,
        evictions=evictions,
        schedulable=schedulable,
        fingerprint=fingerprint(
            verdict=verdict,
            reasons=[r for r in reasons if not r.endswith(SCHEDULABLE_SUFFIX)],
            notes=notes,
            nodes=node_changes,
            capacity=capacity,
            queues=queue_rows,
            proposals=proposals,
            evictions=evictions,
        ),
        teams_hit=sorted(hit - {""}),
    )


def _node_changes(chosen: _Targets) -> list[NodeChange]:
    return [
        NodeChange(
            name=n.name,
            model=n.model,
            gpu_count=n.gpu_count,
            config_before=n.mig_config,
            state_before=n.mig_state,
            before=dict(n.allocatable),
            after=chosen.after_of.get(n.name),
        )
        for n in chosen.nodes
    ]


def _teams_losing_backing(
    fleet: Fleet,
    proposals: Sequence[QueueChange],
    before: Mapping[str, int],
    after: Mapping[str, int],
) -> set[str]:
    """Teams whose queue quota the change lowers, or whose namespace quota it leaves
    allowing more than the fleet then offers."""
    lowered = {(p.cluster_queue, p.flavor, p.resource) for p in proposals}
    teams = {
        team
        for quota in fleet.queues
        if (quota.cluster_queue, quota.flavor, quota.resource) in lowered
        for team in quota.teams
    }
    for quota in fleet.quotas:
        offered = after.get(quota.resource, 0)
        if quota.hard > offered and offered < before.get(quota.resource, 0):
            teams.add(quota.team)
    return teams


def _targets(
    fleet: Fleet,
    by_name: Mapping[str, NodeFacts],
    names: list[str],
    config: str,
    request_id: int | None,
    drain: bool,
) -> _Targets:
    """The nodes asked for, what each offers afterwards, and why the change cannot run."""
    blocked: list[str] = []
    if not names:
        blocked.append("Choose at least one node.")
    missing = [n for n in names if n not in by_name]
    if missing:
        blocked.append(f"Not in the fleet (or gone): {', '.join(missing)}.")
    nodes = [by_name[n] for n in names if n in by_name]
    if len({n.model for n in nodes}) > 1:
        blocked.append("The nodes have different GPU models; request one change per model.")
    after_of: dict[str, Resources] = {}
    for node in nodes:
        promised, errors = ({}, []) if drain else promised_on(config, node, fleet)
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
    return _Targets(nodes, after_of, blocked)


def _capacity(
    by_name: Mapping[str, NodeFacts], after_of: Mapping[str, Resources]
) -> tuple[dict[str, int], dict[str, int]]:
    """GPU capacity per resource of the whole fleet, before and after."""
    before: dict[str, int] = defaultdict(int)
    after: dict[str, int] = defaultdict(int)
    for node in by_name.values():
        for resource, amount in node.allocatable.items():
            before[resource] += amount
            if node.name not in after_of:
                after[resource] += amount
        for resource, amount in after_of.get(node.name, {}).items():
            after[resource] += amount
    return before, after


def flavor_capacity(
    flavors: Mapping[str, Mapping[str, str]],
    nodes: Iterable[NodeFacts],
    offer: Any = None,
) -> dict[tuple[str, str], int]:
    """(flavor, resource) -> what the nodes a flavor selects offer. ``offer(node)`` gives
    (labels, resources) of a node; by default what it has now."""
    capacity: dict[tuple[str, str], int] = defaultdict(int)
    nodes = list(nodes)
    for flavor, node_labels in flavors.items():
        for node in nodes:
            labels, resources = offer(node) if offer else (node.labels, node.allocatable)
            if selector_matches(node_labels, labels):
                for resource, amount in resources.items():
                    capacity[(flavor, resource)] += amount
    return capacity


def _queue_effects(
    fleet: Fleet, by_name: Mapping[str, NodeFacts], after_of: Mapping[str, Resources], config: str
) -> tuple[list[FlavorCapacity], list[QueueChange], list[str], list[str]]:
    """Every promise on the flavors the change touches (a flavor whose capacity moves, or
    one that selects a changed node before or after): the rows, the lower nominal quotas
    that would make each unbacked promise true again (shared in proportion), the reasons
    (promises this change leaves without capacity) and the notes (promises that were
    already unbacked, which the request fixes too)."""

    def offer_after(node: NodeFacts) -> tuple[Mapping[str, str], Mapping[str, int]]:
        # After a change a node's mig.config label moves: flavors keyed on it follow.
        if node.name not in after_of:
            return node.labels, node.allocatable
        return {**node.labels, gpu_labels.MIG_CONFIG: config}, after_of[node.name]

    cap_before = flavor_capacity(fleet.flavors, by_name.values())
    cap_after = flavor_capacity(fleet.flavors, by_name.values(), offer_after)
    touched = _touched_flavors(fleet, by_name, after_of, offer_after)
    nominal: dict[tuple[str, str], int] = defaultdict(int)
    queues_of: dict[tuple[str, str], list[QueueQuota]] = defaultdict(list)
    for quota in fleet.queues:
        nominal[(quota.flavor, quota.resource)] += quota.nominal
        queues_of[(quota.flavor, quota.resource)].append(quota)
    rows, proposals, reasons, notes = [], [], [], []
    for key, total in sorted(nominal.items()):
        flavor, resource = key
        was, will = cap_before.get(key, 0), cap_after.get(key, 0)
        if was == will and (flavor not in touched or total <= will):
            continue
        rows.append(FlavorCapacity(flavor, resource, total, was, will))
        if total <= will:
            continue
        owners = ", ".join(f"{q.cluster_queue} ({q.nominal})" for q in queues_of[key])
        if will < was:
            reasons.append(
                f"Queues promise {total} {_short(resource)} on flavor {flavor} ({owners}), "
                f"but after the change its nodes offer {will} (now {was})."
            )
        else:
            notes.append(
                f"Already unbacked: queues promise {total} {_short(resource)} on flavor "
                f"{flavor} ({owners}), and its nodes offer {will}"
                + (f" (now {was})" if was != will else "")
                + "; this request lowers the promise to what exists."
            )
        proposals.extend(_shares(queues_of[key], total, will))
    return rows, proposals, reasons, notes


def _touched_flavors(
    fleet: Fleet,
    by_name: Mapping[str, NodeFacts],
    after_of: Mapping[str, Resources],
    offer_after: Any,
) -> set[str]:
    """The flavors that select a changed node, before or after the change."""
    changed = [by_name[name] for name in after_of if name in by_name]
    return {
        flavor
        for flavor, node_labels in fleet.flavors.items()
        for node in changed
        if selector_matches(node_labels, node.labels)
        or selector_matches(node_labels, offer_after(node)[0])
    }


def _shares(queues: list[QueueQuota], total: int, capacity: int) -> list[QueueChange]:
    """Lower nominal quotas that fit ``capacity``, largest queue first, in proportion."""
    changes = []
    remaining = capacity
    for quota in sorted(queues, key=lambda q: -q.nominal):
        share = min(quota.nominal, round(quota.nominal * capacity / total) if total else 0)
        share = min(share, remaining)
        remaining -= share
        if share != quota.nominal:
            changes.append(
                QueueChange(quota.cluster_queue, quota.flavor, quota.resource, quota.nominal, share)
            )
    return changes


def _namespace_quota_effects(
    fleet: Fleet, before: Mapping[str, int], after: Mapping[str, int]
) -> list[str]:
    """Team quotas that would allow more than the fleet then offers (and did not before)."""
    reasons = []
    for quota in fleet.quotas:
        offered = after.get(quota.resource, 0)
        if quota.hard > offered and offered < before.get(quota.resource, 0):
            reasons.append(
                f"{quota.team or quota.namespace}'s quota allows {quota.hard} "
                f"{_short(quota.resource)} in {quota.namespace}, but the fleet would offer "
                f"{offered}."
            )
    return reasons


def _evictions(fleet: Fleet, after_of: Mapping[str, Resources]) -> list[Eviction]:
    """Running GPU pods on the changed nodes (MIG Manager fails on a GPU in use), each with
    what evicting it does to its work and the budget that covers it, where known."""
    out = []
    budgets = fleet.disruption.budgets if fleet.disruption else ()
    for p in fleet.pods:
        if p.node not in after_of or not p.gpu or p.phase in ("Succeeded", "Failed"):
            continue
        work = fleet.disruption.pods.get((p.namespace, p.name)) if fleet.disruption else None
        if work is None:
            out.append(Eviction(p.namespace, p.name, p.node, p.team, dict(p.gpu)))
            continue
        ends, outcome = eviction_outcome(work.owner)
        # The Eviction API holds a Running pod to its budget; a Pending one (bound, not
        # started) is evicted whatever the budget says, as Succeeded and Failed ones are.
        budget = (
            None
            if p.phase == "Pending"
            else next((b for b in budgets if b.covers(p.namespace, work.labels)), None)
        )
        out.append(
            Eviction(
                p.namespace,
                p.name,
                p.node,
                p.team,
                dict(p.gpu),
                outcome=outcome,
                ends_work=ends,
                budget=budget.ref if budget else "",
                budget_allows=budget.disruptions_allowed if budget else None,
            )
        )
    return out


def eviction_outcome(owner: Owner) -> tuple[bool | None, str]:
    """Whether evicting a pod ends its work (True), reschedules it (False) or cannot be
    told (None), and the words for it. A Job counts the evicted pod as a failure (the
    Eviction API deletes it; its podFailurePolicy may ignore that or fail the Job)."""
    kind, name = owner.kind, owner.name
    if not kind:
        return True, "deleted, nothing recreates it"
    if kind in ("ReplicaSet", "StatefulSet"):
        return False, f"rescheduled: {kind} {name} creates a new pod"
    if kind == "DaemonSet":
        return False, f"recreated on the same node by DaemonSet {name}"
    if kind != "Job":
        return None, f"its owner {kind} {name} decides whether it comes back"
    if owner.unread:
        return None, f"Job {name} could not be read ({owner.unread})"
    if owner.on_disruption == "Ignore":
        return (
            False,
            f"rescheduled: Job {name} starts a new pod (its podFailurePolicy ignores disruptions)",
        )
    if owner.on_disruption == "FailJob":
        return True, f"Job {name} fails (its podFailurePolicy fails it on a disruption)"
    limit = owner.backoff_limit or 0
    if owner.failed + 1 > limit:
        kueue = "; Kueue finishes its Workload as Failed" if owner.kueue else ""
        return True, f"Job {name} fails (backoffLimit {limit}){kueue}"
    return False, (
        f"rescheduled: Job {name} starts a new pod (failure {owner.failed + 1} of the "
        f"{limit} its backoffLimit allows)"
    )


def _disruption_reasons(disruption: Disruption | None, evictions: list[Eviction]) -> list[str]:
    """What the approver must know about the evictions: the work they end, and the budgets
    that hold them (none allowed now: the drain waits, then fails)."""
    if disruption is None or not evictions:
        return []
    reasons = []
    lost = [e for e in evictions if e.ends_work]
    if lost:
        named = "; ".join(f"{e.namespace}/{e.pod} — {e.outcome}" for e in lost[:5])
        more = f"; and {len(lost) - 5} more" if len(lost) > 5 else ""
        reasons.append(f"Evicting ends work: {named}{more}.")
    by_budget: dict[str, list[Eviction]] = defaultdict(list)
    for e in evictions:
        if e.budget:
            by_budget[e.budget].append(e)
    budgets = {b.ref: b for b in disruption.budgets}
    for ref, held in sorted(by_budget.items()):
        budget = budgets[ref]
        pods = ", ".join(f"{e.namespace}/{e.pod}" for e in held)
        if budget.disruptions_allowed < 1:
            reasons.append(
                f"The drain will be blocked: PodDisruptionBudget {ref} allows no disruption "
                f"now ({budget.current_healthy} healthy, {budget.desired_healthy} needed), so "
                f"{pods} cannot be evicted; the change waits at evict and fails after the "
                "eviction timeout unless the budget allows it by then."
            )
        elif len(held) > budget.disruptions_allowed:
            allows = _plural(budget.disruptions_allowed, "disruption")
            reasons.append(
                f"PodDisruptionBudget {ref} allows {allows} "
                f"now and covers {len(held)} of the pods to evict ({pods}): the rest wait "
                "until their replacements are healthy."
            )
    return reasons


def _schedulable(
    fleet: Fleet, by_name: Mapping[str, NodeFacts], after_of: Mapping[str, Resources]
) -> list[Schedulable]:
    """Pending GPU pods that fit one changed node afterwards and do not fit it now."""
    out = []
    for pod in fleet.pods:
        if pod.node or pod.phase != "Pending" or not pod.gpu:
            continue
        for node_name, offer in after_of.items():
            now = by_name[node_name].allocatable
            if all(offer.get(r, 0) >= a for r, a in pod.gpu.items()) and not all(
                now.get(r, 0) >= a for r, a in pod.gpu.items()
            ):
                out.append(Schedulable(pod.namespace, pod.name, pod.team, dict(pod.gpu), node_name))
                break
    return out


def _pool_notes(
    fleet: Fleet, by_name: Mapping[str, NodeFacts], after_of: Mapping[str, Resources], config: str
) -> list[str]:
    """Pool consistency (seed advice: do not mix MIG layouts in one pool) and intent."""
    notes = []
    ordered = in_order(fleet.pools)
    holder = {name: pool_of(n.labels, ordered) for name, n in by_name.items()}
    for pool in fleet.pools:
        members = [n for n in by_name.values() if holder[n.name] is pool]
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
    return notes


def _verdict(
    blocked: list[str],
    quota_reasons: list[str],
    evictions: list[Eviction],
    schedulable: list[Schedulable],
    drain: bool,
    disrupting: Sequence[str] = (),
) -> tuple[str, list[str]]:
    """The verdict, worst reason first, and the sentences that explain it."""
    reasons: list[str] = []
    if blocked:
        verdict, reasons = "blocked", list(blocked)
    elif quota_reasons:
        verdict, reasons = "breaks_quota", list(quota_reasons)
    elif evictions:
        verdict = "needs_drain"
    else:
        verdict = "safe"
    if evictions:
        teams = sorted({e.team or e.namespace for e in evictions})
        reasons.append(
            f"{_plural(len(evictions), 'GPU pod')} of {', '.join(teams)} must be evicted first "
            "(MIG Manager fails on a GPU in use)."
        )
        reasons.extend(disrupting)
    if schedulable:
        namespaces = ", ".join(sorted({s.namespace for s in schedulable}))
        reasons.append(
            f"{_plural(len(schedulable), 'Pending pod')} of {namespaces}{SCHEDULABLE_SUFFIX}"
        )
    if verdict == "safe" and not reasons:
        reasons.append(
            "No running GPU work is affected."
            if drain
            else "No running GPU work is affected and every queue stays backed by capacity."
        )
    return verdict, reasons


def fingerprint(
    *,
    verdict: str,
    reasons: Sequence[str],
    notes: Sequence[str],
    nodes: Sequence[NodeChange],
    capacity: Sequence[CapacityChange],
    queues: Sequence[FlavorCapacity],
    proposals: Sequence[QueueChange],
    evictions: Sequence[Eviction],
) -> str:
    """A hash of what the assessment tells its reader and what an approval would execute:
    the verdict and its reasons, each node's config and offer before and after, the
    capacity, the queue promises and the quota changes carried, and the pods to evict. An
    approval acts only on the assessment whose fingerprint the approver saw. Pending pods
    that would fit afterwards are left out: they come and go, and decide nothing."""
    data = [
        verdict,
        list(reasons),
        list(notes),
        [asdict(n) for n in nodes],
        [asdict(c) for c in capacity],
        [asdict(q) for q in queues],
        [asdict(p) for p in proposals],
        sorted([e.namespace, e.pod, e.node] for e in evictions),
    ]
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def worse(new: str, old: str) -> bool:
    return VERDICTS.index(new) > VERDICTS.index(old)


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A (flavor, resource) whose queues promise more than the nodes behind it offer."""

    flavor: str
    resource: str
    nominal: int
    capacity: int
    queues: list[str]


def flavor_shortfalls(
    fleet: Fleet, capacity: Mapping[tuple[str, str], int] | None = None
) -> list[Shortfall]:
    """Every (flavor, resource) whose queues' total nominal quota exceeds the allocatable
    capacity of the nodes behind the flavor (queues promising what does not exist).
    ``capacity`` is that capacity when it was summed elsewhere (in the database), else it is
    summed over ``fleet.nodes``."""
    if capacity is None:
        capacity = flavor_capacity(fleet.flavors, [n for n in fleet.nodes if not n.gone])
    return shortfalls_of(
        [(q.cluster_queue, q.flavor, q.resource, q.nominal) for q in fleet.queues], capacity
    )


def shortfalls_of(
    quotas: Sequence[tuple[str, str, str, int]], capacity: Mapping[tuple[str, str], int]
) -> list[Shortfall]:
    """``flavor_shortfalls`` of the queues' nominal quotas as (queue, flavor, resource,
    amount) and the capacity behind each flavor: summed first, the queues named only where
    their flavor falls short (a thousand queues promise, few of them too much)."""
    nominal: dict[tuple[str, str], int] = defaultdict(int)
    for _, flavor, resource, amount in quotas:
        nominal[(flavor, resource)] += amount
    short = sorted(key for key, total in nominal.items() if total > capacity.get(key, 0))
    owners: dict[tuple[str, str], list[str]] = {key: [] for key in short}
    if owners:
        for queue, flavor, resource, amount in quotas:
            if (flavor, resource) in owners:
                owners[(flavor, resource)].append(f"{queue} ({amount})")
    return [
        Shortfall(flavor, resource, nominal[key], capacity.get(key, 0), owners[key])
        for key in short
        for flavor, resource in [key]
    ]


def ceiling(fleet: Fleet, resource: str) -> int:
    """The most of a GPU resource (``nvidia.com/gpu`` or a MIG profile's) the whole fleet
    could ever offer, in its best layout for that resource: a quota above it can never be
    backed, whatever MIG changes follow. What a node offers now is never less than that (a
    model the catalog does not know still offers what it offers)."""
    return sum(_most(n, resource) for n in fleet.nodes if not n.gone)


def flavor_ceiling(fleet: Fleet, node_labels: Mapping[str, str], resource: str) -> int:
    """The most of ``resource`` the nodes behind a flavor could ever offer: the nodes its
    labels select, its MIG layout label aside (a MIG change can bring any of them into it),
    each in its best layout for the resource."""
    fixed = {k: v for k, v in node_labels.items() if k != gpu_labels.MIG_CONFIG}
    return sum(
        _most(n, resource) for n in fleet.nodes if not n.gone and selector_matches(fixed, n.labels)
    )


def _most(node: NodeFacts, resource: str) -> int:
    return max(
        node.gpu_count * most_per_gpu(node.model, resource), node.allocatable.get(resource, 0)
    )


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _short(resource: str) -> str:
    return resource.removeprefix(gpu_labels.GPU_RESOURCE_PREFIX)


def what_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """A sentence saying how a stored assessment (as JSON) and a fresh one differ, for the
    approver who decided on the old one."""
    said: list[str] = []
    old_verdict, new_verdict = old.get("verdict", ""), new.get("verdict", "")
    if old_verdict != new_verdict:
        label = VERDICT_LABELS.get(new_verdict, new_verdict)
        said.append(
            f"the verdict is now {label} (was {VERDICT_LABELS.get(old_verdict, old_verdict)})"
        )
    before = {n["name"]: n for n in old.get("nodes", [])}
    for node in new.get("nodes", []):
        was = before.get(node["name"])
        if was and was.get("config_before") != node.get("config_before"):
            said.append(
                f"{node['name']} is now on {node.get('config_before') or 'no config'} "
                f"(was {was.get('config_before') or 'no config'})"
            )
    old_pods = {(e["namespace"], e["pod"]) for e in old.get("evictions", [])}
    new_pods = {(e["namespace"], e["pod"]) for e in new.get("evictions", [])}
    if old_pods != new_pods:
        said.append(f"{_plural(len(new_pods), 'GPU pod')} would be evicted (was {len(old_pods)})")
    if old.get("proposed_queue_changes", []) != new.get("proposed_queue_changes", []):
        said.append("the queue quota changes it carries are different")
    elif old.get("queues", []) != new.get("queues", []) or old.get("capacity") != new.get(
        "capacity"
    ):
        said.append("the capacity or the queues' promises on its flavors changed")
    if not said:
        return "The fleet changed since you read the assessment."
    text = "; ".join(said)
    return f"The fleet changed since you read the assessment: {text}."
