"""How a cohort shares its quota, from the queues' spec and what Kueue reports (pure: no
Django): each ClusterQueue's quota rows with what it lends, each cohort's totals over its
whole subtree, fair-sharing weights and Kueue's ``status.fairSharing.weightedShare``, and
the cohorts as a tree when they nest.

Kueue's terms, as the Queues page explains them:

* *nominal*: the quota a queue (or a cohort, for its subtree) owns;
* *in use*: what admitted workloads hold (``flavorsUsage[].resources[].total``);
* *borrowed*: the part of in use above the queue's own nominal quota, taken from the
  cohort (``borrowed``);
* *lent*: what the queue's unused nominal quota gives its cohort to borrow now: its unused
  nominal quota, at most its ``lendingLimit`` (no limit lends all of it). Kueue reports it
  nowhere; it is nominal and usage read together.
* *weightedShare*: only when fair sharing is on in Kueue's configuration: the largest, over
  resources, of what the queue borrows divided by what its cohort can lend, divided by its
  weight, times 1000. 0 is not borrowing; the higher, the sooner Kueue preempts it and the
  later it admits its workloads when others want the same quota.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from portal.vocabulary.quantity import QuantityError, parse_quantity
from queues.rules import quota_entries

# Kueue's weightedShare for a queue of weight 0 that borrows (an int64's largest value).
INFINITE_SHARE = 2**63 - 1
Key = tuple[str, str]  # (flavor, resource)
# An exact amount: an int when whole (GPUs and counts nearly always are), else a Fraction.
# Sums of ints are plain additions, where each Fraction's reduces by a gcd, and the Queues
# page adds up a thousand queues' rows per request (about a tenth of its time at the scale
# scenario's 1,000 ClusterQueues).
Amount = int | Fraction


@dataclass(frozen=True)
class Facts:
    """A ClusterQueue or a Cohort: its spec in the portal and its status from the last poll."""

    name: str
    parent: str  # a queue's cohort, a cohort's parent; "" when none
    weight: str  # as written; "" is Kueue's 1
    groups: Sequence[Mapping[str, Any]]
    status: Mapping[str, Any]  # {} when the poll has not seen it


@dataclass
class Row:
    """One (flavor, resource): amounts exact; None where the cluster has not said yet."""

    flavor: str
    resource: str
    nominal: Amount = 0
    used: Amount | None = None
    borrowed: Amount | None = None
    lent: Amount | None = None


@dataclass
class Share:
    """A fair-sharing weight (as written, Kueue's 1 when empty) and Kueue's weightedShare
    (None when the cluster does not report one: fair sharing off, or not polled yet)."""

    weight: str
    value: int | None

    @property
    def infinite(self) -> bool:
        return self.value == INFINITE_SHARE


@dataclass
class CohortNode:
    name: str
    share: Share
    depth: int = 0
    path: list[str] = field(default_factory=list)  # root first, this cohort last
    queues: list[str] = field(default_factory=list)  # its own ClusterQueues, by name
    members: list[tuple[str, Share]] = field(default_factory=list)  # those, with their share
    children: list[CohortNode] = field(default_factory=list)
    totals: list[Row] = field(default_factory=list)  # over the whole subtree
    observed: bool = False  # the poll saw at least one of its subtree's queues
    own_quota: bool = False  # it has resource groups of its own

    @property
    def same_as(self) -> str:
        """The one cohort nested in it when it adds nothing of its own (no queue, no
        quota): its totals are that cohort's ("" otherwise)."""
        if len(self.children) != 1 or self.queues or self.own_quota:
            return ""
        return self.children[0].name

    @property
    def within(self) -> str:
        """The cohorts it is nested in, root first ("" for a root)."""
        return " \u203a ".join(self.path[:-1])


def _amount(value: Any) -> Amount:
    return _parsed(value if isinstance(value, int) and not isinstance(value, bool) else str(value))


@lru_cache(maxsize=4096)
def _parsed(value: str | int) -> Amount:
    """A quantity's exact amount, 0 when it is none (cached: a large cluster's queues and
    statuses repeat the same few amounts thousands of times; an amount is immutable)."""
    try:
        amount = parse_quantity(value)
    except QuantityError:
        return 0
    return amount.numerator if amount.denominator == 1 else amount


def share_of(weight: str, status: Mapping[str, Any]) -> Share:
    reported = (status or {}).get("fairSharing")
    value = None
    if isinstance(reported, Mapping):
        raw = reported.get("weightedShare", 0)
        value = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    return Share(weight=weight or "1", value=value)


def queue_rows(queue: Facts) -> list[Row]:
    """One row per (flavor, resource) of the queue's quota, with what it lends now."""
    usage: dict[Key, Mapping[str, Any]] = {}
    for flavor in queue.status.get("flavorsUsage") or []:
        for resource in flavor.get("resources") or []:
            usage[(flavor.get("name", ""), resource.get("name", ""))] = resource
    rows = []
    for _, flavor, quota in quota_entries(queue.groups):
        row = Row(flavor, quota["name"], nominal=_amount(quota.get("nominalQuota", 0)))
        if queue.status:
            used = usage.get((flavor, quota["name"]), {})
            row.used = _amount(used.get("total", 0))
            row.borrowed = _amount(used.get("borrowed", 0))
            row.lent = 0
            if queue.parent:
                lendable = row.nominal
                if quota.get("lendingLimit") not in (None, ""):
                    lendable = min(lendable, _amount(quota["lendingLimit"]))
                row.lent = max(0, min(lendable, row.nominal - row.used))
        rows.append(row)
    return rows


def _add(totals: dict[Key, Row], rows: Sequence[Row], *, nominal_only: bool = False) -> None:
    for row in rows:
        total = totals.setdefault((row.flavor, row.resource), Row(row.flavor, row.resource))
        total.nominal += row.nominal
        if nominal_only:
            continue
        for name in ("used", "borrowed", "lent"):
            mine = getattr(row, name)
            if mine is not None:
                setattr(total, name, (getattr(total, name) or 0) + mine)


def cohort_tree(
    cohorts: Sequence[Facts],
    queues: Sequence[Facts],
    rows: Mapping[str, Sequence[Row]],
) -> list[CohortNode]:
    """The roots of the cohort forest (by name), each node with its children, its own
    queues and totals over its subtree: its queues' quota and use and its own extra
    quota (``rows``: a queue's :func:`queue_rows`). A parent that names no cohort (or a
    cycle) makes a root, as Kueue's implicit cohorts do."""
    facts = {c.name: c for c in cohorts}
    for queue in queues:  # a cohortName with no Cohort object: an implicit cohort
        if queue.parent and queue.parent not in facts:
            facts[queue.parent] = Facts(queue.parent, "", "", [], {})
    nodes = {name: CohortNode(name, share_of(c.weight, c.status)) for name, c in facts.items()}
    for queue in sorted(queues, key=lambda q: q.name):
        if queue.parent:
            nodes[queue.parent].queues.append(queue.name)
            nodes[queue.parent].members.append((queue.name, share_of(queue.weight, queue.status)))
    roots = []
    for name in sorted(nodes):
        parent = facts[name].parent
        if parent in nodes and not _in_cycle(name, facts):
            nodes[parent].children.append(nodes[name])
        else:
            roots.append(nodes[name])

    def visit(node: CohortNode, path: list[str]) -> dict[Key, Row]:
        node.depth, node.path = len(path), [*path, node.name]
        totals: dict[Key, Row] = {}
        for queue in node.queues:
            _add(totals, rows.get(queue, []))
            node.observed = node.observed or any(r.used is not None for r in rows.get(queue, []))
        own = Facts(node.name, "", "", facts[node.name].groups, {})
        node.own_quota = bool(queue_rows(own))
        _add(totals, queue_rows(own), nominal_only=True)
        for child in node.children:
            _add(totals, list(visit(child, node.path).values()))
            node.observed = node.observed or child.observed
        node.totals = list(totals.values())
        return totals

    for root in roots:
        visit(root, [])
    return roots


def _in_cycle(name: str, facts: Mapping[str, Facts]) -> bool:
    seen, current = {name}, facts[name].parent
    while current in facts:
        if current in seen:
            return True
        seen.add(current)
        current = facts[current].parent
    return False


def walk(roots: Sequence[CohortNode]) -> list[CohortNode]:
    """Every cohort, depth first (a parent before its children)."""
    out: list[CohortNode] = []
    for root in roots:
        out.append(root)
        out.extend(walk(root.children))
    return out


@dataclass
class Summary:
    """A cohort in one line (``name`` "" for the queues in no cohort): how many
    ClusterQueues its subtree holds, each GPU resource's nominal quota and use over them
    (every flavor summed), and how many workloads Kueue reports admitted and pending in
    them (None when the poll has seen none of them)."""

    name: str
    depth: int = 0
    within: str = ""
    queues: int = 0
    gpus: list[Row] = field(default_factory=list)
    admitted: int | None = None
    pending: int | None = None


def subtree_queues(node: CohortNode) -> list[str]:
    """The ClusterQueues of a cohort and of every cohort nested in it, by name."""
    out = list(node.queues)
    for child in node.children:
        out.extend(subtree_queues(child))
    return out


def summary(
    name: str, queues: Sequence[Facts], totals: Sequence[Row], *, node: CohortNode | None = None
) -> Summary:
    """One line of a cohort (``node``; its subtree's ``queues`` and ``totals``), or of the
    queues in no cohort (no node, ``totals`` their rows)."""
    gpus: dict[str, Row] = {}
    for row in totals:
        if not row.resource.startswith("nvidia.com/"):
            continue
        total = gpus.setdefault(row.resource, Row("", row.resource))
        total.nominal += row.nominal
        if row.used is not None:
            total.used = (total.used or 0) + row.used
    counts: dict[str, int | None] = {}
    for key in ("admittedWorkloads", "pendingWorkloads"):
        seen = [q.status.get(key) for q in queues if q.status]
        counts[key] = sum(v for v in seen if isinstance(v, int)) if seen else None
    return Summary(
        name=name,
        depth=node.depth if node else 0,
        within=node.within if node else "",
        queues=len(queues),
        gpus=sorted(gpus.values(), key=lambda r: r.resource),
        admitted=counts["admittedWorkloads"],
        pending=counts["pendingWorkloads"],
    )


def summaries(
    roots: Sequence[CohortNode], queues: Sequence[Facts], rows: Mapping[str, Sequence[Row]]
) -> list[Summary]:
    """Every cohort's line, depth first (a parent before its children), then the queues in
    no cohort's when there are some (``rows``: a queue's :func:`queue_rows`)."""
    facts = {q.name: q for q in queues}
    out = [
        summary(node.name, [facts[q] for q in subtree_queues(node)], node.totals, node=node)
        for node in walk(roots)
    ]
    alone = [q for q in queues if not q.parent]
    if alone:
        totals: dict[Key, Row] = {}
        for queue in alone:
            _add(totals, rows.get(queue.name, []))
        out.append(summary("", alone, list(totals.values())))
    return out
