"""Kueue's preemption and fair sharing in the demo cluster (devcluster/preemption.py), checked
against the rules in Kueue's docs (concepts/preemption) and Kueue's own messages. Not part of
the recordings: the recorded cluster ran with every policy at ``Never``."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from devcluster import __main__ as command
from devcluster import preemption
from tests.devcluster.test_kueue_recordings import (
    KUEUE,
    KueueDemo,
    conditions,
    job_body,
    spec_of,
)


def setup(demo: KueueDemo, **policies: dict[str, Any]) -> None:
    """rc-h100 and the recording's queues: rc-cq-team-a (8 GPUs, alone), rc-cq-team-b and
    rc-cq-team-c (4 GPUs each, cohort rc-research), each with ``policies[name]``."""
    for name, value in (("low", 100), ("high", 1000)):
        demo.ok(
            "POST",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"metadata": {"name": name}, "value": value},
        )
    demo.ok(
        "POST",
        f"{KUEUE}/resourceflavors",
        {"metadata": {"name": "rc-h100"}, "spec": spec_of("resourceflavor")},
    )
    demo.ok("POST", f"{KUEUE}/cohorts", {"metadata": {"name": "rc-research"}, "spec": {}})
    for name, sample in (
        ("rc-cq-team-a", "clusterqueue-empty"),
        ("rc-cq-team-b", "clusterqueue-borrowing"),
        ("rc-cq-team-c", "clusterqueue-lender"),
    ):
        spec = spec_of(sample)
        spec["preemption"].update(policies.get(name.removeprefix("rc-cq-").replace("-", "_"), {}))
        if name in policies.get("weights", {}):
            spec["fairSharing"] = {"weight": policies["weights"][name]}
        demo.ok("POST", f"{KUEUE}/clusterqueues", {"metadata": {"name": name}, "spec": spec})
    demo.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "rc-team-c"}})
    for team in ("a", "b", "c"):
        demo.ok(
            "POST",
            f"{KUEUE}/namespaces/rc-team-{team}/localqueues",
            {
                "metadata": {"name": f"rc-team-{team}-queue"},
                "spec": {"clusterQueue": f"rc-cq-team-{team}"},
            },
        )
    demo.settle()


def submit(demo: KueueDemo, team: str, name: str, gpus: int, priority_class: str) -> Any:
    body = job_body("rc-train-4gpu", f"rc-team-{team}-queue")
    body["metadata"]["name"] = name
    template = body["spec"]["template"]["spec"]
    template["priorityClassName"] = priority_class
    template["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
        "limits": {"nvidia.com/gpu": str(gpus)},
    }
    job = demo.ok("POST", f"/apis/batch/v1/namespaces/rc-team-{team}/jobs", body)
    demo.settle()
    return job


def preempted_by(demo: KueueDemo, team: str, job: str, reason: str, paths: tuple[str, str]) -> str:
    preemptor = demo.workload_of(f"rc-team-{team}", job)
    human = {
        "InClusterQueue": "prioritization in the ClusterQueue",
        "InCohortReclamation": "reclamation within the cohort",
        "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
        "InCohortFairSharing": "Fair Sharing within the cohort",
    }[reason]
    return (
        f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: "
        f"{preemptor['metadata']['labels']['kueue.x-k8s.io/job-uid']}) due to {human}; "
        f"preemptor path: {paths[0]}; preemptee path: {paths[1]}"
    )


def admitted(demo: KueueDemo, team: str, job: str) -> bool:
    return conditions(demo.workload_of(f"rc-team-{team}", job)).get("Admitted", ("",))[0] == "True"


def test_higher_priority_preempts_within_the_cluster_queue() -> None:
    demo = KueueDemo()
    setup(demo, team_a={"withinClusterQueue": "LowerPriority"})
    submit(demo, "a", "low-8", 8, "low")
    submit(demo, "a", "high-4", 4, "high")
    message = preempted_by(demo, "a", "high-4", "InClusterQueue", ("/rc-cq-team-a",) * 2)
    victim = demo.workload_of("rc-team-a", "low-8")
    assert {k: v for k, v in conditions(victim).items() if k != "PodsReady"} == {
        "QuotaReserved": (
            "False",
            "Pending",
            "couldn't assign flavors to pod set main: "
            "insufficient unused quota for nvidia.com/gpu in flavor rc-h100, 4 more needed",
        ),
        "Admitted": ("False", "NoReservation", "The workload has no reservation"),
        "Evicted": ("True", "Preempted", message),
        "Preempted": ("True", "InClusterQueue", message),
        "Requeued": ("True", "Preempted", message),
    }
    assert victim["status"]["schedulingStats"]["evictions"] == [
        {"count": 1, "reason": "Preempted", "underlyingCause": "InClusterQueue"}
    ]
    assert admitted(demo, "a", "high-4")
    assert demo.get("/apis/batch/v1/namespaces/rc-team-a/jobs/low-8")["spec"]["suspend"] is True
    events = {
        (e["involvedObject"]["name"], e["reason"], e["message"])
        for e in demo.get("/api/v1/namespaces/rc-team-a/events")["items"]
    }
    name = victim["metadata"]["name"]
    winner = demo.workload_of("rc-team-a", "high-4")
    theirs, mine = victim["spec"]["priority"], winner["spec"]["priority"]
    priorities = (
        f"preemptor effective priority: {mine} (base: {mine}, boost: 0); "
        f"preemptee effective priority: {theirs} (base: {theirs}, boost: 0)"
    )
    # As real Kueue (tests/data/kueue-samples/events-workload-story.json): the eviction's
    # event first, then Preempted with the priorities, and the preemptor told whom it took.
    said = [
        (e["reason"], e["message"])
        for e in demo.get("/api/v1/namespaces/rc-team-a/events")["items"]
        if e["involvedObject"]["name"] == name and "Preempted" in e["reason"]
    ]
    assert said == [
        ("EvictedDueToPreempted", message),
        ("Preempted", f"{message}; {priorities}"),
    ]
    assert (
        winner["metadata"]["name"],
        "PreemptedWorkload",
        f"Preempted workload rc-team-a/{name} (UID: {victim['metadata']['uid']}) in "
        f"ClusterQueue rc-cq-team-a; {priorities}",
    ) in events
    pending = "insufficient unused quota for nvidia.com/gpu in flavor rc-h100, 4 more needed"
    preemptor = winner["metadata"]["name"]
    assert (
        preemptor,
        "Pending",
        f"couldn't assign flavors to pod set main: {pending}. Pending the preemption of 1 workload(s)",
    ) in events


def test_without_a_policy_nothing_is_preempted() -> None:
    demo = KueueDemo()
    setup(demo)
    submit(demo, "a", "low-8", 8, "low")
    submit(demo, "a", "high-4", 4, "high")
    assert admitted(demo, "a", "low-8")
    assert conditions(demo.workload_of("rc-team-a", "high-4"))["QuotaReserved"] == (
        "False",
        "Pending",
        "couldn't assign flavors to pod set main: insufficient unused quota for "
        "nvidia.com/gpu in flavor rc-h100, 4 more needed",
    )


def test_equal_priority_is_preempted_only_with_lower_or_newer() -> None:
    demo = KueueDemo()
    setup(demo, team_a={"withinClusterQueue": "LowerOrNewerEqualPriority"})
    submit(demo, "a", "first", 8, "low")
    submit(demo, "a", "second", 4, "low")
    assert admitted(demo, "a", "first")  # the older one is not newer: not a candidate
    assert not admitted(demo, "a", "second")


def test_a_lender_reclaims_its_quota_from_a_borrower() -> None:
    demo = KueueDemo()
    setup(demo, team_c={"reclaimWithinCohort": "Any"})
    submit(demo, "b", "borrow-6", 6, "high")
    assert admitted(demo, "b", "borrow-6")
    submit(demo, "c", "own-4", 4, "low")
    message = preempted_by(
        demo,
        "c",
        "own-4",
        "InCohortReclamation",
        ("/rc-research/rc-cq-team-c", "/rc-research/rc-cq-team-b"),
    )
    assert conditions(demo.workload_of("rc-team-b", "borrow-6"))["Preempted"] == (
        "True",
        "InCohortReclamation",
        message,
    )
    assert admitted(demo, "c", "own-4")
    assert not admitted(demo, "b", "borrow-6")
    status = demo.get(f"{KUEUE}/clusterqueues/rc-cq-team-b")["status"]
    assert (status["pendingWorkloads"], status["admittedWorkloads"]) == (1, 0)


def test_lower_priority_reclaim_spares_higher_priority_borrowers() -> None:
    demo = KueueDemo()
    setup(demo, team_c={"reclaimWithinCohort": "LowerPriority"})
    submit(demo, "b", "borrow-6", 6, "high")
    submit(demo, "c", "own-4", 4, "low")
    assert admitted(demo, "b", "borrow-6")
    assert not admitted(demo, "c", "own-4")


def test_borrowing_while_preempting_a_lower_priority_borrower() -> None:
    demo = KueueDemo()
    policy = {
        "reclaimWithinCohort": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority"},
    }
    setup(demo, team_b=policy)
    submit(demo, "c", "low-6", 6, "low")  # team-c borrows 2 of team-b's
    submit(demo, "b", "high-6", 6, "high")  # team-b needs its 4 back and 2 more
    message = preempted_by(
        demo,
        "b",
        "high-6",
        "InCohortReclaimWhileBorrowing",
        ("/rc-research/rc-cq-team-b", "/rc-research/rc-cq-team-c"),
    )
    assert conditions(demo.workload_of("rc-team-c", "low-6"))["Evicted"] == (
        "True",
        "Preempted",
        message,
    )
    assert admitted(demo, "b", "high-6")


def test_fair_sharing_shares_and_preemption() -> None:
    demo = KueueDemo(fair_sharing=True)
    setup(
        demo,
        team_b={"reclaimWithinCohort": "Any"},
        team_c={"reclaimWithinCohort": "Any"},
        weights={"rc-cq-team-b": "2"},
    )
    submit(demo, "b", "borrow-6", 6, "high")
    # team-b borrows 2 of the 8 GPUs the cohort can lend, at weight 2: 2 / 8 / 2 * 1000.
    status = demo.get(f"{KUEUE}/clusterqueues/rc-cq-team-b")["status"]
    assert status["fairSharing"] == {"weightedShare": 125}
    assert demo.get(f"{KUEUE}/clusterqueues/rc-cq-team-c")["status"]["fairSharing"] == {
        "weightedShare": 0
    }
    assert demo.get(f"{KUEUE}/cohorts/rc-research")["status"] == {
        "fairSharing": {"weightedShare": 0}
    }
    submit(demo, "c", "own-4", 4, "low")
    message = preempted_by(
        demo,
        "c",
        "own-4",
        "InCohortFairSharing",
        ("/rc-research/rc-cq-team-c", "/rc-research/rc-cq-team-b"),
    )
    assert conditions(demo.workload_of("rc-team-b", "borrow-6"))["Preempted"] == (
        "True",
        "InCohortFairSharing",
        message,
    )
    assert admitted(demo, "c", "own-4")
    assert demo.get(f"{KUEUE}/clusterqueues/rc-cq-team-b")["status"]["fairSharing"] == {
        "weightedShare": 0
    }


def test_a_share_is_rounded_up_and_counted_per_resource_across_flavors() -> None:
    """As real Kueue reported on the real tier (cq-train, weight 80, borrowing 4 of the
    cohort's 16 lendable GPUs: 4 / 16 * 1000 / 80 = 3.125, reported 4): the share is rounded
    up, and a resource's use beyond nominal and what the cohort lends of it are summed over
    its flavors."""

    def cq(cohort: str, weight: str, flavors: dict[str, int]) -> dict[str, Any]:
        resources = [
            {"name": name, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(n)}]}
            for name, n in flavors.items()
        ]
        return {
            "spec": {
                "cohortName": cohort,
                "fairSharing": {"weight": weight},
                "resourceGroups": [{"flavors": resources}],
            }
        }

    cqs = {
        "train": cq("fleet", "80", {"h100": 12}),
        "infer": cq("fleet", "20", {"h100": 4}),
    }
    usage = {
        "train": {("h100", "nvidia.com/gpu"): Fraction(16)},
        "infer": {("h100", "nvidia.com/gpu"): Fraction(0)},
    }
    assert preemption.share("train", cqs, usage) == 4
    assert preemption.share("infer", cqs, usage) == 0
    # Two flavors of one resource: 2 over in each is 4 over 16 + 8 lendable, at weight 1.
    cqs = {"a": cq("fleet", "1", {"h100": 8, "a100": 8}), "b": cq("fleet", "1", {"h100": 8})}
    usage = {
        "a": {("h100", "nvidia.com/gpu"): Fraction(10), ("a100", "nvidia.com/gpu"): Fraction(10)},
        "b": {("h100", "nvidia.com/gpu"): Fraction(0)},
    }
    assert preemption.share("a", cqs, usage) == 167  # 4 / 24 * 1000 = 166.67, rounded up


def test_the_run_command_starts_the_demo_with_fair_sharing_on(monkeypatch: Any) -> None:
    """``python -m devcluster --fair-sharing`` (as ``dev.py run`` starts it) turns Kueue's
    fair sharing on; without the flag it stays off, as in Kueue's default configuration."""
    started: list[Any] = []

    def start(**kwargs: Any) -> Any:
        started.append(kwargs["options"])
        raise SystemExit(0)  # the test only reads the options the command chose

    monkeypatch.setattr(command, "start", start)
    for argv in (["--port", "0", "--fair-sharing"], ["--port", "0"]):
        with pytest.raises(SystemExit):
            command.main(argv)
    assert [options.fair_sharing for options in started] == [True, False]


def test_a_workload_admitted_ahead_of_its_queues_head_is_never_preempted_unrun() -> None:
    """Finding 6: Kueue takes one head per ClusterQueue, in priority order, and preempts
    only what it admitted before. team-b (4 GPUs) runs high-1; its high-4 waits while
    team-c uses all 4 of its own; one of team-c's Jobs goes as team-b's low-2 arrives. Kueue
    admits high-4, its head (borrowing 1), and low-2 waits behind it. The demo admitted
    low-2 first (it fits within nominal quota) and had high-4 preempt it in the same pass:
    a workload that never ran was marked ``Evicted`` ``Preempted``, an eviction counted."""
    demo = KueueDemo()
    setup(demo, team_b={"withinClusterQueue": "LowerPriority"})
    submit(demo, "b", "high-1", 1, "high")
    submit(demo, "c", "lend-1", 1, "low")
    submit(demo, "c", "lend-3", 3, "low")
    submit(demo, "b", "high-4", 4, "high")
    assert not admitted(demo, "b", "high-4")
    demo.ok("DELETE", "/apis/batch/v1/namespaces/rc-team-c/jobs/lend-1")
    body = job_body("rc-train-4gpu", "rc-team-b-queue")
    body["metadata"]["name"] = "low-2"
    template = body["spec"]["template"]["spec"]
    template["priorityClassName"] = "low"
    template["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }
    demo.ok("POST", "/apis/batch/v1/namespaces/rc-team-b/jobs", body)
    demo.settle()
    assert admitted(demo, "b", "high-4")
    low = demo.workload_of("rc-team-b", "low-2")
    assert not admitted(demo, "b", "low-2")
    assert "Evicted" not in conditions(low) and "Preempted" not in conditions(low)
    assert "schedulingStats" not in low["status"]


def test_kueue_names_the_first_resource_it_cannot_assign_alone() -> None:
    """Finding 7: Kueue assigns a pod set's resources one by one and stops at the first it
    cannot (a Go map's order; here by name): its message names that one alone. The demo's
    said "resource cpu unavailable in ClusterQueue" and the GPU shortage together."""
    demo = KueueDemo()
    setup(demo)
    spec = spec_of("clusterqueue-empty")
    group = spec["resourceGroups"][0]
    group["coveredResources"] = ["nvidia.com/gpu"]
    group["flavors"][0]["resources"] = [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]
    demo.ok(
        "PUT",
        f"{KUEUE}/clusterqueues/rc-cq-team-a",
        {**demo.get(f"{KUEUE}/clusterqueues/rc-cq-team-a"), "spec": spec},
    )
    submit(demo, "a", "gpu-7", 7, "low")
    unavailable = (
        "couldn't assign flavors to pod set main: resource cpu unavailable in ClusterQueue"
    )
    for name, gpus in (("cpu-2", 2), ("cpu-1", 1)):
        submit(demo, "a", name, gpus, "low")
        waiting = conditions(demo.workload_of("rc-team-a", name))["QuotaReserved"]
        assert waiting == ("False", "Pending", unavailable)
