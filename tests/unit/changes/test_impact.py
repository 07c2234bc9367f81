"""Impact verdicts on hand-built fleets (no database)."""

from __future__ import annotations

from changes.impact import (
    CapacityChange,
    Eviction,
    FlavorCapacity,
    Fleet,
    NamespaceQuota,
    NodeFacts,
    PodFacts,
    PoolFacts,
    QueueChange,
    QueueQuota,
    Shortfall,
    assess,
    ceiling,
    flavor_shortfalls,
    what_changed,
)
from gpus.catalog import valid_configs

A100 = "A100-80GB"
POOL = {"quartermaster.io/pool": "train"}


def a100(name: str, config: str, resources: dict[str, int], state: str = "success") -> NodeFacts:
    labels = {
        **POOL,
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/mig.config": config,
    }
    return NodeFacts(name, A100, 8, config, state, labels, resources)


def seed_fleet(**extra: object) -> Fleet:
    """The seed incident: two 3g nodes, one left on 2g+1g, team-b's test pod on it."""
    nodes = [
        a100("gpu-a100-01", "all-3g.40gb", {"nvidia.com/mig-3g.40gb": 16}),
        a100("gpu-a100-02", "all-3g.40gb", {"nvidia.com/mig-3g.40gb": 16}),
        a100(
            "gpu-a100-03",
            "all-balanced",
            {"nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16},
            "failed",
        ),
    ]
    pods = [
        PodFacts(
            "team-b", "filler-0", "gpu-a100-01", "Running", {"nvidia.com/mig-3g.40gb": 16}, "team-b"
        ),
        PodFacts(
            "team-b",
            "dev-test-1g",
            "gpu-a100-03",
            "Running",
            {"nvidia.com/mig-1g.10gb": 4},
            "team-b",
        ),
        PodFacts("team-a", "train-3g", "", "Pending", {"nvidia.com/mig-3g.40gb": 1}, "team-a"),
    ]
    return Fleet(
        nodes=nodes,
        pods=pods,
        queues=[QueueQuota("cq-train", "a100-80gb-3g", "nvidia.com/mig-3g.40gb", 24)],
        flavors={
            "a100-80gb-3g": {
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "nvidia.com/mig.config": "all-3g.40gb",
            }
        },
        pools=[PoolFacts("train", POOL, "all-3g.40gb")],
        **extra,  # type: ignore[arg-type]
    )


def test_the_incident_fix_needs_a_drain_and_frees_the_pending_pod() -> None:
    result = assess(seed_fleet(), targets=["gpu-a100-03"], config="all-3g.40gb")
    assert result.verdict == "needs_drain"
    assert result.evictions == [
        Eviction("team-b", "dev-test-1g", "gpu-a100-03", "team-b", {"nvidia.com/mig-1g.10gb": 4})
    ]
    assert [s.pod for s in result.schedulable] == ["train-3g"]
    assert sorted(result.capacity, key=lambda c: c.resource) == [
        CapacityChange("nvidia.com/mig-1g.10gb", 16, 0),
        CapacityChange("nvidia.com/mig-2g.20gb", 8, 0),
        CapacityChange("nvidia.com/mig-3g.40gb", 32, 48),
    ]
    assert result.queues == [FlavorCapacity("a100-80gb-3g", "nvidia.com/mig-3g.40gb", 24, 32, 48)]
    assert "1 GPU pod of team-b must be evicted first" in result.reasons[0]
    assert any("back to its intended all-3g.40gb" in n for n in result.notes)


def test_the_stored_assessment_keeps_its_json_shape() -> None:
    """Requests store ``as_json()``; pages, the API and the executor read those keys."""
    stored = assess(seed_fleet(), targets=["gpu-a100-03"], config="all-3g.40gb").as_json()
    assert list(stored) == [
        "verdict",
        "verdict_label",
        "drain",
        "reasons",
        "notes",
        "config",
        "nodes",
        "capacity",
        "queues",
        "proposed_queue_changes",
        "evictions",
        "schedulable",
        "fingerprint",
        "teams_hit",
        "version",  # 2: a stored row without it is version 1, read the same
    ]
    assert stored["verdict_label"] == "Needs a drain"
    assert stored["nodes"] == [
        {
            "name": "gpu-a100-03",
            "model": "A100-80GB",
            "gpu_count": 8,
            "config_before": "all-balanced",
            "state_before": "failed",
            "before": {"nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16},
            "after": {"nvidia.com/mig-3g.40gb": 16},
        }
    ]
    assert stored["evictions"] == [
        {
            "namespace": "team-b",
            "pod": "dev-test-1g",
            "node": "gpu-a100-03",
            "team": "team-b",
            "resources": {"nvidia.com/mig-1g.10gb": 4},
            # Not read (no cluster facts in this fleet): nothing is claimed of its work.
            "outcome": "",
            "ends_work": None,
            "budget": "",
            "budget_allows": None,
        }
    ]
    assert stored["schedulable"] == [
        {
            "namespace": "team-a",
            "pod": "train-3g",
            "team": "team-a",
            "resources": {"nvidia.com/mig-3g.40gb": 1},
            "node": "gpu-a100-03",
        }
    ]


def test_removing_capacity_a_queue_promises_breaks_quota() -> None:
    fleet = seed_fleet()
    result = assess(fleet, targets=["gpu-a100-01", "gpu-a100-02"], config="all-balanced")
    assert result.verdict == "breaks_quota"
    assert (
        "Queues promise 24 mig-3g.40gb on flavor a100-80gb-3g (cq-train (24))" in result.reasons[0]
    )
    assert "offer 0 (now 32)" in result.reasons[0]
    assert result.proposed_queue_changes == [
        QueueChange("cq-train", "a100-80gb-3g", "nvidia.com/mig-3g.40gb", 24, 0)
    ]
    assert result.as_json()["proposed_queue_changes"] == [
        {
            "cluster_queue": "cq-train",
            "flavor": "a100-80gb-3g",
            "resource": "nvidia.com/mig-3g.40gb",
            "from": 24,
            "to": 0,
        }
    ]
    assert any("would mix MIG layouts" not in n for n in result.notes)


def test_a_team_quota_left_without_capacity_breaks_quota() -> None:
    fleet = seed_fleet(quotas=[NamespaceQuota("team-dev", "team-dev", "nvidia.com/mig-2g.20gb", 8)])
    result = assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb")
    assert result.verdict == "breaks_quota"
    assert (
        result.reasons[0]
        == "team-dev's quota allows 8 mig-2g.20gb in team-dev, but the fleet would offer 0."
    )


def test_an_idle_node_change_is_safe() -> None:
    fleet = seed_fleet()
    fleet.pods = []
    result = assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb")
    assert result.verdict == "safe"


def test_pool_mixing_is_called_out() -> None:
    fleet = seed_fleet()
    fleet.pods = []
    result = assess(fleet, targets=["gpu-a100-02"], config="all-7g.80gb")
    assert any("Pool train would mix MIG layouts" in n for n in result.notes)
    assert any("intends all-3g.40gb; this moves 1 node away" in n for n in result.notes)


def test_blocked_verdicts() -> None:
    fleet = seed_fleet(busy={"gpu-a100-03": 7})
    assert assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb").reasons[0] == (
        "gpu-a100-03 is already part of open request #7."
    )
    checks = [
        (("gpu-a100-09",), "all-3g.40gb", "Not in the fleet (or gone): gpu-a100-09."),
        (("gpu-a100-01",), "all-1g.5gb", "cannot be applied to A100-80GB"),
        (("gpu-a100-02",), "all-1g.35gb", "matches none of gpu-a100-02's A100-80GB GPUs"),
        (("gpu-a100-01", "gpu-a100-02"), "all-3g.40gb", "Every node is already on all-3g.40gb"),
        ((), "all-3g.40gb", "Choose at least one node."),
        (("gpu-a100-01",), "no-such-config", "There is no MIG config named no-such-config."),
    ]
    for targets, config, reason in checks:
        result = assess(seed_fleet(), targets=list(targets), config=config)
        assert result.verdict == "blocked", targets
        assert any(reason in r for r in result.reasons), result.reasons


def test_only_configs_valid_for_the_model_are_offered() -> None:
    node = seed_fleet().nodes[0]
    offered = valid_configs(node=node.name, model=node.model, gpu_count=8, custom={})
    assert {"all-3g.40gb", "all-balanced", "all-disabled", "all-1g.10gb", "all-7g.80gb"} <= set(
        offered
    )
    assert (
        "all-1g.5gb" not in offered and "all-1g.35gb" not in offered and "all-1g.6gb" not in offered
    )


def test_custom_configs_are_offered_for_their_model_only() -> None:
    fleet = seed_fleet(
        custom_configs={
            "train-4g3g": ("A100-80GB", {"4g.40gb": 1, "3g.40gb": 1}),
            "h100-only": ("H100-80GB", {"7g.80gb": 1}),
        }
    )
    offered = valid_configs(
        node="gpu-a100-01", model=A100, gpu_count=8, custom=fleet.custom_configs
    )
    assert "train-4g3g" in offered and "h100-only" not in offered
    result = assess(fleet, targets=["gpu-a100-03"], config="train-4g3g")
    assert result.nodes[0].after == {"nvidia.com/mig-4g.40gb": 8, "nvidia.com/mig-3g.40gb": 8}


def test_fleet_wide_check_flags_flavors_promised_beyond_capacity() -> None:
    fleet = seed_fleet()
    assert flavor_shortfalls(fleet) == []  # 24 promised, 32 offered
    fleet.queues = [
        *fleet.queues,
        QueueQuota("cq-infer", "a100-80gb-3g", "nvidia.com/mig-3g.40gb", 16),
    ]
    assert flavor_shortfalls(fleet) == [
        Shortfall(
            "a100-80gb-3g", "nvidia.com/mig-3g.40gb", 40, 32, ["cq-train (24)", "cq-infer (16)"]
        )
    ]


def test_all_enabled_is_assessed_as_offering_nothing() -> None:
    h100 = NodeFacts(
        "gpu-h100-01",
        "H100-80GB",
        8,
        "all-disabled",
        "success",
        {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/mig.config": "all-disabled",
        },
        {"nvidia.com/gpu": 8},
    )
    fleet = Fleet(
        nodes=[h100],
        pods=[
            PodFacts("team-a", "train-0", "gpu-h100-01", "Running", {"nvidia.com/gpu": 4}, "team-a")
        ],
        queues=[QueueQuota("cq-train", "h100-80gb", "nvidia.com/gpu", 12)],
        flavors={"h100-80gb": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
    )
    result = assess(fleet, targets=["gpu-h100-01"], config="all-enabled")
    assert result.nodes[0].after == {}
    assert [(c.resource, c.before, c.after) for c in result.capacity] == [("nvidia.com/gpu", 8, 0)]
    assert result.verdict == "breaks_quota"
    assert "after the change its nodes offer 0 (now 8)" in result.reasons[0]
    assert result.notes[0].startswith("On all-enabled, gpu-h100-01 would offer no GPU at all")
    assert [e.pod for e in result.evictions] == ["train-0"]


def test_a_drain_that_leaves_promises_unbacked_breaks_quota_like_a_mig_change() -> None:
    result = assess(seed_fleet(), targets=["gpu-a100-01"], config="", drain=True)
    assert result.verdict == "breaks_quota"
    assert any(
        "Queues promise 24 mig-3g.40gb on flavor a100-80gb-3g" in r and "offer 16 (now 32)" in r
        for r in result.reasons
    )
    assert result.proposed_queue_changes == []  # the node comes back once repaired
    assert "stay cordoned until an admin returns them" in result.notes[-1]


def test_the_ceiling_counts_every_gpu_whatever_its_model() -> None:
    unknown = NodeFacts("gpu-l4-01", None, 4, "", "", {}, {"nvidia.com/gpu": 4})
    fleet = Fleet(
        nodes=[a100("gpu-a100-01", "all-3g.40gb", {"nvidia.com/mig-3g.40gb": 16}), unknown]
    )
    assert ceiling(fleet, "nvidia.com/gpu") == 12  # 8 A100s with MIG off, 4 L4s
    assert ceiling(fleet, "nvidia.com/mig-3g.40gb") == 16  # 2 per A100 80GB, none on an L4
    assert ceiling(fleet, "nvidia.com/mig-1g.10gb") == 56


BALANCED = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/mig.config": "all-balanced",
}


def incident_with_dev_queue() -> Fleet:
    """The seed fleet plus cq-dev's promises on the balanced flavor: its 3g.40gb promise is
    unbacked already (the failed layout made no 3g instance)."""
    fleet = seed_fleet()
    fleet.flavors = {**fleet.flavors, "a100-80gb-balanced": BALANCED}
    fleet.queues = [
        *fleet.queues,
        QueueQuota("cq-dev", "a100-80gb-balanced", "nvidia.com/mig-1g.10gb", 16),
        QueueQuota("cq-dev", "a100-80gb-balanced", "nvidia.com/mig-3g.40gb", 8),
    ]
    return fleet


def test_a_promise_already_unbacked_on_a_touched_flavor_is_shown_and_fixed() -> None:
    result = assess(incident_with_dev_queue(), targets=["gpu-a100-03"], config="all-3g.40gb")
    assert FlavorCapacity("a100-80gb-balanced", "nvidia.com/mig-3g.40gb", 8, 0, 0) in (
        result.queues
    )
    assert QueueChange("cq-dev", "a100-80gb-balanced", "nvidia.com/mig-3g.40gb", 8, 0) in (
        result.proposed_queue_changes
    )
    assert any(
        n.startswith("Already unbacked: queues promise 8 mig-3g.40gb on flavor a100-80gb-balanced")
        for n in result.notes
    )
    # The 1g slices this change removes are what breaks quota; the old shortfall is a note.
    assert result.verdict == "breaks_quota"
    assert not any("mig-3g.40gb on flavor a100-80gb-balanced" in r for r in result.reasons)


def test_a_flavor_the_change_does_not_touch_is_left_to_the_fleet_page() -> None:
    fleet = incident_with_dev_queue()
    result = assess(fleet, targets=["gpu-a100-02"], config="all-1g.10gb")
    assert all(q.flavor != "a100-80gb-balanced" for q in result.queues)


def test_the_fingerprint_follows_what_the_approver_reads_and_ignores_waiting_pods() -> None:
    fleet = seed_fleet()
    first = assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb")
    fleet.pods = [
        *fleet.pods,
        PodFacts("team-a", "train-3g-2", "", "Pending", {"nvidia.com/mig-3g.40gb": 1}, "team-a"),
    ]
    assert assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb").fingerprint == (
        first.fingerprint
    )
    fleet.pods = [
        *fleet.pods,
        PodFacts("team-b", "late", "gpu-a100-03", "Running", {"nvidia.com/mig-2g.20gb": 1}),
    ]
    second = assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb")
    assert second.fingerprint != first.fingerprint
    assert what_changed(first.as_json(), second.as_json()) == (
        "The fleet changed since you read the assessment: 2 GPU pods would be evicted (was 1)."
    )
    fleet.queues = [QueueQuota("cq-train", "a100-80gb-3g", "nvidia.com/mig-3g.40gb", 60)]
    third = assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb")
    assert third.fingerprint != second.fingerprint
    # 60 promised where 48 will exist: already unbacked (32 now), so fixed by the request.
    assert what_changed(second.as_json(), third.as_json()).endswith(
        "the queue quota changes it carries are different."
    )
    assert third.proposed_queue_changes == [
        QueueChange("cq-train", "a100-80gb-3g", "nvidia.com/mig-3g.40gb", 60, 48)
    ]


def test_a_flavors_ceiling_counts_the_nodes_it_could_ever_select() -> None:
    from changes.impact import flavor_ceiling

    fleet = seed_fleet()
    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.config": "x"}
    # Three A100 nodes of 8 GPUs: 2 x 3g.40gb per GPU in the best layout, whatever they
    # run now (a MIG change can bring any of them under the flavor's layout label).
    assert flavor_ceiling(fleet, labels, "nvidia.com/mig-3g.40gb") == 48
    assert flavor_ceiling(fleet, {"nvidia.com/gpu.product": "H100"}, "nvidia.com/gpu") == 0
