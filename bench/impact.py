"""Benchmark: the impact assessment of re-slicing a whole pool.

    python bench/impact.py [--nodes 1000] [--pods 20000]

Builds a fleet as plain facts (no database): a pool of 1,000 A100 80GB nodes on
``all-3g.40gb`` with 20,000 running 3g pods, a second pool of 250 nodes on
``all-balanced``, ClusterQueues over both flavors, namespace quotas and pending pods; then
assesses moving the whole first pool to
``all-balanced``. Last line: ``impact_s=…`` (best of 5). Goal: under 0.5 s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smoke import parse

from changes.impact import Fleet, NamespaceQuota, NodeFacts, PodFacts, PoolFacts, QueueQuota, assess

PRODUCT = "NVIDIA-A100-SXM4-80GB"


def build(nodes: int, pods: int) -> tuple[Fleet, list[str]]:
    facts, targets, pod_facts = [], [], []
    for index in range(nodes + nodes // 4):
        train = index < nodes  # the pool being changed; the rest is a dev pool
        config = "all-3g.40gb" if train else "all-balanced"
        pool = "train" if train else "dev"
        allocatable = (
            {"nvidia.com/mig-3g.40gb": 16}
            if train
            else {
                "nvidia.com/mig-1g.10gb": 16,
                "nvidia.com/mig-2g.20gb": 8,
                "nvidia.com/mig-3g.40gb": 8,
            }
        )
        name = f"gpu-{index:05d}"
        facts.append(
            NodeFacts(
                name,
                "A100-80GB",
                8,
                config,
                "success",
                {
                    "quartermaster.io/pool": pool,
                    "nvidia.com/gpu.product": PRODUCT,
                    "nvidia.com/mig.config": config,
                },
                allocatable,
            )
        )
        if train:
            targets.append(name)
    for index in range(pods):
        node = facts[index % nodes]  # the running pods sit on the pool's nodes
        resource = next(iter(node.allocatable))
        pod_facts.append(
            PodFacts(
                f"team-{index % 50:02d}",
                f"job-{index:06d}",
                node.name,
                "Running",
                {resource: 1},
                f"team-{index % 50:02d}",
            )
        )
    for index in range(pods // 20):
        pod_facts.append(
            PodFacts(
                f"team-{index % 50:02d}",
                f"wait-{index:05d}",
                "",
                "Pending",
                {"nvidia.com/mig-2g.20gb": 1},
                f"team-{index % 50:02d}",
            )
        )
    queues = [
        QueueQuota(f"cq-{i:02d}", flavor, resource, 100)
        for i in range(20)
        for flavor, resource in (
            ("a100-3g", "nvidia.com/mig-3g.40gb"),
            ("a100-balanced", "nvidia.com/mig-1g.10gb"),
        )
    ]
    fleet = Fleet(
        nodes=facts,
        pods=pod_facts,
        queues=queues,
        flavors={
            "a100-3g": {"nvidia.com/gpu.product": PRODUCT, "nvidia.com/mig.config": "all-3g.40gb"},
            "a100-balanced": {
                "nvidia.com/gpu.product": PRODUCT,
                "nvidia.com/mig.config": "all-balanced",
            },
        },
        quotas=[
            NamespaceQuota(f"team-{i:02d}", f"team-{i:02d}", "nvidia.com/mig-3g.40gb", 64)
            for i in range(50)
        ],
        pools=[
            PoolFacts("train", {"quartermaster.io/pool": "train"}, "all-3g.40gb"),
            PoolFacts("dev", {"quartermaster.io/pool": "dev"}, "all-balanced"),
        ],
    )
    return fleet, targets


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    args = parse(parser, {"nodes": 40, "pods": 400})
    fleet, targets = build(args.nodes, args.pods)
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        # What a request stores: the assessment and its JSON form.
        result = assess(fleet, targets=targets, config="all-balanced")
        result.as_json()
        timings.append(time.perf_counter() - started)
    print(
        f"fleet: {len(fleet.nodes)} nodes, {len(fleet.pods)} pods; target: {len(targets)} nodes "
        f"-> all-balanced; verdict {result.verdict}, {len(result.evictions)} evictions, "
        f"{len(result.schedulable)} pods would fit"
    )
    print(f"impact_s={min(timings):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
