"""Kueue's preemption and fair sharing for the demo cluster, kept simple (kueue-semantics §2.2
and Kueue's docs, concepts/preemption).

Classic preemption (fair sharing off):

* A workload that does not fit may preempt if its requests fit in its ClusterQueue's nominal
  quota, or if ``borrowWithinCohort`` is not ``Never``.
* Candidates: admitted workloads of the same ClusterQueue that ``withinClusterQueue`` allows
  (``LowerPriority``: lower priority; ``LowerOrNewerEqualPriority``: also equal priority queued
  later), and of other ClusterQueues of the cohort that borrow (use more than their nominal
  quota of a resource the preemptor asks for) that ``reclaimWithinCohort`` allows (``Any``,
  ``LowerPriority``) or ``borrowWithinCohort`` (``LowerPriority``, at most
  ``maxPriorityThreshold``). Other queues' workloads first, then the lowest priority, then the
  most recently admitted.
* Targets: candidates are taken in that order until the preemptor fits (borrowing allowed when
  all are its own queue's or ``borrowWithinCohort`` allows it, else within nominal quota);
  failing that, its own queue's alone, borrowing allowed; then, last first, every target
  that is not needed is given back.

Fair sharing (Kueue's Configuration ``fairSharing``, ``Options.fair_sharing``):

* A ClusterQueue's ``weightedShare`` is the largest, over its resources, of what it borrows
  divided by what its cohort can lend, divided by its weight, times 1000 (0 when it does not
  borrow; 2^63-1 when it borrows with weight 0). Pending workloads of the queue with the
  lowest share are admitted first.
* Across queues the preemptor takes from the queue with the highest share, while its own
  queue's share with the workload stays at most the target queue's share without the victim
  (``LessThanOrEqualToFinalShare``), then below its current share (``LessThanInitialShare``).

Victims are evicted at once (``Evicted`` ``Preempted``, ``Preempted`` with the reason, Kueue's
message with the preemptor's and preemptee's cohort paths) and requeued; the preemptor is
admitted on the next pass. Not modelled: hierarchical cohort quotas, flavor fungibility
beyond the first flavor that fits, partial admission.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from devcluster import kueue, quantity
from devcluster.cluster import Cluster, Obj

Usage = dict[tuple[str, str], Fraction]
Target = tuple[Obj, str]  # (victim, Kueue's preemption reason)
MAX_SHARE = 2**63 - 1
HUMAN = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


def priority(workload: Obj) -> int:
    return int((workload.get("spec") or {}).get("priority") or 0)


def _admitted_at(workload: Obj) -> str:
    admitted = kueue.find_condition(workload, "Admitted") or {}
    return str(admitted.get("lastTransitionTime") or workload["metadata"]["creationTimestamp"])


def _without(usage: dict[str, Usage], victims: Iterable[Obj]) -> dict[str, Usage]:
    out: dict[str, Usage] = defaultdict(lambda: defaultdict(Fraction))
    for cq, used in usage.items():
        out[cq].update(used)
    for cq, used in kueue.usage_of(victims).items():
        for key, amount in used.items():
            out[cq][key] -= amount
    return out


def _borrows(cq: Obj, used: Usage, resources: set[str]) -> bool:
    return any(
        used[key] > (limits["nominal"] or 0)
        for key, limits in kueue._quota(cq).items()
        if key[1] in resources
    )


def share(cq_name: str, cqs: dict[str, Obj], usage: dict[str, Usage]) -> int:
    """A ClusterQueue's ``status.fairSharing.weightedShare`` for this usage, as Kueue counts
    it: per resource, what the queue uses beyond its nominal quota in every flavor, over what
    the cohort's members may lend of that resource in every flavor; the largest such ratio,
    times 1000, over the queue's weight, rounded up (real Kueue reported 4 where 3.125 had
    been truncated to 3)."""
    cq = cqs[cq_name]
    cohort = cq["spec"].get("cohortName")
    if not cohort:
        return 0
    borrowed: dict[str, Fraction] = {}
    for key, limits in kueue._quota(cq).items():
        over = usage[cq_name][key] - (limits["nominal"] or 0)
        if over > 0:
            borrowed[key[1]] = borrowed.get(key[1], Fraction(0)) + over
    lendable: dict[str, Fraction] = {}
    for member in cqs.values():
        if member["spec"].get("cohortName") != cohort:
            continue
        for (_, resource), theirs in kueue._quota(member).items():
            lends = theirs["lending"] if theirs["lending"] is not None else theirs["nominal"]
            lendable[resource] = lendable.get(resource, Fraction(0)) + (lends or 0)
    ratios = [over / lendable[r] for r, over in borrowed.items() if lendable.get(r, 0) > 0]
    if not ratios:
        return 0
    weight = quantity.parse((cq["spec"].get("fairSharing") or {}).get("weight", 1))
    return MAX_SHARE if weight == 0 else math.ceil(max(ratios) * 1000 / weight)


def weighted_shares(
    cluster: Cluster, cqs: dict[str, Obj], usage: dict[str, Usage]
) -> dict[tuple[str, str], int]:
    """``("cq", name)`` and ``("cohort", name)`` -> weightedShare (a root cohort's is 0)."""
    shares: dict[tuple[str, str], int] = {("cq", name): share(name, cqs, usage) for name in cqs}
    for cohort in cluster.all(kueue.COHORTS):
        shares[("cohort", cohort["metadata"]["name"])] = 0
    return shares


def candidates(
    cluster: Cluster,
    workload: Obj,
    cq: Obj,
    cqs: dict[str, Obj],
    usage: dict[str, Usage],
    resources: set[str],
    held: set[str] | None = None,
) -> list[Target]:
    """Admitted workloads this one may preempt, in Kueue's order of preference: of those
    admitted before this cycle (``held``, their uids; None: every admitted one)."""
    name, cohort = cq["metadata"]["name"], cq["spec"].get("cohortName")
    policy = cq["spec"].get("preemption") or {}
    within = policy.get("withinClusterQueue", "Never")
    reclaim = policy.get("reclaimWithinCohort", "Never")
    borrow = policy.get("borrowWithinCohort") or {}
    mine, queued = priority(workload), kueue._waiting_order(workload)[1]
    found: list[Target] = []
    for other in kueue.workloads_now(cluster):
        owner = kueue.admitted_to(other)
        theirs = priority(other)
        if not owner or other is workload:
            continue
        if held is not None and other["metadata"]["uid"] not in held:
            continue
        if owner == name:
            newer = theirs == mine and kueue._waiting_order(other)[1] > queued
            if (within == "LowerPriority" and theirs < mine) or (
                within == "LowerOrNewerEqualPriority" and (theirs < mine or newer)
            ):
                found.append((other, "InClusterQueue"))
            continue
        if not cohort or cqs.get(owner, {}).get("spec", {}).get("cohortName") != cohort:
            continue
        if not _borrows(cqs[owner], usage[owner], resources):
            continue
        threshold = borrow.get("maxPriorityThreshold")
        if (
            reclaim == "Any"
            or (reclaim == "LowerPriority" and theirs < mine)
            or (
                borrow.get("policy") == "LowerPriority"
                and theirs < mine
                and (threshold is None or theirs <= threshold)
            )
        ):
            found.append((other, "InCohortReclamation"))
    found.sort(key=lambda t: _admitted_at(t[0]), reverse=True)  # newest first among equals
    found.sort(key=lambda t: (kueue.admitted_to(t[0]) == name, priority(t[0])))
    return found


class _Fit:
    """Does the preemptor fit once ``victims`` are gone?"""

    def __init__(
        self,
        workload: Obj,
        cq: Obj,
        cqs: dict[str, Obj],
        usage: dict[str, Usage],
        requests: Any,
        flavors: dict[str, Obj],
    ) -> None:
        self.workload, self.cq, self.cqs, self.usage = workload, cq, cqs, usage
        self.requests, self.flavors = requests, flavors

    def __call__(self, victims: list[Target], *, borrowing: bool = True) -> bool:
        usage = _without(self.usage, (v for v, _ in victims))
        _, problems = kueue._assign(
            self.cq, self.cqs, usage, self.workload, self.requests, self.flavors, borrowing
        )
        return not problems


def _greedy(fits: _Fit, cands: list[Target], *, borrowing: bool) -> list[Target]:
    chosen: list[Target] = []
    for candidate in cands:
        chosen.append(candidate)
        if fits(chosen, borrowing=borrowing):
            return _minimal(fits, chosen, borrowing=borrowing)
    return []


def _minimal(fits: _Fit, chosen: list[Target], *, borrowing: bool) -> list[Target]:
    for candidate in list(reversed(chosen)):
        rest = [c for c in chosen if c is not candidate]
        if fits(rest, borrowing=borrowing):
            chosen = rest
    return chosen


def targets(
    cluster: Cluster,
    workload: Obj,
    cq: Obj,
    cqs: dict[str, Obj],
    usage: dict[str, Usage],
    requests: Any,
    flavors: dict[str, Obj],
    *,
    fair_sharing: bool,
    held: set[str] | None = None,
) -> list[Target]:
    """The workloads to preempt so that ``workload`` fits, or [] if it may not or cannot;
    only workloads admitted before this cycle (``held``) are candidates."""
    fits = _Fit(workload, cq, cqs, usage, requests, flavors)
    resources = {r for _, _, totals in requests for r, a in totals.items() if a}
    cands = candidates(cluster, workload, cq, cqs, usage, resources, held)
    if not cands:
        return []
    if fair_sharing:
        chosen = _fair(fits, cq, cqs, usage, cands)
    else:
        borrow_policy = (cq["spec"].get("preemption") or {}).get("borrowWithinCohort") or {}
        may_borrow = borrow_policy.get("policy", "Never") != "Never"
        empty = _Fit(
            workload, cq, cqs, defaultdict(lambda: defaultdict(Fraction)), requests, flavors
        )
        if not (may_borrow or empty([], borrowing=False)):
            return []
        name = cq["metadata"]["name"]
        own = [c for c in cands if kueue.admitted_to(c[0]) == name]
        borrowing = len(own) == len(cands) or may_borrow
        chosen = _greedy(fits, cands, borrowing=borrowing) or _greedy(fits, own, borrowing=True)
    if chosen and not fits(chosen, borrowing=False):
        chosen = [
            (v, "InCohortReclaimWhileBorrowing" if r == "InCohortReclamation" else r)
            for v, r in chosen
        ]
    return chosen


def _charged(cq: Obj, requests: Any) -> Usage:
    """What the workload would hold: each resource in its group's first flavor."""
    out: Usage = defaultdict(Fraction)
    for group in cq["spec"].get("resourceGroups") or []:
        first = ((group.get("flavors") or [{}])[0]).get("name", "")
        for _, _, totals in requests:
            for resource, amount in totals.items():
                if resource in group.get("coveredResources", []):
                    out[(first, resource)] += amount
    return out


def _fair(
    fits: _Fit, cq: Obj, cqs: dict[str, Obj], usage: dict[str, Usage], cands: list[Target]
) -> list[Target]:
    name = cq["metadata"]["name"]
    others = [c for c in cands if kueue.admitted_to(c[0]) != name]
    chosen: list[Target] = []
    for strategy in ("LessThanOrEqualToFinalShare", "LessThanInitialShare"):
        left = [c for c in others if c not in chosen]
        while left and not fits(chosen):
            now = _without(usage, (v for v, _ in chosen))
            with_it = _without(now, [])
            for key, amount in _charged(cq, fits.requests).items():
                with_it[name][key] += amount
            mine = share(name, cqs, with_it)
            target = max({kueue.admitted_to(v) for v, _ in left}, key=lambda q: share(q, cqs, now))
            picked = None
            for victim, _ in (c for c in left if kueue.admitted_to(c[0]) == target):
                after = _without(now, [victim])
                if (
                    strategy == "LessThanOrEqualToFinalShare" and mine <= share(target, cqs, after)
                ) or (strategy == "LessThanInitialShare" and mine < share(target, cqs, now)):
                    picked = (victim, "InCohortFairSharing")
                    break
            if picked is None:
                left = [c for c in left if kueue.admitted_to(c[0]) != target]
                continue
            chosen.append(picked)
            left = [c for c in left if c[0] is not picked[0]]
    if not fits(chosen):
        chosen += [c for c in cands if kueue.admitted_to(c[0]) == name]
        if not fits(chosen):
            return []
    return _minimal(fits, chosen, borrowing=True)


def cohort_path(cluster: Cluster, cq: Obj) -> str:
    """``/<root cohort>/…/<cohort>/<cluster queue>`` as Kueue names it in messages."""
    parts = [cq["metadata"]["name"]]
    cohort, seen = cq["spec"].get("cohortName"), set()
    while cohort and cohort not in seen:
        seen.add(cohort)
        parts.append(cohort)
        obj = cluster.get(kueue.COHORTS, "", cohort)  # type: ignore[arg-type]
        cohort = ((obj or {}).get("spec") or {}).get("parentName")
    return "/" + "/".join(reversed(parts))


def issue(cluster: Cluster, preemptor: Obj, victims: list[Target]) -> None:
    """Evict the victims as Kueue's scheduler and workload controller do, and requeue them."""
    cqs = {c["metadata"]["name"]: c for c in cluster.all(kueue.CQS)}
    lqs = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in cluster.all(kueue.LQS)}
    mine = cqs[kueue.cluster_queue_of(preemptor, lqs)]
    meta = preemptor["metadata"]
    job_uid = (meta.get("labels") or {}).get("kueue.x-k8s.io/job-uid") or "UNKNOWN"
    for victim, reason in victims:
        theirs = cqs[kueue.admitted_to(victim)]
        message = (
            f"Preempted to accommodate a workload (UID: {meta.get('uid') or 'UNKNOWN'}, "
            f"JobUID: {job_uid}) due to {HUMAN[reason]}; preemptor path: "
            f"{cohort_path(cluster, mine)}; preemptee path: {cohort_path(cluster, theirs)}"
        )
        priorities = (
            f"preemptor effective priority: {priority(preemptor)} (base: {priority(preemptor)}, "
            f"boost: 0); preemptee effective priority: {priority(victim)} (base: "
            f"{priority(victim)}, boost: 0)"
        )
        _evict(cluster, victim, reason, message, priorities)
        about = victim["metadata"]
        kueue.event(
            cluster,
            preemptor,
            "Normal",
            "PreemptedWorkload",
            f"Preempted workload {about['namespace']}/{about['name']} (UID: {about.get('uid')}) "
            f"in ClusterQueue {theirs['metadata']['name']}; {priorities}",
        )


def _evict(cluster: Cluster, victim: Obj, reason: str, message: str, priorities: str) -> None:
    """Evict and requeue ``victim`` with Kueue's conditions and its two events (recorded in
    tests/data/kueue-samples/events-workload-story.json: EvictedDueToPreempted, then
    Preempted with the effective priorities added)."""
    status = copy.deepcopy(victim["status"])
    status.pop("admission", None)
    gen = kueue.generation(victim)
    conditions = status.get("conditions") or []
    for kind, state, why, text in (
        ("Evicted", "True", "Preempted", message),
        ("Preempted", "True", reason, message),
        ("QuotaReserved", "False", "Pending", message),
        ("Admitted", "False", "NoReservation", "The workload has no reservation"),
        ("Requeued", "True", "Preempted", message),
    ):
        conditions = kueue.set_condition(conditions, kind, state, why, text, gen)
    status["conditions"] = conditions
    evictions: list[dict[str, Any]] = status.setdefault("schedulingStats", {}).setdefault(
        "evictions", []
    )
    entry = next(
        (e for e in evictions if e["reason"] == "Preempted" and e["underlyingCause"] == reason),
        None,
    )
    if entry is None:
        evictions.append({"count": 1, "reason": "Preempted", "underlyingCause": reason})
    else:
        entry["count"] += 1
    stored = cluster._store(kueue.WORKLOADS, {**copy.deepcopy(victim), "status": status}, victim)  # type: ignore[arg-type]
    kueue.event(cluster, stored, "Normal", "EvictedDueToPreempted", message)
    kueue.event(cluster, stored, "Normal", "Preempted", f"{message}; {priorities}")
