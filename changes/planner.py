"""The MIG layout planner: which MIG config each node should take so that the fleet covers
the demand per resource (MIG profiles and whole GPUs). Pure: facts in, a plan out.

What it optimises, in this order (lexicographically), "no change" a candidate whenever it
keeps the rules below (a plan that does not beat it proposes nothing):

0. the running work left without capacity: what runs now stays servable (a plan never
   trades running work for waiting work; running work the pool's own layout does not
   intend, on a node drifted from it, is ordinary demand);
1. the demand left uncovered (weighted by the memory share of each resource, so one
   missing 3g.40gb counts as much as four 1g.10gb);
2. the pods evicted (a node whose config changes loses every GPU pod on it: MIG Manager
   fails on a GPU in use and evicts nothing itself);
3. the nodes touched;
4. the stranded capacity: what the plan offers of resources nobody in that pool asks for.

Rules it keeps: a node takes one of the configs the catalog (or an admin's custom config)
defines for its GPU model, on its healthy GPUs only; a node under another open request, a
node a MIG change just set (its change succeeded lately), a cordoned node and a node of
unknown model are left alone; a pool takes one layout per GPU
model unless it allows mixed layouts and all its nodes run the ``mixed`` MIG strategy; a
node on the ``single`` strategy takes only configs that offer one kind of device.

The exact model is a small integer program over classes of interchangeable nodes (same
pool, model, healthy GPUs, current config and offer, number of GPU pods), solved by HiGHS
with a time limit, one objective after another; without HiGHS, or when it finds nothing in
time, a greedy search answers instead and the plan says so. The plan reports the
optimality gap HiGHS proved (0 when optimal, None when unknown).
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpus.catalog import (
    CustomConfigs,
    gpu_models,
    promised_resources,
    standard_configs,
    valid_configs,
)

KEEP = ""  # a node's option: left as it is
WHOLE_GPU = "nvidia.com/gpu"


# ----------------------------------------------------------------------------- facts


@dataclass(frozen=True, slots=True)
class PlanNode:
    name: str
    pool: str
    model: str | None
    gpu_count: int
    config: str  # its nvidia.com/mig.config now
    offer: Mapping[str, int]  # what it offers now (observed allocatable)
    pods: tuple[str, ...] = ()  # its GPU pods, "namespace/name"
    used: Mapping[str, int] = field(default_factory=dict)  # what those pods hold
    unhealthy: tuple[int, ...] = ()  # GPU indexes that must not be counted
    cordoned: bool = False
    busy: int | None = None  # the open request that holds it
    strategy: str = "mixed"  # the device plugin's MIG strategy on the node
    settled: str = ""  # why a change that just succeeded leaves it alone ("" if none did)


@dataclass(frozen=True, slots=True)
class PlanPool:
    name: str
    mixed: bool = False  # the pool allows different layouts on its nodes
    reason: str = ""  # why it takes one layout (said when that leaves demand short)


@dataclass(frozen=True, slots=True)
class Demand:
    resource: str
    count: int
    pools: tuple[str, ...]  # the pools that may serve it
    source: str = ""  # what asks for it, for people
    running: bool = False  # work running now: served first (objective 0)


@dataclass
class Problem:
    nodes: Sequence[PlanNode]
    demand: Sequence[Demand]
    pools: Sequence[PlanPool] = ()
    custom_configs: CustomConfigs = field(default_factory=dict)
    notes: Sequence[str] = ()  # what the gathering left out, and why (said with the plan)


# ----------------------------------------------------------------------------- result


@dataclass(frozen=True, slots=True, order=True)
class Score:
    lost: int  # weighted running work left without capacity
    short: int  # weighted demand left uncovered
    evictions: int
    touched: int
    stranded: int  # weighted capacity of resources nobody in its pool asks for


@dataclass(frozen=True, slots=True)
class NodePlan:
    name: str
    pool: str
    config_before: str
    config_after: str
    before: Mapping[str, int]
    after: Mapping[str, int]
    evicts: tuple[str, ...]

    @property
    def changes(self) -> bool:
        return self.config_after != self.config_before or dict(self.before) != dict(self.after)


@dataclass(frozen=True, slots=True)
class Shortfall:
    resource: str
    count: int
    pools: tuple[str, ...]
    sentence: str
    sources: tuple[str, ...] = ()  # what asks for it (the sentence's "asked by")
    demand: int = 0  # the demand of its group (``count`` of it is short)


@dataclass(frozen=True, slots=True)
class Line:
    """Demand and capacity of one resource, before and after the plan."""

    resource: str
    demand: int
    before: int
    after: int


@dataclass
class Plan:
    nodes: list[NodePlan]
    score: Score
    shortfalls: list[Shortfall]
    lines: list[Line]
    notes: list[str]
    solver: str  # "highs" or "greedy"
    status: str  # "optimal", "time limit", "greedy"
    gap: float | None
    seconds: float

    @property
    def changed(self) -> list[NodePlan]:
        return [n for n in self.nodes if n.changes]

    def as_json(self) -> dict[str, Any]:
        return {
            "solver": self.solver,
            "status": self.status,
            "gap": self.gap,
            "seconds": round(self.seconds, 3),
            "score": {
                "lost": self.score.lost,
                "short": self.score.short,
                "evictions": self.score.evictions,
                "touched": self.score.touched,
                "stranded": self.score.stranded,
            },
            "lines": [vars_of(line) for line in self.lines],
            "nodes": [
                {
                    "name": n.name,
                    "pool": n.pool,
                    "config_before": n.config_before,
                    "config_after": n.config_after,
                    "before": dict(n.before),
                    "after": dict(n.after),
                    "evicts": list(n.evicts),
                }
                for n in self.changed
            ],
            "shortfalls": [vars_of(s) for s in self.shortfalls],
            "notes": list(self.notes),
        }


def vars_of(item: Any) -> dict[str, Any]:
    return {name: _plain(getattr(item, name)) for name in item.__slots__}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


# ----------------------------------------------------------------------------- weights


@functools.cache
def weight(resource: str) -> int:
    """A resource's memory share in eighths of a GPU (whole GPU 8, 3g.40gb 4, 1g.10gb 1)."""
    resource = resource.removesuffix(".shared")
    if resource == WHOLE_GPU or not resource.startswith("nvidia.com/mig-"):
        return 8
    name = resource.removeprefix("nvidia.com/mig-")
    shares = [
        8 * int(profile["memory_slices"]) / int(model["memory_slices_total"])
        for model in gpu_models().values()
        for profile in model.get("profiles", [])
        if profile["name"].replace("+", ".") == name
    ]
    return max(1, round(min(shares))) if shares else 8


# ----------------------------------------------------------------------------- classes

Offer = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class _Option:
    config: str  # the config the node ends on
    keep: bool
    offer: Offer
    stranded: int = 0  # eighths of its healthy GPUs that offer nothing its pool asks for


@dataclass
class _Class:
    """Interchangeable nodes: same pool, model, healthy GPUs, config, offer and pod count."""

    pool: str
    model: str | None
    nodes: list[PlanNode]
    options: list[_Option]
    evicts: int

    @property
    def size(self) -> int:
        return len(self.nodes)


@dataclass
class _Prepared:
    classes: list[_Class]
    fixed: dict[str, dict[str, int]]  # pool -> resource -> what left-alone nodes offer
    groups: list[tuple[str, tuple[str, ...], int]]  # (resource, pools, count) of demand
    single: dict[tuple[str, str | None], list[int]]  # (pool, model) -> classes, one layout
    single_reason: dict[str, str]
    wanted: dict[str, set[str]]  # pool -> resources its demand asks for
    fixed_nodes: dict[str, str]  # node -> why it is left alone
    demand_total: dict[str, int] = field(default_factory=dict)
    running: list[bool] = field(default_factory=list)  # per group: running work


def _healthy(node: PlanNode) -> int:
    return max(0, node.gpu_count - len(set(node.unhealthy)))


def _keep_offer(node: PlanNode, custom: CustomConfigs) -> Offer:
    """What the node offers if left alone: what it shows, without its unhealthy GPUs."""
    offer = {r: int(n) for r, n in node.offer.items() if int(n) > 0}
    if node.unhealthy and node.model:
        promised, _ = promised_resources(
            node.config, node=node.name, model=node.model, gpu_count=_healthy(node), custom=custom
        )
        if promised is not None:
            offer = {r: min(n, promised.get(r, 0)) for r, n in offer.items()}
        elif node.gpu_count:
            offer = {r: n * _healthy(node) // node.gpu_count for r, n in offer.items()}
    return tuple(sorted((r, n) for r, n in offer.items() if n > 0))


def _options(
    node: PlanNode, custom: CustomConfigs, wanted: set[str], cache: dict[Any, list[_Option]]
) -> list[_Option]:
    keep = _keep_offer(node, custom)
    healthy = _healthy(node)
    key = (node.model, healthy)
    if key not in cache:
        cache[key] = [
            _Option(name, False, tuple(sorted((r, n) for r, n in promised.items() if n > 0)))
            for name in valid_configs(
                node=node.name, model=node.model, gpu_count=healthy, custom=custom
            )
            for promised in [
                promised_resources(
                    name, node=node.name, model=node.model, gpu_count=healthy, custom=custom
                )[0]
            ]
            if promised is not None
        ]
    options = [_Option(node.config, True, keep, _stranded(keep, healthy, wanted))]
    for candidate in cache[key]:
        name, offer = candidate.config, candidate.offer
        if name == node.config and offer == keep:
            continue  # applying its own config again changes nothing
        if node.strategy != "mixed" and len(offer) > 1:
            continue  # the single strategy needs one kind of device per node
        options.append(_Option(name, False, offer, _stranded(offer, healthy, wanted)))
    return options


def _stranded(offer: Offer, healthy: int, wanted: set[str]) -> int:
    return max(0, 8 * healthy - sum(weight(r) * n for r, n in offer if r in wanted))


def _left_alone(node: PlanNode) -> str:
    if node.settled:
        return node.settled
    if node.busy is not None:
        return f"{node.name} is held by open request #{node.busy}."
    if node.cordoned:
        return f"{node.name} is cordoned."
    if node.model is None or node.model not in gpu_models():
        return (
            f"{node.name} keeps what it offers: its GPU model has no MIG profiles in the "
            "catalog (a GPU without MIG, or one the catalog does not know)."
        )
    if _healthy(node) == 0:
        return f"{node.name} has no healthy GPU."
    return ""


def prepare(problem: Problem, *, prune: bool = True) -> _Prepared:
    """Classes of interchangeable nodes, what left-alone nodes offer, and the demand
    (``prune``: without the options another option of the same nodes beats)."""
    custom = problem.custom_configs
    groups, running = _demand_groups(problem.demand)
    wanted: dict[str, set[str]] = defaultdict(set)
    for resource, group_pools, _ in groups:
        for pool in group_pools:
            wanted[pool].add(resource)
    cache: dict[Any, list[_Option]] = {}
    pools = {p.name: p for p in problem.pools}
    fixed: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    fixed_nodes: dict[str, str] = {}
    by_key: dict[tuple[Any, ...], _Class] = {}
    strategies: dict[str, set[str]] = defaultdict(set)
    for node in sorted(problem.nodes, key=lambda n: n.name):
        strategies[node.pool].add(node.strategy)
        why = _left_alone(node)
        if why:
            fixed_nodes[node.name] = why
            counted = node.used if node.cordoned else dict(_keep_offer(node, custom))
            for resource, count in counted.items():
                fixed[node.pool][resource] += int(count)
            continue
        key: tuple[Any, ...] = (node.pool, node.model, _healthy(node), node.config)
        key += (node.strategy, _keep_offer(node, custom), len(node.pods))
        if key not in by_key:
            options = _options(node, custom, wanted[node.pool], cache)
            by_key[key] = _Class(node.pool, node.model, [], options, len(node.pods))
        by_key[key].nodes.append(node)
    classes = list(by_key.values())
    single: dict[tuple[str, str | None], list[int]] = defaultdict(list)
    reasons: dict[str, str] = {}
    for index, cls in enumerate(classes):
        facts = pools.get(cls.pool, PlanPool(cls.pool, mixed=not cls.pool))
        if facts.mixed and strategies[cls.pool] <= {"mixed"}:
            continue
        single[(cls.pool, cls.model)].append(index)
        reasons[cls.pool] = (
            "its nodes do not all run the mixed MIG strategy"
            if facts.mixed
            else facts.reason or "the pool takes one layout"
        )
    prep = _Prepared(classes, fixed, groups, single, reasons, dict(wanted), fixed_nodes)
    prep.running = running
    for resource, _, count in groups:
        prep.demand_total[resource] = prep.demand_total.get(resource, 0) + count
    if prune:
        _prune(prep)
    return prep


def _demand_groups(
    demand: Sequence[Demand],
) -> tuple[list[tuple[str, tuple[str, ...], int]], list[bool]]:
    """The demand summed per (resource, pools, running), and which groups are running work."""
    counts: dict[tuple[str, tuple[str, ...], bool], int] = defaultdict(int)
    for item in demand:
        if item.count > 0 and item.pools:
            counts[(item.resource, tuple(sorted(set(item.pools))), item.running)] += item.count
    ordered = sorted(counts.items())
    return [(r, pools, n) for (r, pools, _), n in ordered], [run for (_, _, run), _ in ordered]


def _prune(prep: _Prepared) -> None:
    """Drop each option another one beats on the same nodes (offers at least as much of
    every resource the pool asks for, strands no more); among equals the first name stays.
    A one-layout pool drops a config only when it is beaten on all its classes."""
    grouped = {i for indexes in prep.single.values() for i in indexes}
    groups = [*prep.single.values()] + [[i] for i in range(len(prep.classes)) if i not in grouped]
    for indexes in groups:
        kept = {prep.classes[i].options[0].config for i in indexes}
        by_class = [{o.config: o for o in prep.classes[i].options[1:]} for i in indexes]
        names = sorted({c for options in by_class for c in options} - kept)
        wanted = [sorted(prep.wanted.get(prep.classes[i].pool, set())) for i in indexes]
        beaten = {
            c
            for c in names
            if any(_beats_everywhere(d, c, by_class, wanted) for d in names if d != c)
        }
        for i in indexes:
            cls = prep.classes[i]
            cls.options = [cls.options[0]] + [o for o in cls.options[1:] if o.config not in beaten]


def _beats_everywhere(
    d: str, c: str, by_class: list[dict[str, _Option]], wanted: list[list[str]]
) -> bool:
    strict = False
    for options, resources in zip(by_class, wanted, strict=True):
        if c not in options:
            continue
        if d not in options:
            return False
        a, b = dict(options[c].offer), dict(options[d].offer)
        if any(b.get(r, 0) < a.get(r, 0) for r in resources):
            return False
        if options[d].stranded > options[c].stranded:
            return False
        strict = strict or options[d].stranded < options[c].stranded
        strict = strict or any(b.get(r, 0) > a.get(r, 0) for r in resources)
    return strict or d < c


# ----------------------------------------------------------------------------- scoring

Counts = list[list[int]]  # per class, how many of its nodes take each option


def _capacity(prep: _Prepared, counts: Counts) -> dict[str, dict[str, int]]:
    cap: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pool, offered in prep.fixed.items():
        for resource, n in offered.items():
            cap[pool][resource] += n
    for cls, row in zip(prep.classes, counts, strict=True):
        for option, taken in zip(cls.options, row, strict=True):
            for resource, n in option.offer:
                cap[cls.pool][resource] += n * taken
    return cap


def _served(prep: _Prepared, cap: Mapping[str, Mapping[str, int]]) -> list[int]:
    """How much of each demand group the capacity serves at most (a max flow per resource)."""
    served = [0] * len(prep.groups)
    by_resource: dict[str, list[int]] = defaultdict(list)
    for index, (resource, _, _) in enumerate(prep.groups):
        by_resource[resource].append(index)
    for resource, indexes in by_resource.items():
        left = {p: cap.get(p, {}).get(resource, 0) for i in indexes for p in prep.groups[i][1]}
        first = {n for n, i in enumerate(indexes) if prep.running and prep.running[i]}
        groups = [(prep.groups[i][2], prep.groups[i][1]) for i in indexes]
        flows = _max_flow(groups, left, first)
        for i, flow in zip(indexes, flows, strict=True):
            served[i] = flow
    return served


def _max_flow(
    groups: list[tuple[int, tuple[str, ...]]], cap: dict[str, int], first: set[int] | None = None
) -> list[int]:
    """Bipartite max flow (groups -> pools) by augmenting paths; tiny graphs. The groups in
    ``first`` are served first, as far as they can be (an augmenting path never lowers
    what a group already gets), then the rest."""
    flow: dict[tuple[int, str], int] = defaultdict(int)
    served = [0] * len(groups)
    left = dict(cap)
    starts = first or None
    while True:
        path = _augmenting_path(groups, served, flow, left, starts)
        if path is None and starts is not None:
            starts = None
            continue
        if path is None:
            return served
        amount, steps = path
        start = steps[0][0]
        served[start] += amount
        for group, pool, sign in steps:
            flow[(group, pool)] += sign * amount
        left[steps[-1][1]] -= amount


def _augmenting_path(
    groups: list[tuple[int, tuple[str, ...]]],
    served: list[int],
    flow: Mapping[tuple[int, str], int],
    left: Mapping[str, int],
    starts: set[int] | None = None,
) -> tuple[int, list[tuple[int, str, int]]] | None:
    """A path source -> group -> pool (-> group back over a used edge -> pool)* -> sink,
    from one of ``starts`` (every group when None)."""
    seen_pools: set[str] = set()
    frontier: list[tuple[int, int, list[tuple[int, str, int]]]] = [
        (g, groups[g][0] - served[g], [])
        for g in range(len(groups))
        if groups[g][0] > served[g] and (starts is None or g in starts)
    ]
    seen_groups = {g for g, _, _ in frontier}
    while frontier:
        nxt: list[tuple[int, int, list[tuple[int, str, int]]]] = []
        for group, room, steps in frontier:
            for pool in groups[group][1]:
                if pool in seen_pools:
                    continue
                seen_pools.add(pool)
                path = [*steps, (group, pool, 1)]
                if left.get(pool, 0) > 0:
                    return min(room, left[pool]), path
                for other in range(len(groups)):
                    back = flow.get((other, pool), 0)
                    if back > 0 and other not in seen_groups:
                        seen_groups.add(other)
                        nxt.append((other, min(room, back), [*path, (other, pool, -1)]))
        frontier = nxt
    return None


def _score(prep: _Prepared, counts: Counts) -> Score:
    cap = _capacity(prep, counts)
    served = _served(prep, cap)
    short = sum(
        weight(resource) * (count - got)
        for (resource, _, count), got in zip(prep.groups, served, strict=True)
    )
    lost = sum(
        weight(resource) * (count - got)
        for (resource, _, count), got, running in zip(
            prep.groups, served, prep.running or [False] * len(served), strict=True
        )
        if running
    )
    touched = sum(cls.size - row[0] for cls, row in zip(prep.classes, counts, strict=True))
    evictions = sum(
        cls.evicts * (cls.size - row[0]) for cls, row in zip(prep.classes, counts, strict=True)
    )
    stranded = sum(
        option.stranded * taken
        for cls, row in zip(prep.classes, counts, strict=True)
        for option, taken in zip(cls.options, row, strict=True)
    )
    return Score(lost, short, evictions, touched, stranded)


def _consistent(prep: _Prepared, counts: Counts) -> bool:
    """Every one-layout pool has all its (movable) nodes of a model on one config."""
    return all(_one_config(prep, counts, indexes) for indexes in prep.single.values())


def _one_config(prep: _Prepared, counts: Counts, indexes: list[int]) -> bool:
    configs = {
        option.config
        for i in indexes
        for option, taken in zip(prep.classes[i].options, counts[i], strict=True)
        if taken
    }
    return len(configs) <= 1


def evaluate(
    problem: Problem, choice: Mapping[str, str], prepared: _Prepared | None = None
) -> Score | None:
    """The score of giving each node the config ``choice`` names (:data:`KEEP`, or a node
    left out: as it is); None when it breaks a rule (a config the node cannot take, a
    left-alone node changed, two layouts in a one-layout pool). Tests check the solver
    against it by brute force (``prepared``: ``prepare(problem, prune=False)``, reused)."""
    prep = prepared or prepare(problem, prune=False)
    counts: Counts = [[0] * len(cls.options) for cls in prep.classes]
    placed = {n.name for cls in prep.classes for n in cls.nodes}
    if any(choice.get(name, KEEP) != KEEP for name in prep.fixed_nodes):
        return None
    for index, cls in enumerate(prep.classes):
        for node in cls.nodes:
            wanted = choice.get(node.name, KEEP)
            for pos, option in enumerate(cls.options):
                if (option.keep and wanted == KEEP) or (
                    not option.keep and wanted == option.config
                ):
                    counts[index][pos] += 1
                    break
            else:
                return None
    if set(choice) - placed - set(prep.fixed_nodes) or not _consistent(prep, counts):
        return None
    return _score(prep, counts)


def choices(problem: Problem) -> dict[str, list[str]]:
    """Per node, what it may take (:data:`KEEP` first), for brute force."""
    prep = prepare(problem, prune=False)
    out = {name: [KEEP] for name in prep.fixed_nodes}
    for cls in prep.classes:
        names = [KEEP if o.keep else o.config for o in cls.options]
        for node in cls.nodes:
            out[node.name] = names
    return out


# ----------------------------------------------------------------------------- exact model


_SOLVERS = threading.local()


def _highs(highspy: Any) -> Any:
    """This thread's HiGHS instance, emptied (HiGHS prints its banner once, when made)."""
    solver = getattr(_SOLVERS, "highs", None)
    if solver is None:
        solver = _SOLVERS.highs = highspy.Highs()
        solver.setOptionValue("output_flag", False)
    solver.clearModel()
    solver.setOptionValue("mip_rel_gap", 0.01)
    return solver


class _Model:
    """The integer program over the classes: z[k][o] nodes of class k on option o, one
    binary per config of a one-layout pool, and the flow of each demand group to its pools.
    Built as arrays (a thousand nodes make a few thousand columns). Each z is a (column,
    factor) pair: in a one-layout pool the config's binary times the class's size stands
    for it wherever that config is one option of the class."""

    def __init__(self, prep: _Prepared, relax: frozenset[tuple[str, str | None]]):
        self.prep = prep
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.integer: list[int] = []
        self.rows: list[tuple[float, float, dict[int, float]]] = []
        self.z: list[list[tuple[int, float]]] = [[] for _ in prep.classes]
        grouped: set[int] = set()
        for key, indexes in prep.single.items():
            if key not in relax:
                self._one_layout(indexes)
                grouped.update(indexes)
        for index, cls in enumerate(prep.classes):
            if index not in grouped:
                self.z[index] = [(self._col(0, cls.size, True), 1.0) for _ in cls.options]
                self.rows.append((cls.size, cls.size, {c: 1.0 for c, _ in self.z[index]}))
        self.short_cost: dict[int, float] = {}
        self.lost_cost: dict[int, float] = {}
        self._flows()

    def _col(self, lower: float, upper: float, integer: bool) -> int:
        self.lower.append(lower)
        self.upper.append(upper)
        if integer:
            self.integer.append(len(self.lower) - 1)
        return len(self.lower) - 1

    def _one_layout(self, indexes: list[int]) -> None:
        configs = sorted({o.config for i in indexes for o in self.prep.classes[i].options})
        y = {c: self._col(0, 1, True) for c in configs}
        self.rows.append((1, 1, dict.fromkeys(y.values(), 1.0)))
        for i in indexes:
            cls = self.prep.classes[i]
            for config in configs:
                taking = [p for p, o in enumerate(cls.options) if o.config == config]
                if not taking:
                    self.upper[y[config]] = 0
            self.z[i] = [(y[o.config], float(cls.size)) for o in cls.options]
            for config in configs:
                taking = [p for p, o in enumerate(cls.options) if o.config == config]
                if len(taking) > 1:  # keep or apply again: the class splits between them
                    cols = {p: self._col(0, cls.size, True) for p in taking}
                    for p, col in cols.items():
                        self.z[i][p] = (col, 1.0)
                    self.rows.append(
                        (0, 0, {**dict.fromkeys(cols.values(), 1.0), y[config]: -cls.size})
                    )

    def _flows(self) -> None:
        prep = self.prep
        served_at: dict[tuple[str, str], list[int]] = defaultdict(list)
        running = prep.running or [False] * len(prep.groups)
        for (resource, pools, count), runs in zip(prep.groups, running, strict=True):
            flows = [self._col(0, count, False) for _ in pools]
            short = self._col(0, count, False)
            self.short_cost[short] = weight(resource)
            if runs:
                self.lost_cost[short] = weight(resource)
            self.rows.append((count, count, dict.fromkeys([*flows, short], 1.0)))
            for pool, flow in zip(pools, flows, strict=True):
                served_at[(pool, resource)].append(flow)
        offered: dict[tuple[str, str], dict[int, float]] = defaultdict(lambda: defaultdict(float))
        for cls, row in zip(prep.classes, self.z, strict=True):
            for option, (col, factor) in zip(cls.options, row, strict=True):
                for resource, n in option.offer:
                    if (cls.pool, resource) in served_at:
                        offered[(cls.pool, resource)][col] -= n * factor
        for key, flows in served_at.items():
            fixed = prep.fixed.get(key[0], {}).get(key[1], 0)
            self.rows.append((-math.inf, fixed, {**dict.fromkeys(flows, 1.0), **offered[key]}))

    def objectives(self) -> list[dict[int, float]]:
        """Costs of the four phases: running work left without capacity; shortfall;
        evictions, then nodes touched (each node off its present state costs both);
        stranded capacity."""
        nodes = sum(cls.size for cls in self.prep.classes)
        touch: dict[int, float] = defaultdict(float)
        strand: dict[int, float] = defaultdict(float)
        for cls, row in zip(self.prep.classes, self.z, strict=True):
            for option, (col, factor) in zip(cls.options, row, strict=True):
                if not option.keep:
                    touch[col] += factor * (cls.evicts * (nodes + 1) + 1)
                strand[col] += factor * option.stranded
        return [self.lost_cost, self.short_cost, touch, strand]

    def columns_for(self, counts: Counts) -> dict[int, float]:
        """The integer columns' values for ``counts`` (a start for the solver)."""
        values = dict.fromkeys(self.integer, 0.0)
        for row, taken in zip(self.z, counts, strict=True):
            for (col, factor), n in zip(row, taken, strict=True):
                values[col] = max(values[col], n / factor) if factor != 1 else float(n)
        return values

    def load(self, highs: Any, numpy: Any, highspy: Any) -> None:
        count = len(self.lower)
        highs.addVars(count, numpy.array(self.lower), numpy.array(self.upper))
        integer = numpy.array(self.integer, dtype=numpy.int32)
        kinds = numpy.full(len(integer), int(highspy.HighsVarType.kInteger), dtype=numpy.uint8)
        highs.changeColsIntegrality(len(integer), integer, kinds)
        for lower, upper, coefs in self.rows:
            _add_row(highs, numpy, lower, upper, coefs)


def _add_row(highs: Any, numpy: Any, lower: float, upper: float, coefs: dict[int, float]) -> None:
    highs.addRow(
        float(lower),
        float(upper),
        len(coefs),
        numpy.array(list(coefs), dtype=numpy.int32),
        numpy.array(list(coefs.values()), dtype=numpy.float64),
    )


def _solve_exact(
    prep: _Prepared, seconds: float, relax: frozenset[tuple[str, str | None]] = frozenset()
) -> tuple[Counts, float, bool] | None:
    """The lexicographic optimum (running work left without capacity, shortfall, then
    evictions and nodes touched, then stranded capacity) by HiGHS, each phase starting from
    the last one's answer: the counts, the worst gap proved, whether all phases were
    optimal. None without HiGHS or without a
    solution in time."""
    try:
        # lazy: an optional dependency; the greedy search answers without it
        import highspy
        import numpy
    except ImportError:
        return None
    deadline = time.monotonic() + seconds
    model = _Model(prep, relax)
    highs = _highs(highspy)
    model.load(highs, numpy, highspy)
    columns = numpy.arange(len(model.lower), dtype=numpy.int32)
    gap, optimal, values = 0.0, True, None
    start = model.columns_for(_start(prep))
    highs.setSolution(
        len(start),
        numpy.array(list(start), dtype=numpy.int32),
        numpy.array(list(start.values()), dtype=numpy.float64),
    )
    for costs, share in zip(model.objectives(), (0.4, 0.6, 0.6, 1.0), strict=True):
        vector = numpy.zeros(len(columns))
        for column, cost in costs.items():
            vector[column] = cost
        highs.changeColsCost(len(columns), columns, vector)
        if values is not None:
            highs.setSolution(len(columns), columns, values)
        highs.setOptionValue("time_limit", max(0.05, (deadline - time.monotonic()) * share))
        highs.run()
        info = highs.getInfo()
        if info.primal_solution_status != 2:  # no feasible solution found
            optimal = False
            break
        values = numpy.array(highs.getSolution().col_value)
        gap = max(gap, float(max(0.0, info.mip_gap)) if costs else 0.0)
        optimal = optimal and highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
        bound = float(info.objective_function_value) + 0.5
        _add_row(highs, numpy, -math.inf, bound, {c: v for c, v in costs.items()})
    if values is None:
        return None
    counts = [[round(float(values[col]) * factor) for col, factor in row] for row in model.z]
    return counts, gap, optimal


# ----------------------------------------------------------------------------- greedy


def _solve_greedy(prep: _Prepared, seconds: float) -> Counts:
    """Best single moves until none helps: a one-layout pool (per model) switched to one
    config, or one node of a class moved to another option."""
    deadline = time.monotonic() + seconds
    counts = _start(prep)
    best = _score(prep, counts)
    single = {i for indexes in prep.single.values() for i in indexes}
    while time.monotonic() < deadline:
        moves = [
            _switch(prep, counts, indexes, c)
            for indexes in prep.single.values()
            for c in sorted({o.config for i in indexes for o in prep.classes[i].options})
        ]
        for index, cls in enumerate(prep.classes):
            if index in single:
                continue
            for src, taken in enumerate(counts[index]):
                if not taken:
                    continue
                for dst in range(len(cls.options)):
                    if dst != src:
                        moved = [row[:] for row in counts]
                        moved[index][src] -= 1
                        moved[index][dst] += 1
                        moves.append(moved)
        scored = [(s, m) for m in moves if m is not None for s in [_score(prep, m)] if s < best]
        if not scored:
            break
        best, counts = min(scored, key=lambda item: item[0])
    return counts


def _start(prep: _Prepared) -> Counts:
    """Every node as it is, but each one-layout pool that has two layouts switched to the
    config that scores best: a first answer that keeps the rules."""
    counts: Counts = [[cls.size] + [0] * (len(cls.options) - 1) for cls in prep.classes]
    for indexes in prep.single.values():
        if not _one_config(prep, counts, indexes):
            configs = sorted({o.config for i in indexes for o in prep.classes[i].options})
            switched = [m for c in configs if (m := _switch(prep, counts, indexes, c))]
            counts = min(switched, key=lambda m: _score(prep, m))
    return counts


def _switch(prep: _Prepared, counts: Counts, indexes: list[int], config: str) -> Counts | None:
    moved = [row[:] for row in counts]
    for i in indexes:
        cls = prep.classes[i]
        keep = cls.options[0].config == config
        pos = (
            0
            if keep
            else next(
                (p for p, o in enumerate(cls.options) if not o.keep and o.config == config), None
            )
        )
        if pos is None:
            return None
        moved[i] = [0] * len(cls.options)
        moved[i][pos] = cls.size
    return moved


# ----------------------------------------------------------------------------- the plan


def plan(problem: Problem, *, time_limit: float = 5.0, exact: bool = True) -> Plan:
    """The plan for ``problem``: exact by HiGHS within ``time_limit`` seconds (all phases
    together), else greedy."""
    gpu_models(), standard_configs()  # the catalog, read once per process, is no planning
    started = time.monotonic()
    prep = prepare(problem)
    budget = 0.8 * (time_limit - (time.monotonic() - started))  # the rest: what is short
    answer = _solve_exact(prep, budget) if exact and prep.classes else None
    if answer is not None:
        counts, gap, optimal = answer
        solver, status, proved = "highs", "optimal" if optimal else "time limit", gap
    elif prep.classes and exact and _has_highs():
        counts, solver, status, proved = _solve_greedy(prep, budget), "greedy", "time limit", None
    else:
        counts = _solve_greedy(prep, time_limit) if prep.classes else []
        solver, status, proved = "greedy", "greedy", None
    score = _score(prep, counts)
    unchanged: Counts = [[cls.size] + [0] * (len(cls.options) - 1) for cls in prep.classes]
    if prep.classes and _consistent(prep, unchanged) and _score(prep, unchanged) <= score:
        # "No change" is a candidate: a plan that does not beat it proposes nothing (when
        # it keeps the rules: a one-layout pool on two layouts, the seed's incident, is put
        # back on one).
        counts, score = unchanged, _score(prep, unchanged)
    notes = sorted(prep.fixed_nodes.values()) + list(problem.notes)
    shortfalls = _shortfalls(problem, prep, counts)
    if shortfalls and solver == "highs":
        left = max(0.1 * time_limit, time_limit - (time.monotonic() - started))
        short_pools = {pool for shortfall in shortfalls for pool in shortfall.pools}
        notes += _one_layout_notes(prep, counts, score, left, short_pools)
    return Plan(
        nodes=_node_plans(problem, prep, counts),
        score=score,
        shortfalls=shortfalls,
        lines=_lines(prep, counts),
        notes=notes,
        solver=solver,
        status=status,
        gap=proved,
        seconds=time.monotonic() - started,
    )


def _has_highs() -> bool:
    try:
        # lazy: an optional dependency
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


def _node_plans(problem: Problem, prep: _Prepared, counts: Counts) -> list[NodePlan]:
    plans = []
    for cls, row in zip(prep.classes, counts, strict=True):
        options = [o for o, taken in zip(cls.options, row, strict=True) for _ in range(taken)]
        for node, option in zip(cls.nodes, options, strict=True):
            plans.append(
                NodePlan(
                    name=node.name,
                    pool=node.pool,
                    config_before=node.config,
                    config_after=option.config,
                    before=dict(cls.options[0].offer),
                    after=dict(option.offer),
                    evicts=() if option.keep else node.pods,
                )
            )
    for node in problem.nodes:
        if node.name in prep.fixed_nodes:
            offer = dict(_keep_offer(node, problem.custom_configs))
            plans.append(NodePlan(node.name, node.pool, node.config, node.config, offer, offer, ()))
    return sorted(plans, key=lambda p: p.name)


def _lines(prep: _Prepared, counts: Counts) -> list[Line]:
    before = _capacity(prep, [[cls.size] + [0] * (len(cls.options) - 1) for cls in prep.classes])
    after = _capacity(prep, counts)
    resources = set(prep.demand_total)
    resources |= {r for cap in (before, after) for offered in cap.values() for r in offered}

    def total(cap: Mapping[str, Mapping[str, int]], resource: str) -> int:
        return sum(offered.get(resource, 0) for offered in cap.values())

    return [
        Line(r, prep.demand_total.get(r, 0), total(before, r), total(after, r))
        for r in sorted(resources)
        if prep.demand_total.get(r, 0) or total(before, r) or total(after, r)
    ]


def _pools_text(pools: Sequence[str]) -> str:
    names = [p or "(no pool)" for p in pools]
    return ("pool " if len(names) == 1 else "pools ") + ", ".join(names)


def _shortfalls(problem: Problem, prep: _Prepared, counts: Counts) -> list[Shortfall]:
    served = _served(prep, _capacity(prep, counts))
    sources: dict[tuple[str, tuple[str, ...], bool], list[str]] = defaultdict(list)
    for item in problem.demand:
        if item.source:
            key = (item.resource, tuple(sorted(set(item.pools))), item.running)
            sources[key].append(item.source)
    out = []
    running = prep.running or [False] * len(prep.groups)
    for (resource, pools, count), got, runs in zip(prep.groups, served, running, strict=True):
        if got >= count:
            continue
        asking = tuple(dict.fromkeys(sources.get((resource, pools, runs), [])))
        sentence = shortfall_sentence(resource, count, got, pools, asking)
        out.append(Shortfall(resource, count - got, pools, sentence, asking, count))
    return out


def shortfall_sentence(
    resource: str, count: int, got: int, pools: Sequence[str], asking: Sequence[str]
) -> str:
    """What stays short, in words (``asking``: what asks for it, as the reader may see it)."""
    asked = "; ".join(asking)
    return f"{count - got} of {count} x {resource} cannot be served in {_pools_text(pools)}" + (
        f" (asked by: {asked})." if asked else "."
    )


def _one_layout_notes(
    prep: _Prepared, counts: Counts, score: Score, seconds: float, short_pools: set[str]
) -> list[str]:
    """For each one-layout pool where demand stays short: would two layouts in it cover
    more? Then say so (and why the plan does not propose them)."""
    notes = []
    for key, indexes in sorted(prep.single.items(), key=lambda item: str(item[0])):
        if key[0] not in short_pools:
            continue
        if seconds <= 0.1:
            break
        started = time.monotonic()
        relaxed = _solve_exact(prep, seconds / 2, relax=frozenset({key}))
        seconds -= time.monotonic() - started
        if relaxed is None or _score(prep, relaxed[0]).short >= score.short:
            continue
        layout: dict[str, int] = defaultdict(int)
        for i in indexes:
            for option, taken in zip(prep.classes[i].options, relaxed[0][i], strict=True):
                layout[option.config] += taken
        mix = " and ".join(f"{c} on {_plural(n, 'node')}" for c, n in sorted(layout.items()) if n)
        pool = key[0]
        notes.append(
            f"Pool {pool} would need two layouts to cover more of its demand ({mix}), but it "
            f"takes one layout: {prep.single_reason.get(pool, 'the pool takes one layout')}. "
            "Allow mixed layouts in the pool, or give that demand a pool of its own."
        )
    return notes


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
