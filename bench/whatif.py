"""Benchmark: the quota what-if at the scale scenario, and on one busy cohort.

    python bench/whatif.py [--workloads 2000] [--seed 7] [--runs 3]

1. The scale scenario (``bench/scale.py``): 1,000 ClusterQueues in 10 cohorts of 100
   under two roots (the what-if reads the tree: a change reaches the queues of its tree
   that share a flavor with it, here its own cohort's), 50,000 workloads (half admitted,
   half waiting); a raise of one queue's nominal quota (double, on both its flavors), with
   classic preemption and with fair sharing. Goal: under 2 s each.
2. One busy cohort as plain facts: eight ClusterQueues sharing two GPU flavors (the first
   four preempt within themselves and reclaim from the cohort, one of them borrows with
   ``borrowWithinCohort``), ``--workloads`` admitted workloads that fill the cohort (1 to 8
   GPUs, priorities 0 to 4) and as many waiting (1 to 8 GPUs, priorities 0 to 6): hundreds
   of admissions and preemptions, the worst case per workload. The same raise of the first
   queue.

Each figure is the median of ``--runs`` runs (all of them printed). Last line:
``classic_s=… fair_s=… cohort_classic_s=… cohort_fair_s=…``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import scale
from smoke import parse

from queues.whatif import Cohort, Group, Outcome, Queue, Quota, Workload, World, what_if

GPU = "nvidia.com/gpu"
FLAVORS = ("h100", "a100")


def queue(index: int, nominal: int) -> Queue:
    preempting = index < 4
    return Queue(
        name=f"cq-{index}",
        groups=(Group((GPU,), FLAVORS),),
        quotas={(f, GPU): Quota(Fraction(nominal)) for f in FLAVORS},
        cohort="cohort",
        within_cluster_queue="LowerPriority" if preempting else "Never",
        reclaim_within_cohort="Any" if preempting else "Never",
        borrow_within_cohort="LowerPriority" if index == 0 else "Never",
        weight=Fraction(index + 1),
    )


def build(count: int, seed: int, *, fair: bool) -> World:
    rng = random.Random(seed)
    per_queue = count * 9 // 16  # what admitted workloads use, per queue and flavor
    queues = tuple(queue(i, per_queue // 2) for i in range(8))
    workloads = []
    for i in range(count):
        workloads.append(
            Workload(
                key=f"ns-{i % 20}/run-{i}",
                queue=f"cq-{rng.randrange(8)}",
                requests={GPU: Fraction(rng.randint(1, 8))},
                priority=rng.randrange(5),
                admitted=True,
                flavors={GPU: rng.choice(FLAVORS)},
                admitted_at=float(i),
            )
        )
        workloads.append(
            Workload(
                key=f"ns-{i % 20}/wait-{i}",
                queue=f"cq-{rng.randrange(8)}",
                requests={GPU: Fraction(rng.randint(1, 8))},
                priority=rng.randrange(7),
                created=float(i),
            )
        )
    return World(queues, tuple(workloads), fair_sharing=fair)


def scale_world(s: scale.Scenario, *, fair: bool) -> World:
    """The scale scenario's cohort tree, queues and workloads as the what-if reads them:
    every other queue preempts (within itself, and reclaims from its cohort), one in ten
    also with ``borrowWithinCohort``."""
    queues = tuple(
        Queue(
            name=q.name,
            groups=(Group((q.resource,), q.flavors),),
            quotas={(f, q.resource): Quota(Fraction(q.nominal)) for f in q.flavors},
            cohort=q.cohort,
            within_cluster_queue="LowerPriority" if q.preempts else "Never",
            reclaim_within_cohort="Any" if q.preempts else "Never",
            borrow_within_cohort="LowerPriority" if q.name.endswith("0") else "Never",
            weight=Fraction(q.weight),
        )
        for q in s.cluster_queues
    )
    workloads = tuple(
        Workload(
            key=w.key,
            queue=w.cluster_queue,
            requests={w.resource: Fraction(w.amount)},
            priority=w.priority,
            created=w.created,
            admitted=bool(w.flavor),
            flavors={w.resource: w.flavor} if w.flavor else {},
            admitted_at=-w.created,
        )
        for w in s.workloads
    )
    cohorts = {name: Cohort(parent) for name, parent in s.cohorts.items()}
    return World(queues, workloads, fair_sharing=fair, cohorts=cohorts)


def timed(world: World) -> tuple[Outcome, float]:
    raised = world.queues[0]
    quotas = {k: Quota(v.nominal * 2) for k, v in raised.quotas.items()}
    proposed = world.with_queue(Queue(**{**raised.__dict__, "quotas": quotas}))
    started = time.perf_counter()
    outcome = what_if(world, proposed)
    return outcome, time.perf_counter() - started


def measure(name: str, world: World, runs: int) -> float:
    """The median of ``runs`` what-ifs of ``world``, each printed with its CPU time (on a
    shared machine, what the run would take alone)."""
    times, cpu = [], []
    for _ in range(runs):
        started = time.process_time()
        outcome, seconds = timed(world)
        cpu.append(time.process_time() - started)
        times.append(seconds)
    if outcome.gave_up:
        raise SystemExit(f"{name}: {outcome.gave_up}")
    print(
        f"{name}: {len(outcome.admitted)} admitted, {len(outcome.preempted)} preempted, "
        f"{len(outcome.waiting)} waiting, {len(outcome.borrowing)} borrowing rows, in "
        f"{', '.join(outcome.scope) or 'every cohort'}; "
        f"runs {', '.join(f'{t:.2f}' for t in times)} s "
        f"(CPU {', '.join(f'{t:.2f}' for t in cpu)} s)"
    )
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=3)
    args = parse(parser, {"workloads": 60, "runs": 1})
    big = scale.build(scale.SMOKE if args.smoke else scale.FULL)
    figures = {}
    for fair in (False, True):
        mode = "fair" if fair else "classic"
        figures[f"{mode}_s"] = measure(f"scale, {mode}", scale_world(big, fair=fair), args.runs)
    for fair in (False, True):
        mode = "fair" if fair else "classic"
        world = build(args.workloads, args.seed, fair=fair)
        figures[f"cohort_{mode}_s"] = measure(f"one cohort, {mode}", world, args.runs)
    print(" ".join(f"{k}={v:.2f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
