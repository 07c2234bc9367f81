"""Quota what-if: a simulation of Kueue's admission over observed state (pure, no Django).

For a proposed ClusterQueue quota (nominal, borrowing or lending limit) it says which waiting
workloads Kueue would admit, in which order (what fits now first, then what waits for its
preemption victims to go) and on which flavor, which admitted workloads
that preempts under the queues' preemption policies (or fair sharing), and what each cohort
member borrows before and after. It follows Kueue's documentation (v0.19), not its code:

* ``concepts/cluster_queue.md`` — queueing strategies (StrictFIFO: the oldest of the highest
  priority blocks the queue when it does not fit; BestEffortFIFO: the next one is tried),
  flavors tried in order, "Flavors and borrowing semantics" (a request fits when it is within
  the queue's unused nominal quota, or within the cohort's unused quota and the queue's
  ``nominalQuota + borrowingLimit``), BorrowingLimit, LendingLimit (``nominal - lendingLimit``
  stays the queue's own), the preemption policies and FlavorFungibility.
* ``concepts/cohort.md`` — hierarchical cohorts (a Cohort's ``parentName``; its own
  ``nominalQuota`` is extra quota for its subtree, its ``borrowingLimit`` bounds what the
  subtree borrows from its parent's, its ``lendingLimit`` what it lends there): what a queue
  may take is what it keeps for itself plus what its cohort may take, walked up the tree,
  each level within its limits (``docs/reference/kueue-hierarchical-cohorts.md``).
* ``concepts/preemption.md`` — Classic Preemption (who may preempt, the candidates and their
  order, the four target heuristics, the final minimisation) and Fair Sharing (the share
  value, ``preemptionStrategies`` ``[LessThanOrEqualToFinalShare, LessThanInitialShare]``,
  the algorithm overview).

Quantities are ``Fraction`` in Kubernetes' base units (1 GPU, 1 byte, 1 core).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from portal.vocabulary.quantity import format_quantity

FlavorResource = tuple[str, str]
Amount = Fraction | int  # the simulation works in integers (see _integral)
Charges = tuple[tuple[FlavorResource, Amount], ...]

NEVER = "Never"
STRICT_FIFO = "StrictFIFO"
STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
_BELOW_ALL, _ABOVE_ALL = -(2**63), 2**63  # beyond any priority (an int32 in Kueue)
# The most workloads (admitted and waiting) in the cohorts a change reaches that the what-if
# simulates: past it, it says so instead of keeping a page waiting (bench/whatif.py).
MOST_WORKLOADS = 6_000

NOT_MODELLED = (
    "Topology-aware scheduling (TAS): where in a topology the pods would land.",
    "Admission checks (ProvisioningRequest, MultiKueue): quota is taken as admission.",
    "Partial admission: a workload is admitted whole or waits.",
    "Nodes: whether the admitted pods find a node (free GPUs, MIG layouts, taints).",
    "Several pod sets: a workload is charged as one pod set, on one flavor per resource.",
    "Hierarchical cohorts' preemption order: a borrowing queue anywhere in the tree is a "
    "candidate when its cohorts up to the preemptor's borrow too, but Kueue's preference for "
    "those in the subtree where the preemptor has the advantage, and its fair sharing's "
    "comparison level by level, are not modelled (shares are against the whole tree).",
    "Time: workloads finishing, preempted workloads queued again, back-off, pods-ready timeouts.",
    "Admission fair sharing (by LocalQueue usage) and the alpha concurrent admission.",
    "Namespace selectors and stopped LocalQueues: a workload counts in the queue its "
    "LocalQueue points at.",
    "DRA claims Kueue has not charged yet: a workload is charged what Kueue wrote in its "
    "status (a claim from a template, in the resource Kueue's deviceClassMappings name); one "
    "Kueue has not looked at counts what its containers ask.",
)


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Quota:
    """One (flavor, resource) of a queue: ``None`` limits are Kueue's "no limit"."""

    nominal: Amount
    borrowing_limit: Amount | None = None
    lending_limit: Amount | None = None


@dataclass(frozen=True)
class Group:
    """A resource group: the resources it covers and its flavors in order of preference."""

    resources: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True)
class Queue:
    """A ClusterQueue as Kueue admits with it."""

    name: str
    groups: tuple[Group, ...] = ()
    quotas: Mapping[FlavorResource, Quota] = field(default_factory=dict)
    cohort: str = ""
    strategy: str = "BestEffortFIFO"
    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER
    borrow_max_priority: int | None = None
    weight: Fraction = Fraction(1)
    when_can_borrow: str = "MayStopSearch"
    stopped: bool = False


@dataclass(frozen=True)
class Workload:
    """A Kueue workload: what it is charged, its priority and age, and where it is admitted
    (``flavors``: resource -> flavor). ``created`` and ``admitted_at`` are seconds."""

    key: str
    queue: str
    requests: Mapping[str, Amount]
    priority: int = 0
    created: float = 0.0
    admitted: bool = False
    flavors: Mapping[str, str] = field(default_factory=dict)
    admitted_at: float = 0.0
    held: str = ""  # why Kueue keeps it out of line whatever the quota ("": it does not)


@dataclass(frozen=True)
class Cohort:
    """A Cohort object: its parent (``""``: a root) and, per (flavor, resource), its own
    quota: ``nominal`` extra for its subtree, ``borrowing_limit`` on what the subtree borrows
    from its parent's, ``lending_limit`` on what it lends there (``None``: no limit)."""

    parent: str = ""
    quotas: Mapping[FlavorResource, Quota] = field(default_factory=dict)


@dataclass(frozen=True)
class World:
    """Queues, workloads, each cohort's own quota (``cohort_quotas``: nominal only, a cohort
    with no parent; ``cohorts``: the tree, with limits), and whether Kueue runs fair
    sharing."""

    queues: tuple[Queue, ...]
    workloads: tuple[Workload, ...]
    cohort_quotas: Mapping[str, Mapping[FlavorResource, Amount]] = field(default_factory=dict)
    fair_sharing: bool = False
    cohorts: Mapping[str, Cohort] = field(default_factory=dict)

    def tree(self) -> dict[str, Cohort]:
        """Every cohort named, by a queue or another cohort, with its parent and quota."""
        out = dict(self.cohorts)
        for name, own in self.cohort_quotas.items():
            known = out.get(name, Cohort())
            quotas = {fr: Quota(v) for fr, v in own.items() if fr not in known.quotas}
            out[name] = replace(known, quotas={**known.quotas, **quotas})
        for name in [q.cohort for q in self.queues] + [c.parent for c in list(out.values())]:
            if name and name not in out:
                out[name] = Cohort()  # a name alone: an implicit cohort with no quota
        return out

    def with_queue(self, queue: Queue) -> World:
        """The same world with ``queue`` in place of the one of its name."""
        return replace(
            self, queues=tuple(queue if q.name == queue.name else q for q in self.queues)
        )


# ----------------------------------------------------------------------------- outputs


@dataclass(frozen=True)
class Admission:
    workload: str
    queue: str
    flavors: Mapping[str, str]
    borrows: bool
    preempts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Preemption:
    """An admitted workload evicted for ``by``; ``reason`` is Kueue's ``Preempted`` reason,
    ``policy`` the setting that allows it."""

    workload: str
    queue: str
    by: str
    reason: str
    policy: str


@dataclass(frozen=True)
class Waiting:
    workload: str
    queue: str
    why: str


@dataclass(frozen=True)
class Borrowing:
    """What a cohort member borrows (above its nominal quota) and could still borrow."""

    queue: str
    cohort: str
    flavor: str
    resource: str
    borrowed_before: Fraction
    borrowed_after: Fraction
    may_borrow_before: Fraction
    may_borrow_after: Fraction


@dataclass(frozen=True)
class Outcome:
    admitted: tuple[Admission, ...]
    preempted: tuple[Preemption, ...]
    waiting: tuple[Waiting, ...]
    borrowing: tuple[Borrowing, ...]
    fair_sharing: bool
    scope: tuple[str, ...] = ()  # the cohorts (and queues in no cohort) simulated; () all
    gave_up: str = ""  # why nothing was simulated (too many workloads); "" when it was
    not_modelled: tuple[str, ...] = NOT_MODELLED


# ----------------------------------------------------------------------------- quota arithmetic


class _Quotas:
    """The quota arithmetic of one world whose quantities are integers (:func:`_integral`):
    what a queue may use, given everyone's usage. ``scale``: per resource, what one base
    unit counts as (1 unless a quantity of it is a fraction of a unit)."""

    def __init__(self, world: World, scale: Mapping[str, int] | None = None) -> None:
        self.queues = {q.name: q for q in world.queues}
        self.members: dict[str, list[Queue]] = defaultdict(list)
        for q in world.queues:
            if q.cohort:
                self.members[q.cohort].append(q)
        self.position = {q.name: i for i, q in enumerate(world.queues)}
        self.cohorts = world.tree()
        self.children: dict[str, list[str]] = defaultdict(list)
        for name, cohort in self.cohorts.items():
            if cohort.parent:
                self.children[cohort.parent].append(name)
        self.up = {name: self._path(name) for name in self.cohorts}
        self.paths = {q.name: self.up[q.cohort] for q in world.queues if q.cohort}
        self.fair = world.fair_sharing
        self.scale = scale or {}
        self._pools: dict[tuple[str, FlavorResource], Amount] = {}
        self._kept: dict[tuple[str, FlavorResource], Amount] = {}
        self._weights: dict[str, Fraction] = {}
        self._trees: dict[str, list[Queue]] = {}
        self._cohort_kept: dict[tuple[str, FlavorResource], Amount] = {}

    def _path(self, cohort: str) -> tuple[str, ...]:
        """The cohort and its ancestors up to the root (a cycle, which Kueue refuses to
        admit in, is cut where it closes)."""
        path: list[str] = []
        while cohort and cohort not in path:
            path.append(cohort)
            cohort = self.cohorts[cohort].parent if cohort in self.cohorts else ""
        return tuple(path)

    def root(self, cohort: str) -> str:
        return self.up[cohort][-1] if cohort else ""

    def tree_members(self, root: str) -> list[Queue]:
        """The queues of every cohort of the tree under ``root``, in the world's order."""
        known = self._trees.get(root)
        if known is None:
            known = self._trees[root] = [
                q for q in self.queues.values() if q.cohort and self.root(q.cohort) == root
            ]
        return known

    def reclaimable(self, other: str, preemptor: str, fr: FlavorResource, usage: _Usage) -> bool:
        """Whether a borrowing queue of cohort ``other`` lends back to a queue of cohort
        ``preemptor`` on ``fr``: every cohort between it and their lowest common ancestor
        takes more from its parent than its subtree holds (one cohort: nothing between)."""
        common = set(self.up[preemptor])
        for cohort in self.up[other]:
            if cohort in common:
                return True
            if usage.pooled.get((cohort, fr), 0) <= self.pool(cohort, fr):
                return False
        return True

    def quota(self, queue: str, fr: FlavorResource) -> Quota | None:
        return self.queues[queue].quotas.get(fr)

    def exact(self, fr: FlavorResource, value: Amount) -> Fraction:
        """An amount in the resource's base units again."""
        return Fraction(value, self.scale.get(fr[1], 1))

    def guaranteed(self, queue: str, fr: FlavorResource) -> Amount:
        """What the queue keeps for itself: ``nominal - lendingLimit`` (0 without a limit)."""
        known = self._kept.get((queue, fr))
        if known is None:
            quota = self.queues[queue].quotas.get(fr)
            known = 0
            if quota is not None and quota.lending_limit is not None:
                known = max(0, quota.nominal - quota.lending_limit)
            self._kept[(queue, fr)] = known
        return known

    def pool(self, cohort: str, fr: FlavorResource) -> Amount:
        """The cohort's subtree quota: what its members lend (each its ``lendingLimit``,
        else all its nominal quota), what its child cohorts lend likewise, plus its own
        nominal quota (the quotas do not change: kept once known)."""
        known = self._pools.get((cohort, fr))
        if known is not None:
            return known
        lent: Amount = 0
        for m in self.members[cohort]:
            quota = m.quotas.get(fr)
            if quota is not None:
                lent += quota.nominal - self.guaranteed(m.name, fr)
        for child in self.children[cohort]:
            if child in self.up[cohort]:
                continue  # a cycle
            lent += self.pool(child, fr) - self.kept_by(child, fr)
        own = self.cohorts[cohort].quotas.get(fr) if cohort in self.cohorts else None
        lent += own.nominal if own is not None else 0
        self._pools[(cohort, fr)] = lent
        return lent

    def kept_by(self, cohort: str, fr: FlavorResource) -> Amount:
        """What a cohort's subtree keeps from its parent: ``subtree - lendingLimit`` (kept
        once known)."""
        known = self._cohort_kept.get((cohort, fr))
        if known is None:
            own = self.cohorts[cohort].quotas.get(fr)
            known = 0
            if own is not None and own.lending_limit is not None and len(self.up[cohort]) > 1:
                known = max(0, self.pool(cohort, fr) - own.lending_limit)
            self._cohort_kept[(cohort, fr)] = known
        return known

    def _from_cohort(self, cohort: str, fr: FlavorResource, usage: _Usage) -> Amount:
        """What the cohort's subtree may still take of ``fr``: its own unused part, and what
        its parent may give it within its ``borrowingLimit``, up to the root (Kueue's
        ``available``; negative when more is in use than the tree holds)."""
        path = self.up[cohort]
        for at, node in enumerate(path):  # a level without limits passes its parent's on
            own = self.cohorts[node].quotas.get(fr)
            if at + 1 == len(path):
                return self.pool(node, fr) - usage.pooled.get((node, fr), 0)
            if own is not None and (own.borrowing_limit, own.lending_limit) != (None, None):
                break
        pool = self.pool(node, fr)
        used = usage.pooled.get((node, fr), 0)
        kept = self.kept_by(node, fr)
        above = self._from_cohort(path[at + 1], fr, usage)
        if own is not None and own.borrowing_limit is not None:
            above = min(above, pool - kept - max(0, used - kept) + own.borrowing_limit)
        return max(0, kept - used) + above

    def available(self, queue: str, fr: FlavorResource, usage: _Usage) -> Amount:
        """How much more of ``fr`` the queue may take now (its own unused part, what its
        cohort tree may give it, no more than ``nominal + borrowingLimit``)."""
        q = self.queues[queue]
        quota = q.quotas.get(fr)
        if quota is None:
            return 0
        used = usage[queue].get(fr, 0)
        if not q.cohort:
            return max(0, quota.nominal - used)
        own = max(0, self.guaranteed(queue, fr) - used)
        if len(self.up[q.cohort]) == 1:  # a root: what its tree holds, less what it uses
            free = own + self.pool(q.cohort, fr) - usage.pooled.get((q.cohort, fr), 0)
        else:
            free = own + self._from_cohort(q.cohort, fr, usage)
        if quota.borrowing_limit is not None:
            free = min(free, quota.nominal + quota.borrowing_limit - used)
        return max(0, free)

    def borrowed(self, queue: str, fr: FlavorResource, usage: _Usage) -> Amount:
        quota = self.quota(queue, fr)
        nominal = quota.nominal if quota else 0
        return max(0, usage[queue].get(fr, 0) - nominal)

    def may_borrow(self, queue: str, fr: FlavorResource, usage: _Usage) -> Amount:
        quota = self.quota(queue, fr)
        if quota is None or not self.queues[queue].cohort:
            return 0
        unused_nominal = max(0, quota.nominal - usage[queue].get(fr, 0))
        return max(0, self.available(queue, fr, usage) - unused_nominal)

    def is_borrowing(self, queue: str, frs: Iterable[FlavorResource], usage: _Usage) -> bool:
        return any(self.borrowed(queue, fr, usage) > 0 for fr in frs)

    def share(
        self, queue: str, usage: _Usage, change: Mapping[FlavorResource, Amount] | None = None
    ) -> float:
        """Kueue's share value (``weightedShare``): the largest, over resources, of what the
        queue borrows over what its cohort tree lends, divided by its weight, times 1000
        (``change``: added to the queue's usage first). Exact until the one division."""
        q = self.queues[queue]
        if not q.cohort:
            return 0.0
        over_most: Amount = 0
        of: Amount = 1
        used = usage[queue]
        root = self.root(q.cohort)
        for fr, quota in q.quotas.items():
            pool = self.pool(root, fr)
            if pool > 0:
                over = used.get(fr, 0) + (change.get(fr, 0) if change else 0) - quota.nominal
                if over > 0 and over * of > over_most * pool:
                    over_most, of = over, pool
        if over_most == 0:
            return 0.0
        if q.weight == 0:
            return float("inf")
        weight = self._weights.get(queue)
        if weight is None:
            weight = self._weights[queue] = Fraction(q.weight)
        return float(over_most * 1000 * weight.denominator / (of * weight.numerator))


class _Usage(defaultdict[str, dict[FlavorResource, Amount]]):
    """Usage per queue; ``pooled``: what each cohort's members use of its lendable pool (what
    each uses above what it keeps for itself), kept up to date as usage changes."""

    def __init__(self, quotas: _Quotas) -> None:
        super().__init__(dict)
        self.quotas = quotas
        self.pooled: dict[tuple[str, FlavorResource], Amount] = {}
        self.version = 0  # counts changes

    def add(self, queue: str, fr: FlavorResource, value: Amount) -> None:
        self.version += 1
        used = self[queue]
        before = used.get(fr, 0)
        after = used[fr] = before + value
        path = self.quotas.paths.get(queue)
        if not path:
            return
        kept = self.quotas.guaranteed(queue, fr)
        change = max(0, after - kept) - max(0, before - kept)
        pooled = self.pooled
        last = path[-1]
        for cohort in path:  # what each level takes of its parent's
            if not change:
                return
            key = (cohort, fr)
            before = pooled.get(key, 0)
            after = pooled[key] = before + change
            if cohort == last:
                return
            kept = self.quotas.kept_by(cohort, fr)
            if kept:
                change = max(0, after - kept) - max(0, before - kept)

    def clone(self) -> _Usage:
        out = _Usage(self.quotas)
        for queue, used in self.items():
            out[queue] = dict(used)
        out.pooled = dict(self.pooled)
        return out


def _integer(value: Amount, scale: int) -> int:
    return int(value * scale) if scale != 1 or not isinstance(value, int) else value


def _scales(world: World) -> dict[str, int]:
    """Per resource, the least multiple of its base unit every quantity of it is whole in."""
    scale: dict[str, int] = {}

    def see(resource: str, value: Amount | None) -> None:
        if isinstance(value, Fraction) and value.denominator != 1:
            scale[resource] = math.lcm(scale.get(resource, 1), value.denominator)

    quotas = [q.quotas for q in world.queues] + [c.quotas for c in world.tree().values()]
    for of in quotas:
        for (_, r), quota in of.items():
            for value in (quota.nominal, quota.borrowing_limit, quota.lending_limit):
                see(r, value)
    for w in world.workloads:
        for r, value in w.requests.items():
            see(r, value)
    return scale


def _integral(world: World) -> tuple[World, dict[str, int]]:
    """The same world with every quantity an integer (times its resource's scale): the
    arithmetic stays exact and takes a fraction of the time of ``Fraction``'s."""
    scale = _scales(world)

    def limit(value: Amount | None, r: str) -> int | None:
        return None if value is None else _integer(value, scale.get(r, 1))

    def whole(quotas: Mapping[FlavorResource, Quota]) -> dict[FlavorResource, Quota]:
        return {
            fr: Quota(
                _integer(quota.nominal, scale.get(fr[1], 1)),
                limit(quota.borrowing_limit, fr[1]),
                limit(quota.lending_limit, fr[1]),
            )
            for fr, quota in quotas.items()
        }

    queues = tuple(replace(q, quotas=whole(q.quotas)) for q in world.queues)
    cohorts = {
        name: replace(cohort, quotas=whole(cohort.quotas)) for name, cohort in world.tree().items()
    }
    workloads = tuple(
        replace(w, requests={r: _integer(v, scale.get(r, 1)) for r, v in w.requests.items()})
        for w in world.workloads
    )
    return World(queues, workloads, {}, world.fair_sharing, cohorts), scale


# ----------------------------------------------------------------------------- one workload


@dataclass
class _State:
    """Usage per queue, and the workloads that hold quota (observed or simulated) by queue,
    with the (flavor, resource) pairs each holds."""

    usage: _Usage
    by_queue: dict[str, dict[str, Workload]] = field(default_factory=lambda: defaultdict(dict))
    holds: dict[str, frozenset[FlavorResource]] = field(default_factory=dict)
    charges: dict[str, Charges] = field(default_factory=dict)  # what each is charged
    lenders: dict[tuple[str, FlavorResource], tuple[int, set[str]]] = field(default_factory=dict)
    shares: dict[str, tuple[int, float]] = field(default_factory=dict)

    def borrowing(self, quotas: _Quotas, root: str, fr: FlavorResource) -> set[str]:
        """The queues of the cohort tree under ``root`` that borrow ``fr`` now (known until
        usage changes)."""
        known = self.lenders.get((root, fr))
        if known is None or known[0] != self.version:
            members = quotas.tree_members(root)
            names = {m.name for m in members if quotas.borrowed(m.name, fr, self.usage) > 0}
            known = self.lenders[(root, fr)] = (self.version, names)
        return known[1]

    def share(self, quotas: _Quotas, queue: str) -> float:
        """The queue's share now (known until usage changes)."""
        known = self.shares.get(queue)
        if known is None or known[0] != self.version:
            known = self.shares[queue] = (self.version, quotas.share(queue, self.usage))
        return known[1]

    @property
    def version(self) -> int:
        return self.usage.version

    def admit(self, w: Workload) -> None:
        self.by_queue[w.queue][w.key] = w
        self.charges[w.key] = charges = tuple(_needs(w, w.flavors).items())
        self.holds[w.key] = frozenset(fr for fr, _ in charges)

    def evict(self, w: Workload) -> None:
        del self.by_queue[w.queue][w.key]
        del self.holds[w.key]
        del self.charges[w.key]


def _needs(w: Workload, assignment: Mapping[str, str]) -> dict[FlavorResource, Amount]:
    return {(assignment[r], r): v for r, v in w.requests.items() if v > 0 and r in assignment}


def _fits(
    quotas: _Quotas,
    queue: str,
    needs: Mapping[FlavorResource, Amount],
    usage: _Usage,
    *,
    borrowing: bool = True,
) -> bool:
    for fr, v in needs.items():
        quota = quotas.quota(queue, fr)
        if quota is None or v > quotas.available(queue, fr, usage):
            return False
        if not borrowing and usage[queue].get(fr, 0) + v > quota.nominal:
            return False
    return True


def _borrows(
    quotas: _Quotas, queue: str, needs: Mapping[FlavorResource, Amount], usage: _Usage
) -> bool:
    return any(
        usage[queue].get(fr, 0) + v > quotas.queues[queue].quotas[fr].nominal
        for fr, v in needs.items()
    )


def _groups_of(q: Queue, w: Workload) -> tuple[list[Group], list[str]]:
    """The resource groups the workload's requests fall in, and what no group covers."""
    wanted = [r for r, v in w.requests.items() if v > 0]
    groups = [g for g in q.groups if any(r in g.resources for r in wanted)]
    uncovered = [r for r in wanted if not any(r in g.resources for g in q.groups)]
    return groups, uncovered


def _choose_flavor(
    quotas: _Quotas, q: Queue, w: Workload, group: Group, usage: _Usage
) -> str | None:
    """The group's flavor Kueue takes without preemption: the first where it fits without
    borrowing; else, with ``whenCanBorrow: MayStopSearch``, the first where it fits by
    borrowing (with ``TryNextFlavor`` the later flavors are tried for a fit first)."""
    borrowing_choice = None
    for flavor in group.flavors:
        needs = _needs(w, {r: flavor for r in group.resources})
        if not _fits(quotas, q.name, needs, usage):
            continue
        if not _borrows(quotas, q.name, needs, usage):
            return flavor
        if q.when_can_borrow == "MayStopSearch":
            return flavor
        borrowing_choice = borrowing_choice or flavor
    return borrowing_choice


def _assign(
    quotas: _Quotas, q: Queue, w: Workload, usage: _Usage
) -> tuple[dict[str, str] | None, list[dict[str, str]]]:
    """A flavor for each requested resource without preemption (or ``None``), and the
    assignments to try preemption on, in flavor order."""
    groups, _ = _groups_of(q, w)
    chosen: dict[str, str] = {}
    open_groups = []
    for group in groups:
        flavor = _choose_flavor(quotas, q, w, group, usage)
        if flavor is None:
            open_groups.append(group)
        else:
            chosen.update({r: flavor for r in group.resources if r in w.requests})
    if not open_groups:
        return chosen, []
    tries = []
    for flavors in itertools.product(*(g.flavors for g in open_groups)):
        trial = dict(chosen)
        for group, flavor in zip(open_groups, flavors, strict=True):
            trial.update({r: flavor for r in group.resources if r in w.requests})
        tries.append(trial)
    return None, tries


# ----------------------------------------------------------------------------- preemption


@dataclass(frozen=True)
class _Candidate:
    workload: Workload
    reason: str
    policy: str
    charges: Charges  # what its workload is charged


def _give_back(usage: _Usage, c: _Candidate, sign: int = -1) -> None:
    """The candidate's usage taken off (``sign`` 1: put back)."""
    for fr, v in c.charges:
        usage.add(c.workload.queue, fr, sign * v)


def _copy(usage: _Usage) -> _Usage:
    return usage.clone()


def _charge(usage: _Usage, w: Workload, sign: int = 1) -> None:
    for fr, v in _needs(w, w.flavors).items():
        usage.add(w.queue, fr, sign * v)


def _frs(w: Workload) -> set[FlavorResource]:
    return {(f, r) for r, f in w.flavors.items() if w.requests.get(r, 0) > 0}


def _within_allows(policy: str, w: Workload, c: Workload) -> bool:
    if policy == "LowerPriority":
        return c.priority < w.priority
    if policy == "LowerOrNewerEqualPriority":
        return c.priority < w.priority or (c.priority == w.priority and c.created > w.created)
    return False


def _cohort_rule(q: Queue, w: Workload, *, borrows: bool, fair: bool) -> tuple[str, str, int]:
    """Which workloads of another (borrowing) queue of the cohort ``w`` may preempt, as
    Kueue's reason, the policy that allows it, and the priority they must be below (a
    rule that takes none: below the lowest priority there is): ``reclaimWithinCohort``
    when the preemptor stays within its nominal quota (and under fair sharing),
    ``borrowWithinCohort`` when it borrows."""
    reclaim = q.reclaim_within_cohort
    below = {"Any": _ABOVE_ALL, "LowerPriority": w.priority}.get(reclaim, _BELOW_ALL)
    if fair:
        return "InCohortFairSharing", f"fair sharing (reclaimWithinCohort: {reclaim})", below
    if not borrows:
        return "InCohortReclamation", f"reclaimWithinCohort: {reclaim}", below
    threshold = q.borrow_max_priority
    if q.borrow_within_cohort != "LowerPriority":
        return "", "", _BELOW_ALL
    below = w.priority if threshold is None else min(w.priority, threshold + 1)
    limit = f", maxPriorityThreshold {threshold}" if threshold is not None else ""
    return "InCohortReclaimWhileBorrowing", f"borrowWithinCohort: LowerPriority{limit}", below


def _least_share(
    quotas: _Quotas,
    q: Queue,
    needs: Mapping[FlavorResource, Amount],
    own: list[_Candidate],
    usage: _Usage,
) -> float:
    """The lowest share the preemptor can have once admitted (every candidate of its own
    queue gone): under fair sharing, a queue whose share is below it now gives it nothing,
    by either strategy (a queue's share only falls as it loses workloads)."""
    change = dict(needs)
    for c in own:
        for fr, v in c.charges:
            change[fr] = change.get(fr, 0) - v
    return quotas.share(q.name, usage, change)


def _candidates(
    quotas: _Quotas, q: Queue, w: Workload, needs: Mapping[FlavorResource, Amount], st: _State
) -> list[_Candidate]:
    """Kueue's preemption candidates for ``w``, in its order: workloads of borrowing queues
    first, then the lowest priority, then the most recently admitted."""
    frs = set(needs)
    borrows = _borrows(quotas, q.name, needs, st.usage)
    found = []
    for c in st.by_queue[q.name].values():
        if frs & st.holds[c.key] and _within_allows(q.within_cluster_queue, w, c):
            policy = f"withinClusterQueue: {q.within_cluster_queue}"
            found.append(_Candidate(c, "InClusterQueue", policy, st.charges[c.key]))
    reason, policy, below = _cohort_rule(q, w, borrows=borrows, fair=quotas.fair)
    least = _least_share(quotas, q, needs, found, st.usage) if quotas.fair else 0.0
    # Only a queue that borrows on something the preemptor needs gives anything back.
    root = quotas.root(q.cohort)
    borrowing = [st.borrowing(quotas, root, fr) for fr in frs] if q.cohort else []
    others = set().union(*borrowing) - {q.name} if below > _BELOW_ALL else set()
    for other in sorted(others, key=quotas.position.__getitem__):  # the cohort's order
        cohort = quotas.queues[other].cohort
        lent = {
            fr
            for fr, names in zip(frs, borrowing, strict=True)
            if other in names
            and (cohort == q.cohort or quotas.reclaimable(cohort, q.cohort, fr, st.usage))
        }
        if quotas.fair and st.share(quotas, other) < least:
            continue
        for c in st.by_queue[other].values():
            if c.priority < below and lent & st.holds[c.key]:
                found.append(_Candidate(c, reason, policy, st.charges[c.key]))
    found.sort(
        key=lambda c: (c.workload.queue == q.name, c.workload.priority, -c.workload.admitted_at)
    )
    return found


@dataclass(frozen=True)
class _Ask:
    """A preemptor: its queue, what it needs on which (flavor, resource), and the quota
    arithmetic of the world it asks in."""

    quotas: _Quotas
    q: Queue
    needs: Mapping[FlavorResource, Amount]

    def fits(self, usage: _Usage, *, borrowing: bool = True) -> bool:
        return _fits(self.quotas, self.q.name, self.needs, usage, borrowing=borrowing)


def _minimise(
    ask: _Ask, usage: _Usage, targets: list[_Candidate], *, borrowing: bool
) -> list[_Candidate]:
    """Kueue's last step: in reverse order, give back each target the preemptor still fits
    without."""
    kept = list(targets)
    for target in reversed(targets):
        _give_back(usage, target, 1)
        if ask.fits(usage, borrowing=borrowing):
            kept.remove(target)
        else:
            _give_back(usage, target)
    return kept


def _greedy(
    ask: _Ask, st: _State, candidates: list[_Candidate], *, borrowing: bool
) -> list[_Candidate] | None:
    usage = _copy(st.usage)
    for c in candidates:  # less use only helps: if all of them do not make room, none do
        _give_back(usage, c)
    if not ask.fits(usage, borrowing=borrowing):
        return None
    usage = _copy(st.usage)
    targets: list[_Candidate] = []
    for c in candidates:
        if c.workload.queue != ask.q.name and not ask.quotas.is_borrowing(
            c.workload.queue, set(ask.needs) & _frs(c.workload), usage
        ):
            continue  # its queue gave back what it borrowed already
        _give_back(usage, c)
        targets.append(c)
        if ask.fits(usage, borrowing=borrowing):
            return _minimise(ask, usage, targets, borrowing=borrowing)
    return None


def _classic_targets(
    ask: _Ask, st: _State, candidates: list[_Candidate]
) -> list[_Candidate] | None:
    """Classic Preemption's heuristics, in the documented order."""
    same = [c for c in candidates if c.workload.queue == ask.q.name]
    if len(same) == len(candidates):
        return _greedy(ask, st, candidates, borrowing=True)
    if ask.q.borrow_within_cohort != NEVER:
        found = _greedy(ask, st, candidates, borrowing=True)
        if found is not None:
            return found
    if not _borrows(ask.quotas, ask.q.name, ask.needs, st.usage):
        found = _greedy(ask, st, candidates, borrowing=False)
        if found is not None:
            return found
    return _greedy(ask, st, same, borrowing=True)


def _fair_targets(ask: _Ask, st: _State, candidates: list[_Candidate]) -> list[_Candidate] | None:
    """Fair Sharing's algorithm: per strategy, take from the queue with the highest share
    while the strategy allows, until the preemptor fits; then minimise."""
    usage = _copy(st.usage)
    targets: list[_Candidate] = []
    left: dict[str, list[_Candidate]] = {}  # by queue, in the candidates' order
    for c in candidates:
        left.setdefault(c.workload.queue, []).append(c)
    # A queue's share moves only with its own usage: known until a target is taken from it.
    shares = {name: st.share(ask.quotas, name) for name in left}
    mine = ask.quotas.share(ask.q.name, usage, ask.needs)  # the preemptor's, once admitted
    for strategy in STRATEGIES:
        tried: set[str] = set()
        while not ask.fits(usage):
            queues = sorted(name for name, mine in left.items() if mine and name not in tried)
            if not queues:
                break
            y = max(queues, key=shares.__getitem__)
            taken = _fair_pick(ask, usage, left[y], strategy, mine, shares[y])
            if taken is None:
                tried.add(y)
                continue
            _give_back(usage, taken)
            targets.append(taken)
            left[y].remove(taken)
            shares[y] = ask.quotas.share(y, usage)
            if y == ask.q.name:
                mine = ask.quotas.share(y, usage, ask.needs)
    if not ask.fits(usage):
        return None
    return _minimise(ask, usage, targets, borrowing=True)


def _fair_pick(
    ask: _Ask,
    usage: _Usage,
    in_queue: list[_Candidate],
    strategy: str,
    mine: float,
    theirs: float,
) -> _Candidate | None:
    """The first workload of the queue the strategy lets the preemptor take (its own
    queue's candidates always); ``mine``: the preemptor's share once admitted, ``theirs``:
    the queue's share now."""
    if not in_queue:
        return None
    if in_queue[0].workload.queue == ask.q.name:
        return in_queue[0]
    if strategy == "LessThanInitialShare":  # the target queue's share now, whoever goes
        return in_queue[0] if mine < theirs else None
    final: dict[Charges, float] = {}  # by what it holds
    for c in in_queue:
        share = final.get(c.charges)
        if share is None:
            without = {fr: -v for fr, v in c.charges}
            share = final[c.charges] = ask.quotas.share(c.workload.queue, usage, without)
        if mine <= share:
            return c
    return None


def _preemption(
    quotas: _Quotas, q: Queue, w: Workload, tries: list[dict[str, str]], st: _State
) -> tuple[dict[str, str], list[_Candidate]] | None:
    """The first assignment (in flavor order) on which preemption makes room, with its
    targets. Classic Preemption: only a workload within its nominal quota, or a queue with
    ``borrowWithinCohort``, preempts."""
    for assignment in tries:
        needs = _needs(w, assignment)
        if any(quotas.quota(q.name, fr) is None for fr in needs):
            continue
        nominal = quotas.queues[q.name].quotas
        if (
            not quotas.fair
            and q.borrow_within_cohort == NEVER
            and any(v > nominal[fr].nominal for fr, v in needs.items())
        ):
            continue
        candidates = _candidates(quotas, q, w, needs, st)
        if not candidates:
            continue
        pick = _fair_targets if quotas.fair else _classic_targets
        targets = pick(_Ask(quotas, q, needs), st, candidates)
        if targets:
            return assignment, targets
    return None


# ----------------------------------------------------------------------------- admission


def _amount(value: Fraction) -> str:
    return format_quantity(value) if value.denominator == 1 else str(float(value))


def _why_not(quotas: _Quotas, q: Queue, w: Workload, usage: _Usage) -> str:
    groups, uncovered = _groups_of(q, w)
    if uncovered:
        return f"{', '.join(sorted(uncovered))} is not in ClusterQueue {q.name}'s quota"
    short = []
    for group in groups:
        for flavor in group.flavors:
            for r in group.resources:
                v = w.requests.get(r, 0)
                free = quotas.available(q.name, (flavor, r), usage)
                if v > free:
                    need, left = quotas.exact((flavor, r), v), quotas.exact((flavor, r), free)
                    short.append(f"needs {_amount(need)} {r} on {flavor}, {_amount(left)} free")
    reason = "; ".join(short) if short else "no flavor fits all its resources"
    return f"Does not fit, and no preemption its queue allows makes room: {reason}."


def _order(
    quotas: _Quotas, heads: list[tuple[Queue, Workload]], usage: _Usage
) -> list[tuple[Queue, Workload]]:
    """The heads of the queues in the order Kueue takes them in one cycle: those within
    nominal quota before those that borrow, then by priority and age (under fair sharing:
    the queue with the lowest share after admission first)."""

    def key(entry: tuple[Queue, Workload]) -> tuple[float, int, float, str]:
        q, w = entry
        chosen, _ = _assign(quotas, q, w, usage)
        needs = _needs(w, chosen or {})
        if quotas.fair:
            first = quotas.share(q.name, usage, needs)
        else:
            first = float(chosen is not None and _borrows(quotas, q.name, needs, usage))
        return first, -w.priority, w.created, w.key

    return sorted(heads, key=key)


@dataclass
class _Run:
    admissions: list[Admission] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)


def _admit_one(quotas: _Quotas, q: Queue, w: Workload, st: _State, run: _Run) -> bool:
    """Admit ``w`` if it fits, or if preemption makes room (the victims are evicted)."""
    if _groups_of(q, w)[1]:
        return False
    chosen, tries = _assign(quotas, q, w, st.usage)
    victims: list[_Candidate] = []
    if chosen is None:
        found = _preemption(quotas, q, w, tries, st)
        if found is None:
            return False
        chosen, victims = found
    for v in victims:
        _give_back(st.usage, v)
        st.evict(v.workload)
        run.admissions = [a for a in run.admissions if a.workload != v.workload.key]
        run.preemptions.append(
            Preemption(v.workload.key, v.workload.queue, w.key, v.reason, v.policy)
        )
    needs = _needs(w, chosen)
    borrows = _borrows(quotas, q.name, needs, st.usage)
    placed = replace(w, admitted=True, flavors=chosen, admitted_at=float("inf"))
    st.admit(placed)
    _charge(st.usage, placed)
    run.admissions.append(
        Admission(w.key, q.name, dict(chosen), borrows, tuple(v.workload.key for v in victims))
    )
    return True


def _start(world: World, quotas: _Quotas, run: _Run) -> tuple[_State, dict[str, list[Workload]]]:
    st = _State(_Usage(quotas))
    pending: dict[str, list[Workload]] = defaultdict(list)
    for w in world.workloads:
        if w.queue not in quotas.queues:
            if not w.admitted:
                run.waiting.append(Waiting(w.key, w.queue, "Its LocalQueue has no ClusterQueue."))
        elif w.admitted:
            st.admit(w)
            _charge(st.usage, w)
        elif quotas.queues[w.queue].stopped:
            run.waiting.append(Waiting(w.key, w.queue, "Its ClusterQueue is stopped."))
        elif w.held:
            run.waiting.append(Waiting(w.key, w.queue, w.held))
        else:
            pending[w.queue].append(w)
    for waiting in pending.values():
        waiting.sort(key=lambda w: (-w.priority, w.created, w.key))
    return st, pending


def _dominated(w: Workload, failed: list[Workload]) -> bool:
    """A workload of the same queue that failed since the last admission, with at least
    its priority and at most its requests: ``w`` cannot fit either (it is no more eligible
    to preempt, and has no more candidates)."""
    return any(
        f.priority >= w.priority and all(w.requests.get(r, 0) >= v for r, v in f.requests.items())
        for f in failed
    )


def simulate(given: World) -> tuple[_Run, _Usage, _Quotas]:
    """Kueue's admission cycles over ``world`` until nothing more is admitted: each cycle
    takes the head of every queue (priority, then age); a head that does not fit blocks its
    queue under StrictFIFO and steps aside under BestEffortFIFO. Also the usage after, and
    the quota arithmetic it is in."""
    world, scale = _integral(given)
    quotas = _Quotas(world, scale)
    run = _Run()
    st, pending = _start(world, quotas, run)
    failed: dict[str, list[Workload]] = defaultdict(list)  # since the last admission
    while True:
        heads = [(q, pending[q.name][0]) for q in world.queues if pending[q.name]]
        if not heads:
            break
        for q, w in _order(quotas, heads, st.usage):
            pending[q.name].pop(0)
            if not _dominated(w, failed[q.name]) and _admit_one(quotas, q, w, st, run):
                failed.clear()
                continue
            failed[q.name].append(w)
            run.waiting.append(Waiting(w.key, q.name, _why_not(quotas, q, w, st.usage)))
            if q.strategy == STRICT_FIFO:
                for behind in pending.pop(q.name, []):
                    why = f"Behind {w.key}: StrictFIFO admits in order and it does not fit."
                    run.waiting.append(Waiting(behind.key, q.name, why))
    return run, st.usage, quotas


def _observed_usage(world: World, quotas: _Quotas) -> _Usage:
    usage = _Usage(quotas)
    for w in world.workloads:
        if w.admitted and w.queue in quotas.queues:
            _charge(usage, w)
    return usage


def _borrowing(current: World, after: _Usage, new_q: _Quotas) -> tuple[Borrowing, ...]:
    """Per cohort member and (flavor, resource) where it changes: borrowed and still
    borrowable, now (the current quotas, observed usage) and after (the proposed quotas,
    simulated usage, in ``new_q``'s arithmetic)."""
    integral, scale = _integral(current)
    now_q = _Quotas(integral, scale)
    before = _observed_usage(integral, now_q)
    rows = []
    for q in new_q.queues.values():
        if not q.cohort:
            continue
        old = now_q.queues.get(q.name)
        for fr in sorted({*q.quotas, *(old.quotas if old else {})}):
            row = Borrowing(
                q.name,
                q.cohort,
                *fr,
                now_q.exact(fr, now_q.borrowed(q.name, fr, before) if old else 0),
                new_q.exact(fr, new_q.borrowed(q.name, fr, after)),
                now_q.exact(fr, now_q.may_borrow(q.name, fr, before) if old else 0),
                new_q.exact(fr, new_q.may_borrow(q.name, fr, after)),
            )
            if (row.borrowed_before, row.may_borrow_before) != (
                row.borrowed_after,
                row.may_borrow_after,
            ):
                rows.append(row)
    return tuple(sorted(rows, key=lambda r: (r.cohort, r.queue, r.flavor, r.resource)))


def _in_kueues_order(admissions: list[Admission]) -> tuple[Admission, ...]:
    """The order Kueue admits in: a workload that preempts is admitted only once its
    victims are gone (their pods end first), so what fits now goes before it (a real Kueue
    0.19 admitted a lower-priority workload of another queue while the preemptor waited)."""
    return tuple([a for a in admissions if not a.preempts] + [a for a in admissions if a.preempts])


def _roots(world: World) -> dict[str, str]:
    """Each cohort's tree root (a cycle: where it closes)."""
    tree = world.tree()
    out = {}
    for name in tree:
        path = [name]
        while tree[path[-1]].parent and tree[path[-1]].parent not in path:
            path.append(tree[path[-1]].parent)
        out[name] = path[-1]
    return out


def _scope(current: World, proposed: World) -> tuple[set[str], tuple[str, ...]] | None:
    """The queues whose workloads can fare differently between the two worlds, and the
    cohorts (or queues in no cohort) they are in: the changed queues, and the queues of
    their cohort trees that share a (flavor, resource) with them, directly or through
    another such queue (queues of different trees, or of one tree on different flavors,
    share no quota). ``None``: nothing differs but the workloads, or fair sharing was
    switched: every queue."""
    if current.fair_sharing != proposed.fair_sharing:
        return None
    worlds = [(w, {q.name: q for q in w.queues}, _roots(w), w.tree()) for w in (current, proposed)]
    (_, before, _, trees_before), (_, after, _, trees_after) = worlds
    changed = {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
    cohorts = trees_before.keys() | trees_after.keys()
    moved = {c for c in cohorts if trees_before.get(c) != trees_after.get(c)}
    if not changed and not moved:
        return None
    roots: set[str] = set()
    frs: set[FlavorResource] = set()
    for _, queues, root_of, tree in worlds:
        for name in changed & queues.keys():
            frs.update(queues[name].quotas)
            roots.add(root_of.get(queues[name].cohort, ""))
        for cohort in moved & tree.keys():
            frs.update(tree[cohort].quotas)
            roots.add(root_of[cohort])
    shared = [
        q
        for _, queues, root_of, _ in worlds
        for q in queues.values()
        if q.cohort and root_of[q.cohort] in roots
    ]
    reached = set(changed)
    grown = True
    while grown:  # what shares a (flavor, resource) with what is reached is reached
        grown = False
        for q in shared:
            if q.name not in reached and frs.intersection(q.quotas):
                reached.add(q.name)
                frs.update(q.quotas)
                grown = True
    where = {q.cohort or n for _, queues, _, _ in worlds for n, q in queues.items() if n in reached}
    return reached, tuple(sorted(where))


def _within(world: World, names: set[str]) -> World:
    """The queues named, with their workloads."""
    queues = tuple(q for q in world.queues if q.name in names)
    return replace(
        world, queues=queues, workloads=tuple(w for w in world.workloads if w.queue in names)
    )


def what_if(current: World, proposed: World, *, most: int | None = None) -> Outcome:
    """What Kueue would do with ``proposed`` (the current world with a quota changed):
    admissions in order, preemptions, what still waits and why, and borrowing before/after,
    in the cohorts the change reaches (every queue when nothing changed). More than ``most``
    (default ``MOST_WORKLOADS``) workloads there: nothing is simulated, ``gave_up`` says why."""
    most = MOST_WORKLOADS if most is None else most
    scope = _scope(current, proposed)
    reach: tuple[str, ...] = ()
    if scope is not None:
        current, proposed = _within(current, scope[0]), _within(proposed, scope[0])
        reach = scope[1]
    if len(proposed.workloads) > most:
        where = ", ".join(reach) or "the cluster"
        why = (
            f"{len(proposed.workloads):,} workloads are in {where}, more than the {most:,} "
            "the simulation takes on while a page waits."
        )
        return Outcome((), (), (), (), proposed.fair_sharing, scope=reach, gave_up=why)
    run, after, quotas = simulate(proposed)
    return Outcome(
        admitted=_in_kueues_order(run.admissions),
        preempted=tuple(run.preemptions),
        waiting=tuple(run.waiting),
        borrowing=_borrowing(current, after, quotas),
        fair_sharing=proposed.fair_sharing,
        scope=reach,
    )


# ----------------------------------------------------------------------------- namespace quota


@dataclass(frozen=True)
class QuotaFit:
    """A waiting workload of the namespace: whether its pods fit the ResourceQuota beside
    what is in use and the workloads before it, with the quota now and as proposed."""

    workload: str
    amount: Fraction
    fits_before: bool
    fits_after: bool


@dataclass(frozen=True)
class Refusal:
    """A controller whose pods the ResourceQuota refuses now (a FailedCreate event): ``what``
    says who (``Job team-a/eval-sweep``), ``requested`` what its next pod asks per quota
    item."""

    namespace: str
    what: str
    requested: Mapping[str, Fraction]


def namespace_quota_fit(
    workloads: Iterable[Workload],
    *,
    namespace: str,
    item: str,
    resource: str,
    used: Fraction,
    before: Fraction | None,
    after: Fraction | None,
    refused: Iterable[Refusal] = (),
) -> tuple[QuotaFit, ...]:
    """A ResourceQuota is checked when pods are created, after Kueue admitted their workload
    (Kueue does not look at it). First the pods the quota refuses now (their controllers
    retry), then the namespace's waiting workloads in Kueue's order (priority, then age),
    each counted only where it fits (refused pods use nothing). ``item`` is the quota item
    (``requests.nvidia.com/gpu``), ``resource`` what workloads request (``nvidia.com/gpu``);
    ``None``: no quota on it."""
    asks = [
        (f"{r.what} (its next pod)", Fraction(r.requested[item]))
        for r in refused
        if r.namespace == namespace and r.requested.get(item, 0) > 0
    ]
    mine = sorted(
        (
            w
            for w in workloads
            if w.key.startswith(f"{namespace}/")
            and not w.admitted
            and w.requests.get(resource, 0) > 0
        ),
        key=lambda w: (-w.priority, w.created, w.key),
    )
    asks += [(w.key, Fraction(w.requests[resource])) for w in mine]
    rows = []
    total_before = total_after = used
    for who, amount in asks:
        fits_before = before is None or total_before + amount <= before
        fits_after = after is None or total_after + amount <= after
        total_before += amount if fits_before else 0
        total_after += amount if fits_after else 0
        rows.append(QuotaFit(who, amount, fits_before, fits_after))
    return tuple(rows)
