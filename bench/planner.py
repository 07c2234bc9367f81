"""Benchmark: the MIG layout planner on the scale scenario's fleet, whole and one pool.

    python bench/planner.py [--seed 7] [--limit 10] [--pool-limit 1] [--nodes N]

The scale scenario's fleet (``bench/scale.py``): 5,000 nodes of eight GPUs, A100 80GB and
H100 80GB, in 20 pools; five of them allow mixed layouts (their nodes on a mix of current
configs), the others take their one layout (3 % of their nodes re-sliced by hand); 0 to 3
GPU pods per node, 2 % of the GPUs unhealthy and 1 % of the nodes held by other open
requests. Demand: 85 % of what each one-layout pool offers of its layout's resources, and
for each mixed pool whole GPUs and six MIG profiles, half of it servable by the next mixed
pool too. Planned with the exact model (HiGHS), the whole fleet (time limit ``--limit``
seconds; goal under 10 s with a gap under 2 %) and the first mixed pool alone (its own
demand, ``--pool-limit``; goal under 1 s).

``--nodes N``: the earlier bench instead (N nodes in eight pools, goal 5 s).
Last line: ``plan_s=… gap=… pool_s=… pool_gap=…`` (seconds, optimality gap in percent).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import scale
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


def _offer(config: str, model: str) -> dict[str, int]:
    offer, _ = promised_resources(config, node="n", model=model, gpu_count=8, custom={})
    return dict(offer or {})


def scale_problem(s: scale.Scenario, seed: int, only: str = "") -> Problem:
    """The scenario's fleet and demand (``only``: one pool's nodes and the demand it alone
    may serve)."""
    rng = random.Random(seed)
    mixed = {p.name for i, p in enumerate(s.pools) if i % 4 == 3}
    pools = [PlanPool(p.name, mixed=p.name in mixed, reason="its intended config") for p in s.pools]
    offers: dict[tuple[str, str], dict[str, int]] = {}
    nodes = []
    for index, n in enumerate(s.nodes):
        config = rng.choice(CONFIGS) if n.pool in mixed or rng.random() < 0.03 else n.config
        if (config, n.model) not in offers:
            offers[(config, n.model)] = _offer(config, n.model)
        pods = tuple(f"ns/pod-{index}-{k}" for k in range(rng.choice((0, 0, 1, 2, 3))))
        nodes.append(
            PlanNode(
                name=n.name,
                pool=n.pool,
                model=n.model,
                gpu_count=scale.GPUS_PER_NODE,
                config=config,
                offer=offers[(config, n.model)],
                pods=pods,
                unhealthy=(rng.randrange(8),) if rng.random() < 0.16 else (),
                busy=100000 + index if rng.random() < 0.01 else None,
            )
        )
    per_pool = len(s.nodes) // len(s.pools)
    demand = []
    order = sorted(mixed)
    for p in s.pools:
        if p.name not in mixed:
            for resource, per_node in _offer(p.config, p.model).items():
                demand.append(Demand(resource, int(per_pool * per_node * 0.85), (p.name,)))
            continue
        after = order[(order.index(p.name) + 1) % len(order)]
        for resource, share in MIXED.items():
            units = int(per_pool * 64 * share / WEIGHT[resource] / 2)
            demand.append(Demand(resource, units, (p.name,), f"queue-{p.name}"))
            nearby = tuple(sorted({p.name, after}))
            demand.append(Demand(resource, units, nearby, f"queue-{p.name}"))
    if only:
        nodes = [n for n in nodes if n.pool == only]
        demand = [d for d in demand if d.pools == (only,)]
        pools = [p for p in pools if p.name == only]
    return Problem(nodes, demand, pools)


def timed_plan(problem: Problem, limit: float) -> tuple[float, str]:
    started, cpu = time.perf_counter(), time.process_time()
    result = plan(problem, time_limit=limit)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    score = result.score
    print(
        f"{len(problem.nodes)} nodes, {len(problem.demand)} demand items: {result.solver} "
        f"({result.status}); {len(result.changed)} nodes change, {score.evictions} pods "
        f"evicted, {len(result.shortfalls)} shortfalls (weighted {score.short}), "
        f"stranded {score.stranded}; {seconds:.2f} s (CPU {cpu:.2f} s)"
    )
    return seconds, "unknown" if result.gap is None else f"{100 * result.gap:.2f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--limit", type=float, default=10.0)
    parser.add_argument("--pool-limit", type=float, default=1.0)
    args = parse(parser, {"limit": 1.0})
    plan(build(8, args.seed), time_limit=1)  # load the catalog and HiGHS once
    if args.nodes:
        seconds, gap = timed_plan(build(args.nodes, args.seed), args.limit)
        print(f"plan_s={seconds:.2f} gap={gap}")
        return
    s = scale.build(scale.SMOKE if args.smoke else scale.FULL)
    seconds, gap = timed_plan(scale_problem(s, args.seed), args.limit)
    pool = next(p.name for i, p in enumerate(s.pools) if i % 4 == 3)
    pool_s, pool_gap = timed_plan(scale_problem(s, args.seed, pool), args.pool_limit)
    print(f"plan_s={seconds:.2f} gap={gap} pool_s={pool_s:.2f} pool_gap={pool_gap}")


if __name__ == "__main__":
    main()
