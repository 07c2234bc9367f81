"""Benchmark: the quota what-if on a busy cohort.

    python bench/whatif.py [--workloads 2000] [--seed 7]

Builds a world as plain facts (no database): one cohort of eight ClusterQueues sharing two
GPU flavors (the first four queues preempt within themselves and reclaim from the cohort,
one of them borrows with ``borrowWithinCohort``), ``--workloads`` admitted workloads that
fill the cohort (1 to 8 GPUs, priorities 0 to 4) and as many waiting (1 to 8 GPUs,
priorities 0 to 6), then simulates a raise of the first queue's nominal quota, once with
classic preemption and once with fair sharing. Last line: ``classic_s=… fair_s=…``.
Goal: under 5 s each for 2,000 + 2,000 workloads (a page waits for it).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smoke import parse

from queues.whatif import Group, Outcome, Queue, Quota, Workload, World, what_if

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


def timed(world: World) -> tuple[Outcome, float]:
    raised = world.queues[0]
    quotas = {k: Quota(v.nominal * 2) for k, v in raised.quotas.items()}
    proposed = world.with_queue(Queue(**{**raised.__dict__, "quotas": quotas}))
    started = time.perf_counter()
    outcome = what_if(world, proposed)
    return outcome, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parse(parser, {"workloads": 60})
    seconds = {}
    for fair in (False, True):
        outcome, seconds[fair] = timed(build(args.workloads, args.seed, fair=fair))
        print(
            f"{'fair sharing' if fair else 'classic'}: {len(outcome.admitted)} admitted, "
            f"{len(outcome.preempted)} preempted, {len(outcome.waiting)} waiting, "
            f"{len(outcome.borrowing)} borrowing rows"
        )
    print(f"classic_s={seconds[False]:.2f} fair_s={seconds[True]:.2f}")


if __name__ == "__main__":
    main()
