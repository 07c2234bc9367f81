"""The MIG layout planner on hand-built fleets whose best plan is known, the seed incident
first; and the exact model against brute force on fleets small enough to enumerate."""

from __future__ import annotations

import itertools
import random

import pytest

from changes.planner import (
    Demand,
    PlanNode,
    PlanPool,
    Problem,
    Score,
    choices,
    evaluate,
    plan,
    prepare,
)

A100 = "A100-80GB"
H100 = "H100-80GB"
G3 = "nvidia.com/mig-3g.40gb"
G2 = "nvidia.com/mig-2g.20gb"
G1 = "nvidia.com/mig-1g.10gb"
GPU = "nvidia.com/gpu"


def seed_fleet(*, dev_node: bool = False) -> list[PlanNode]:
    """The seed's five nodes: two A100s on all-3g.40gb full of team-b's pods, gpu-a100-03
    left on all-balanced (its re-slice failed: no 3g.40gb) with team-b's dev test on it,
    and two H100s with whole GPUs (GPU 5 of gpu-h100-02 fell off the bus)."""
    nodes = [
        PlanNode(
            f"gpu-a100-0{i}",
            "train",
            A100,
            8,
            "all-3g.40gb",
            {G3: 16},
            pods=(f"team-b/filler-3g-{2 * i - 2}", f"team-b/filler-3g-{2 * i - 1}"),
            used={G3: 16},
        )
        for i in (1, 2)
    ]
    nodes.append(
        PlanNode(
            "gpu-a100-03",
            "train",
            A100,
            8,
            "all-balanced",
            {G2: 8, G1: 16},
            pods=("team-b/dev-test-1g",),
            used={G1: 4},
        )
    )
    nodes += [
        PlanNode("gpu-h100-01", "h100", H100, 8, "all-disabled", {GPU: 8}, pods=("team-b/gang-0",)),
        PlanNode("gpu-h100-02", "h100", H100, 8, "all-disabled", {GPU: 8}, unhealthy=(5,)),
    ]
    if dev_node:
        nodes.append(PlanNode("gpu-a100-04", "dev", A100, 8, "all-disabled", {GPU: 8}))
    return nodes


def seed_demand(dev_pools: tuple[str, ...]) -> list[Demand]:
    return [
        Demand(G3, 32, ("train",), "running pods"),
        Demand(G3, 1, ("train",), "Pending team-a/train-3g"),
        Demand(GPU, 8, ("h100",), "running pods"),
        Demand(G1, 16, dev_pools, "cq-dev nominal quota"),
        Demand(G2, 8, dev_pools, "cq-dev nominal quota"),
    ]


SEED_POOLS = [
    PlanPool("train", reason="its intended config is all-3g.40gb"),
    PlanPool("h100", reason="its intended config is all-disabled"),
]


def changed(result: object) -> dict[str, str]:
    return {n.name: n.config_after for n in result.changed}  # type: ignore[attr-defined]


def test_seed_incident_puts_the_balanced_node_back_on_3g_and_says_the_dev_demand_is_short() -> None:
    result = plan(Problem(seed_fleet(), seed_demand(("train",)), SEED_POOLS))
    assert changed(result) == {"gpu-a100-03": "all-3g.40gb"}
    (node,) = result.changed
    assert node.evicts == ("team-b/dev-test-1g",)
    assert node.before == {G2: 8, G1: 16} and node.after == {G3: 16}
    assert [s.sentence for s in result.shortfalls] == [
        "16 of 16 x nvidia.com/mig-1g.10gb cannot be served in pool train "
        "(asked by: cq-dev nominal quota).",
        "8 of 8 x nvidia.com/mig-2g.20gb cannot be served in pool train "
        "(asked by: cq-dev nominal quota).",
    ]
    assert result.notes == [
        "Pool train would need two layouts to cover more of its demand (all-3g.40gb on 2 "
        "nodes and all-balanced on 1 node), but it takes one layout: its intended config is "
        "all-3g.40gb. Allow mixed layouts in the pool, or give that demand a pool of its own."
    ]
    assert result.score == Score(lost=0, short=32, evictions=1, touched=1, stranded=0)
    assert (result.solver, result.status, result.gap) == ("highs", "optimal", 0.0)


def test_seed_incident_with_a_dev_pool_serves_the_dev_demand_there_and_not_in_training() -> None:
    pools = [*SEED_POOLS, PlanPool("dev", mixed=True)]
    result = plan(Problem(seed_fleet(dev_node=True), seed_demand(("dev", "train")), pools))
    assert changed(result) == {"gpu-a100-03": "all-3g.40gb", "gpu-a100-04": "all-balanced"}
    assert result.shortfalls == []
    assert result.notes == []
    lines = {line.resource: (line.demand, line.before, line.after) for line in result.lines}
    assert lines[G3] == (33, 32, 56)
    assert lines[G1] == (16, 16, 16)
    assert lines[G2] == (8, 8, 8)


def test_a_pool_that_needs_two_layouts_under_one_layout_is_refused_with_the_reason() -> None:
    nodes = [PlanNode(f"n{i}", "mix", A100, 8, "all-disabled", {GPU: 8}) for i in (1, 2)]
    demand = [Demand(G3, 24, ("mix",), "team-a"), Demand(G1, 16, ("mix",), "team-dev")]
    pools = [PlanPool("mix", reason="its nodes run the single MIG strategy")]
    result = plan(Problem(nodes, demand, pools))
    assert {n.config_after for n in result.nodes} == {"all-3g.40gb"}
    assert [s.sentence for s in result.shortfalls] == [
        "16 of 16 x nvidia.com/mig-1g.10gb cannot be served in pool mix (asked by: team-dev)."
    ]
    assert result.notes == [
        "Pool mix would need two layouts to cover more of its demand (all-3g.40gb on 1 node "
        "and all-balanced on 1 node), but it takes one layout: its nodes run the single MIG "
        "strategy. Allow mixed layouts in the pool, or give that demand a pool of its own."
    ]
    mixed = plan(Problem(nodes, demand, [PlanPool("mix", mixed=True)]))
    assert changed(mixed) == {"n1": "all-3g.40gb", "n2": "all-balanced"}
    assert mixed.shortfalls == []


def test_a_pool_allowed_mixed_layouts_takes_one_when_a_node_runs_the_single_strategy() -> None:
    nodes = [
        PlanNode("n1", "mix", A100, 8, "all-disabled", {GPU: 8}),
        PlanNode("n2", "mix", A100, 8, "all-disabled", {GPU: 8}, strategy="single"),
    ]
    demand = [Demand(G3, 24, ("mix",)), Demand(G1, 16, ("mix",))]
    result = plan(Problem(nodes, demand, [PlanPool("mix", mixed=True)]))
    assert len({n.config_after for n in result.nodes}) == 1
    assert "its nodes do not all run the mixed MIG strategy" in result.notes[0]


def test_unhealthy_gpus_are_not_counted() -> None:
    nodes = [PlanNode("n1", "p", A100, 8, "all-disabled", {GPU: 8}, unhealthy=(2, 5))]
    result = plan(Problem(nodes, [Demand(G3, 14, ("p",), "team-a")], [PlanPool("p")]))
    assert changed(result) == {"n1": "all-3g.40gb"}
    assert result.changed[0].after == {G3: 12}
    assert [s.sentence for s in result.shortfalls] == [
        "2 of 14 x nvidia.com/mig-3g.40gb cannot be served in pool p (asked by: team-a)."
    ]


def test_a_node_held_by_another_open_request_is_left_alone() -> None:
    nodes = [
        PlanNode("n1", "p", A100, 8, "all-disabled", {GPU: 8}, busy=7),
        PlanNode("n2", "q", A100, 8, "all-disabled", {GPU: 8}),
    ]
    demand = [Demand(G3, 16, ("p", "q"), "team-a"), Demand(G3, 8, ("p",), "team-b")]
    result = plan(Problem(nodes, demand, [PlanPool("p"), PlanPool("q")]))
    assert changed(result) == {"n2": "all-3g.40gb"}
    assert "n1 is held by open request #7." in result.notes
    assert [s.sentence for s in result.shortfalls] == [
        "8 of 8 x nvidia.com/mig-3g.40gb cannot be served in pool p (asked by: team-b)."
    ]


def test_the_node_without_pods_is_changed_rather_than_evicting() -> None:
    nodes = [
        PlanNode("busy", "p", A100, 8, "all-disabled", {GPU: 8}, pods=("t/a", "t/b")),
        PlanNode("idle", "p", A100, 8, "all-disabled", {GPU: 8}),
    ]
    demand = [Demand(G3, 16, ("p",)), Demand(GPU, 8, ("p",))]
    result = plan(Problem(nodes, demand, [PlanPool("p", mixed=True)]))
    assert changed(result) == {"idle": "all-3g.40gb"}
    assert result.score == Score(lost=0, short=0, evictions=0, touched=1, stranded=0)


def test_the_least_stranding_config_is_chosen_among_equal_ones() -> None:
    nodes = [PlanNode("n1", "p", A100, 8, "all-disabled", {GPU: 8})]
    result = plan(Problem(nodes, [Demand(G2, 24, ("p",))], [PlanPool("p")]))
    # all-2g.20gb offers 3 x 2g.20gb per GPU and nothing else; all-balanced would strand
    # its 1g and 3g instances.
    assert changed(result) == {"n1": "all-2g.20gb"}
    assert result.score.stranded == 16  # the seventh compute slice of each GPU


def test_greedy_answers_without_the_exact_model_and_is_never_better() -> None:
    problem = Problem(seed_fleet(dev_node=True), seed_demand(("dev", "train")), SEED_POOLS)
    exact = plan(problem)
    greedy = plan(problem, exact=False)
    assert (greedy.solver, greedy.status, greedy.gap) == ("greedy", "greedy", None)
    assert evaluate(problem, {n.name: n.config_after for n in greedy.changed}) is not None
    assert greedy.score >= exact.score


def _brute_force(problem: Problem) -> Score:
    prepared = prepare(problem, prune=False)
    options = choices(problem)
    names = sorted(options)
    best = None
    for combo in itertools.product(*(options[n] for n in names)):
        score = evaluate(problem, dict(zip(names, combo, strict=True)), prepared)
        if score is not None and (best is None or score < best):
            best = score
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(12))
def test_the_exact_model_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    configs = [
        ("all-disabled", {GPU: 2}),
        ("all-3g.40gb", {G3: 4}),
        ("all-balanced", {G1: 4, G2: 2}),
    ]
    nodes = []
    for i in range(3):
        config, offer = rng.choice(configs)
        pods = tuple(f"t/p{i}-{k}" for k in range(rng.randint(0, 2)))
        nodes.append(
            PlanNode(
                f"n{i}",
                rng.choice(["a", "b"]),
                rng.choice([A100, H100]),
                2,
                config,
                offer,
                pods=pods,
                unhealthy=(1,) if rng.random() < 0.2 else (),
            )
        )
    pools = [PlanPool("a", mixed=rng.random() < 0.5), PlanPool("b", mixed=rng.random() < 0.5)]
    demand = [
        Demand(resource, rng.randint(0, 5), rng.choice([("a",), ("b",), ("a", "b")]))
        for resource in (GPU, G3, G2, G1)
    ]
    problem = Problem(nodes, demand, pools)
    result = plan(problem)
    assert result.status == "optimal"
    assert result.score == _brute_force(problem)
    assert evaluate(problem, {n.name: n.config_after for n in result.changed}) == result.score


def test_a_gpu_without_mig_keeps_what_it_offers_and_says_so() -> None:
    nodes = [PlanNode("l40s-01", "serve", None, 4, "", {GPU: 4})]
    result = plan(Problem(nodes, [Demand(GPU, 3, ("serve",), "team-infer")], [PlanPool("serve")]))
    assert changed(result) == {} and result.shortfalls == []
    assert result.notes == [
        "l40s-01 keeps what it offers: its GPU model has no MIG profiles in the catalog (a GPU "
        "without MIG, or one the catalog does not know)."
    ]


def fixed_fleet() -> list[PlanNode]:
    """The seed's fleet after the fix: the three A100s on all-3g.40gb, team-a's train-3g
    running on gpu-a100-03, team-b's fillers on the other two."""
    nodes = [n for n in seed_fleet() if n.name != "gpu-a100-03"]
    nodes.append(
        PlanNode(
            "gpu-a100-03",
            "train",
            A100,
            8,
            "all-3g.40gb",
            {G3: 16},
            pods=("team-a/train-3g",),
            used={G3: 1},
        )
    )
    return nodes


def test_nothing_needed_proposes_no_change() -> None:
    """Every demand is covered as the fleet stands: no node is touched, though another
    layout would strand less."""
    demand = [
        Demand(G3, 33, ("train",), "running pods", running=True),
        Demand(GPU, 8, ("h100",), "running pods", running=True),
    ]
    result = plan(Problem(fixed_fleet(), demand, SEED_POOLS))
    assert changed(result) == {} and result.shortfalls == []
    assert result.score == Score(lost=0, short=0, evictions=0, touched=0, stranded=0)


def test_after_the_fix_waiting_whole_gpus_never_un_serve_running_slices() -> None:
    """The issue's case: after the fix, with whole-GPU work waiting and cq-train promising
    40 slices, the planner proposed every A100 -> all-disabled (evicting the pods the fix
    had just started, 40 of 40 slices unserved). Running work is served first: no change."""
    demand = [
        Demand(G3, 33, ("train",), "running pods", running=True),
        Demand(GPU, 8, ("h100",), "running pods", running=True),
        Demand(G3, 7, ("train",), "nominal quota of cq-train"),
        Demand(GPU, 4, ("h100", "train"), "Pending team-b/gang-eval-worker-2"),
        Demand(GPU, 4, ("h100", "train"), "Pending team-b/gang-eval-worker-3"),
        Demand(GPU, 24, ("h100", "train"), "waiting team-b/job-big-train"),
    ]
    result = plan(Problem(fixed_fleet(), demand, SEED_POOLS))
    assert changed(result) == {}
    assert result.score.lost == 0
    # Without running work put first, trading it for the waiting GPUs scored better.
    flat = [Demand(d.resource, d.count, d.pools, d.source) for d in demand]
    assert changed(plan(Problem(fixed_fleet(), flat, SEED_POOLS))) != {}


def test_a_node_a_change_just_set_is_left_alone() -> None:
    nodes = [
        n
        if n.name != "gpu-a100-03"
        else PlanNode(n.name, n.pool, n.model, n.gpu_count, n.config, n.offer, settled="set lately")
        for n in seed_fleet()
    ]
    result = plan(Problem(nodes, seed_demand(("train",)), SEED_POOLS))
    assert "gpu-a100-03" not in changed(result) and "set lately" in result.notes
