"""The scale scenario: one generated platform at the size of the largest Kueue installations,
shared by the benchmarks (plain facts, no database, the same for a seed).

    python bench/scale.py [--smoke]     # builds it and prints what it holds

At full size (``FULL``): 5,000 GPU nodes of eight GPUs in 20 pools (whole A100 and H100
GPUs, and MIG layouts of both: ``all-1g.10gb``, ``all-3g.40gb``, ``all-balanced``), 1,000
teams with 2,000 namespaces, a two-level cohort tree (two roots, 10 cohorts of 100
ClusterQueues each, as Kueue's own large-scale test), 2,000 LocalQueues (one per
namespace), 50,000 workloads (half admitted, half waiting; priorities 0 to 6; 1 to 8 GPUs or
MIG slices, mostly small), 150,000 pods (the admitted workloads' pods on their pool's nodes,
and the fleet's CPU pods), and 90 days of daily GPU-hours per team. ``SMOKE`` is the same
shape at a size that builds in well under a second.

Each cohort takes the two pools of one layout (one ``ResourceFlavor`` per pool) and one
resource: its 100 queues share it, each with a nominal quota of its even share of the two
pools' capacity. A queue's admitted workloads hold up to about its nominal quota (a fifth of
the queues borrow from the others); its waiting ones ask for about as much again. Quota
arithmetic here is exact integers, as Kueue's is.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smoke import parse

from gpus.catalog import promised_resources

GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 8
# Ten layouts, each on two pools (so 20 pools, two flavors a cohort): (model, config, the
# resource the cohort's queues share).
LAYOUTS = (
    ("H100-80GB", "all-disabled", GPU),
    ("A100-80GB", "all-disabled", GPU),
    ("H100-80GB", "all-disabled", GPU),
    ("A100-80GB", "all-disabled", GPU),
    ("A100-80GB", "all-1g.10gb", "nvidia.com/mig-1g.10gb"),
    ("A100-80GB", "all-3g.40gb", "nvidia.com/mig-3g.40gb"),
    ("A100-80GB", "all-balanced", "nvidia.com/mig-2g.20gb"),
    ("H100-80GB", "all-1g.10gb", "nvidia.com/mig-1g.10gb"),
    ("H100-80GB", "all-3g.40gb", "nvidia.com/mig-3g.40gb"),
    ("H100-80GB", "all-balanced", "nvidia.com/mig-2g.20gb"),
)
SIZES = (1, 1, 1, 1, 1, 2, 2, 4)  # what a workload asks for (times its pool's scale)
PRIORITIES = 7


@dataclass(frozen=True)
class Size:
    nodes: int = 5000
    pools: int = 20
    teams: int = 1000
    namespaces: int = 2000
    cohorts: int = 10
    queues_per_cohort: int = 100
    workloads: int = 50000
    pods: int = 150000
    claims: int = 50000  # DRA ResourceClaims (the poll bench's: a ResourceSlice per node)
    days: int = 90


FULL = Size()
SMOKE = Size(
    nodes=80,
    pools=4,
    teams=10,
    namespaces=20,
    cohorts=2,
    queues_per_cohort=5,
    workloads=400,
    pods=1200,
    claims=400,
    days=3,
)


@dataclass(frozen=True)
class Pool:
    name: str
    model: str
    config: str
    resource: str
    per_node: int  # of ``resource``, on one node of eight GPUs


@dataclass(frozen=True)
class Node:
    name: str
    pool: str
    model: str
    config: str


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    cohort: str
    resource: str
    flavors: tuple[str, str]  # its cohort's two pools, in order of preference
    nominal: int  # per flavor
    preempts: bool  # withinClusterQueue LowerPriority, reclaimWithinCohort Any
    weight: int


@dataclass(frozen=True)
class Workload:
    key: str  # namespace/name
    local_queue: str
    cluster_queue: str
    resource: str
    amount: int
    priority: int
    created: float  # seconds before the scenario's now
    flavor: str  # "" while it waits
    pods: int


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    node: str
    resource: str  # "" for a CPU pod
    amount: int


@dataclass
class Scenario:
    size: Size
    seed: int
    pools: list[Pool] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    teams: list[str] = field(default_factory=list)
    namespaces: dict[str, str] = field(default_factory=dict)  # namespace -> team
    cohorts: dict[str, str] = field(default_factory=dict)  # cohort -> parent ("" for a root)
    cluster_queues: list[ClusterQueue] = field(default_factory=list)
    local_queues: dict[str, str] = field(default_factory=dict)  # namespace/name -> CQ
    workloads: list[Workload] = field(default_factory=list)

    @property
    def admitted(self) -> list[Workload]:
        return [w for w in self.workloads if w.flavor]

    @property
    def waiting(self) -> list[Workload]:
        return [w for w in self.workloads if not w.flavor]

    @cached_property
    def by_queue(self) -> dict[str, list[Workload]]:
        out: dict[str, list[Workload]] = {q.name: [] for q in self.cluster_queues}
        for w in self.workloads:
            out[w.cluster_queue].append(w)
        return out

    @cached_property
    def nodes_by_pool(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {p.name: [] for p in self.pools}
        for node in self.nodes:
            out[node.pool].append(node)
        return out

    def pods(self) -> Iterator[Pod]:
        """``size.pods`` pods: each admitted workload's (its amount spread over its pods, on
        its flavor's nodes), then CPU pods spread over every node."""
        draw = random.Random(self.seed + 1)
        count = 0
        for w in self.admitted:
            nodes = self.nodes_by_pool[w.flavor]
            namespace, name = w.key.split("/")
            for index in range(w.pods):
                node = nodes[draw.randrange(len(nodes))].name
                share = w.amount // w.pods + (index < w.amount % w.pods)
                yield Pod(namespace, f"{name}-{index}", node, w.resource, share)
                count += 1
        names = list(self.namespaces)
        for index in range(max(0, self.size.pods - count)):
            node = self.nodes[index % len(self.nodes)].name
            yield Pod(names[index % len(names)], f"cpu-{index}", node, "", 0)

    def usage_history(self) -> Iterator[tuple[str, int, str, float]]:
        """(team, days ago, resource, GPU-hours): one row a team, day and resource its
        namespaces' queues use."""
        draw = random.Random(self.seed + 2)
        resources = {q.name: q.resource for q in self.cluster_queues}
        used: dict[str, set[str]] = {t: set() for t in self.teams}
        for lq, cq in self.local_queues.items():
            used[self.namespaces[lq.split("/")[0]]].add(resources[cq])
        for team in self.teams:
            for day in range(self.size.days):
                for resource in sorted(used[team]):
                    yield team, day, resource, round(draw.uniform(0, 24 * 16), 1)


def _pools(size: Size) -> list[Pool]:
    pools = []
    for index in range(size.pools):
        model, config, resource = LAYOUTS[(index // 2) % len(LAYOUTS)]
        offer, _ = promised_resources(
            config, node="n", model=model, gpu_count=GPUS_PER_NODE, custom={}
        )
        per_node = (offer or {}).get(resource, 0)
        assert per_node > 0, (model, config, resource)
        pools.append(Pool(f"pool-{index:02d}", model, config, resource, per_node))
    return pools


def _queues(size: Size, pools: list[Pool]) -> tuple[dict[str, str], list[ClusterQueue]]:
    """Two roots, the cohorts under them; each cohort on its two pools, its queues with an
    even share of their capacity."""
    cohorts = {"org-0": "", "org-1": ""}
    queues = []
    per_pool = size.nodes // size.pools
    for c in range(size.cohorts):
        name = f"cohort-{c}"
        cohorts[name] = f"org-{c % 2}"
        first, second = pools[(2 * c) % len(pools)], pools[(2 * c + 1) % len(pools)]
        nominal = per_pool * first.per_node // size.queues_per_cohort
        for i in range(size.queues_per_cohort):
            queues.append(
                ClusterQueue(
                    name=f"cq-{c}-{i:03d}",
                    cohort=name,
                    resource=first.resource,
                    flavors=(first.name, second.name),
                    nominal=nominal,
                    preempts=i % 2 == 0,
                    weight=1 + i % 3,
                )
            )
    return cohorts, queues


def _workloads(
    size: Size, draw: random.Random, queues: list[ClusterQueue], local_queues: dict[str, str]
) -> list[Workload]:
    """Per queue, admitted workloads and as many waiting, as Kueue would leave them: a fifth
    of the queues borrow (they hold a fifth more than their nominal quota), as many of the
    queues that do not preempt lend it (they hold a fifth less), the others hold their
    nominal quota; what waits in a queue that preempts has no higher priority than what it
    admitted (so nothing waiting preempts before a quota changes)."""
    by_queue: dict[str, list[str]] = {q.name: [] for q in queues}
    for lq, cq in local_queues.items():
        by_queue[cq].append(lq)
    per_queue = size.workloads // len(queues)
    scale = max(1, queues[0].nominal * 2 * 8 // (per_queue * 13))  # fill about the quota
    out = []
    for number, q in enumerate(queues):
        lqs = by_queue[q.name]
        room = q.nominal * (6 if number % 10 == 1 else 4 if number % 10 == 3 else 5) // 5
        sizes = [draw.choice(SIZES) * scale for _ in range(per_queue)]
        for flavor in range(2):  # what it admitted on a flavor fills its room there, no more
            held = sizes[2 * flavor : per_queue : 4]
            while sum(held) > room and max(held) > 1:
                held[held.index(max(held))] -= 1
            sizes[2 * flavor : per_queue : 4] = held
        for index in range(per_queue):
            lq = lqs[index % len(lqs)]
            admitted = index % 2 == 0
            priority = draw.randrange(PRIORITIES)
            if q.preempts:
                priority = 3 + priority % 4 if admitted else priority % 4
            out.append(
                Workload(
                    key=f"{lq.split('/')[0]}/{q.name}-{index}",
                    local_queue=lq,
                    cluster_queue=q.name,
                    resource=q.resource,
                    amount=sizes[index],
                    priority=priority,
                    created=float(draw.randrange(7 * 24 * 3600)),
                    flavor=q.flavors[index % 4 // 2] if admitted else "",
                    pods=1 + (sizes[index] - 1) // GPUS_PER_NODE,
                )
            )
    return out


def build(size: Size = FULL, seed: int = 11) -> Scenario:
    draw = random.Random(seed)
    pools = _pools(size)
    s = Scenario(size, seed, pools=pools)
    per_pool = size.nodes // size.pools
    s.nodes = [
        Node(f"gpu-{p.name[5:]}-{i:04d}", p.name, p.model, p.config)
        for p in pools
        for i in range(per_pool)
    ]
    s.teams = [f"team-{i:04d}" for i in range(size.teams)]
    s.namespaces = {f"ns-{i:04d}": s.teams[i % size.teams] for i in range(size.namespaces)}
    s.cohorts, s.cluster_queues = _queues(size, pools)
    names = list(s.namespaces)
    s.local_queues = {
        f"{ns}/lq": s.cluster_queues[i % len(s.cluster_queues)].name for i, ns in enumerate(names)
    }
    s.workloads = _workloads(size, draw, s.cluster_queues, s.local_queues)
    return s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=11)
    args = parse(parser, {})
    started = time.perf_counter()
    s = build(SMOKE if args.smoke else FULL, args.seed)
    pods = sum(1 for _ in s.pods())
    history = sum(1 for _ in s.usage_history())
    seconds = time.perf_counter() - started
    print(
        f"{len(s.nodes)} nodes in {len(s.pools)} pools, {len(s.teams)} teams, "
        f"{len(s.namespaces)} namespaces, {len(s.cohorts)} cohorts, "
        f"{len(s.cluster_queues)} ClusterQueues, {len(s.local_queues)} LocalQueues, "
        f"{len(s.admitted)} admitted + {len(s.waiting)} waiting workloads, {pods} pods, "
        f"{history} usage rows"
    )
    print(f"build_s={seconds:.2f} workloads={len(s.workloads)} pods={pods}")


if __name__ == "__main__":
    main()
