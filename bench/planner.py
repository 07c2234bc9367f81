"""Benchmark: the MIG layout planner on a large fleet.

    python bench/planner.py [--nodes 1000] [--seed 7] [--limit 5]

Builds a fleet as plain facts (no database): 1,000 nodes of eight GPUs, A100 80GB and H100
80GB, in eight pools (four take one layout, four allow mixed layouts), on a mix of current
configs, with 0 to 3 GPU pods per node, 2 % of the GPUs unhealthy and 1 % of the nodes
held by other open requests; demand over eight resources (whole GPUs and seven MIG
profiles), some of it servable by several pools, about 80 % of what the fleet could offer.
Then plans it with the exact model (HiGHS, time limit ``--limit`` seconds). Last line:
``plan_s=… gap=…`` (seconds of the plan, optimality gap in percent). Goal: under 5 s with
a gap under 2 %.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smoke import parse

from changes.planner import Demand, PlanNode, PlanPool, Problem, plan
from gpus.catalog import promised_resources

MODELS = ("A100-80GB", "H100-80GB")
CONFIGS = ("all-disabled", "all-3g.40gb", "all-balanced", "all-1g.10gb", "all-2g.20gb")
WEIGHT = {  # eighths of a GPU
    "nvidia.com/gpu": 8,
    "nvidia.com/mig-7g.80gb": 8,
    "nvidia.com/mig-4g.40gb": 4,
    "nvidia.com/mig-3g.40gb": 4,
    "nvidia.com/mig-2g.20gb": 2,
    "nvidia.com/mig-1g.10gb": 1,
    "nvidia.com/mig-1g.20gb": 2,
    "nvidia.com/mig-1g.10gb.me": 1,
}
POOLS = [PlanPool(f"pool-{i}", mixed=i >= 4, reason="its intended config") for i in range(8)]
# The one-layout pools: their config now, and what their demand asks for (pool-2 is asked
# for 4g.40gb it does not offer, pool-3 for both kinds of 1g.10gb).
SINGLE = {
    "pool-0": ("all-disabled", {"nvidia.com/gpu": 0.85}),
    "pool-1": ("all-3g.40gb", {"nvidia.com/mig-3g.40gb": 0.85}),
    "pool-2": ("all-balanced", {"nvidia.com/mig-4g.40gb": 0.40}),
    "pool-3": ("all-1g.10gb", {"nvidia.com/mig-1g.10gb": 0.60, "nvidia.com/mig-1g.10gb.me": 0.1}),
}
MIXED = {  # what the mixed pools are asked for, as a share of their GPUs' memory
    "nvidia.com/gpu": 0.15,
    "nvidia.com/mig-7g.80gb": 0.10,
    "nvidia.com/mig-3g.40gb": 0.20,
    "nvidia.com/mig-2g.20gb": 0.15,
    "nvidia.com/mig-1g.20gb": 0.10,
    "nvidia.com/mig-1g.10gb": 0.10,
}


def build(count: int, seed: int) -> Problem:
    rng = random.Random(seed)
    nodes = []
    for index in range(count):
        pool = POOLS[index % len(POOLS)].name
        model = MODELS[(index // len(POOLS)) % 2]
        config = SINGLE[pool][0] if pool in SINGLE else rng.choice(CONFIGS)
        if pool in SINGLE and rng.random() < 0.03:
            config = rng.choice(CONFIGS)  # re-sliced by hand and never put back
        offer, _ = promised_resources(config, node="n", model=model, gpu_count=8, custom={})
        pods = tuple(f"ns/pod-{index}-{k}" for k in range(rng.choice((0, 0, 1, 2, 3))))
        nodes.append(
            PlanNode(
                name=f"gpu-{index:05d}",
                pool=pool,
                model=model,
                gpu_count=8,
                config=config,
                offer=offer or {},
                pods=pods,
                unhealthy=(rng.randrange(8),) if rng.random() < 0.16 else (),
                busy=1000 + index if rng.random() < 0.01 else None,
            )
        )
    per_pool = count // len(POOLS) * 64  # eighths of a GPU in one pool
    demand = []
    for pool, (_, asked) in SINGLE.items():
        for resource, share in asked.items():
            demand.append(Demand(resource, int(per_pool * share / WEIGHT[resource]), (pool,)))
    for index, (resource, share) in enumerate(MIXED.items()):
        for part in range(4, 8):  # half to one mixed pool, half to it or the next one
            units = int(per_pool * share / WEIGHT[resource] / 2)
            nearby = (f"pool-{part}", f"pool-{4 + (part + index) % 4}")
            demand.append(Demand(resource, units, (f"pool-{part}",), f"queue-{part}"))
            demand.append(Demand(resource, units, tuple(sorted(set(nearby))), f"queue-{part}"))
    return Problem(nodes, demand, POOLS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--limit", type=float, default=5.0)
    args = parse(parser, {"nodes": 16, "limit": 1.0})
    problem = build(args.nodes, args.seed)
    plan(build(8, args.seed), time_limit=1)  # load the catalog and HiGHS once
    started = time.perf_counter()
    result = plan(problem, time_limit=args.limit)
    seconds = time.perf_counter() - started
    score = result.score
    print(
        f"{args.nodes} nodes, {len(problem.demand)} demand items: {result.solver} "
        f"({result.status}); {len(result.changed)} nodes change, {score.evictions} pods "
        f"evicted, {len(result.shortfalls)} shortfalls (weighted {score.short}), "
        f"stranded {score.stranded}"
    )
    gap = "unknown" if result.gap is None else f"{100 * result.gap:.2f}%"
    print(f"plan_s={seconds:.2f} gap={gap}")


if __name__ == "__main__":
    main()
