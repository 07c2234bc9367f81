"""What the assessment tells approvers of each eviction: whether it ends work or the work
is rescheduled, and which PodDisruptionBudget covers it and whether it will hold the drain.
Hand-built facts; the budget and the Job come from the real API server's recordings."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from changes.impact import Disruption, Fleet, PodFacts, assess, eviction_outcome
from cluster.disruption import (
    Budget,
    Owner,
    PodWork,
    budget_of,
    controller_of,
    is_kueue_pod,
    job_owner,
    label_selector_matches,
)
from tests.unit.changes.test_impact import seed_fleet

DATA = Path(__file__).resolve().parents[2] / "data"
MIG_1G = {"nvidia.com/mig-1g.10gb": 1}


def recorded(folder: str, name: str) -> dict[str, Any]:
    data = json.loads((DATA / folder / f"{name}.json").read_text())
    return dict(data["response"]["body"]) if "response" in data else dict(data)


def fleet_with(pods: list[tuple[str, str, PodWork]], budgets: Sequence[Budget] = ()) -> Fleet:
    """The seed fleet, gpu-a100-03 carrying ``pods`` (namespace, name, work) only."""
    fleet = seed_fleet()
    fleet.pods = [p for p in fleet.pods if p.node != "gpu-a100-03"] + [
        PodFacts(ns, name, "gpu-a100-03", "Running", MIG_1G, ns) for ns, name, _ in pods
    ]
    fleet.disruption = Disruption(
        pods={(ns, name): work for ns, name, work in pods}, budgets=list(budgets)
    )
    return fleet


def test_the_recorded_budget_decodes_with_its_controllers_counts() -> None:
    budget = budget_of(recorded("k8s-api-samples", "g2b-pdb-status"))
    assert (budget.ref, budget.min_available, budget.max_unavailable) == (
        "team-d/serving-pdb",
        "2",
        "",
    )
    assert (
        budget.disruptions_allowed,
        budget.current_healthy,
        budget.desired_healthy,
        budget.expected_pods,
    ) == (0, 2, 2, 3)
    assert budget.covers("team-d", {"app": "serving", "pod-template-hash": "x"})
    assert not budget.covers("team-d", {"app": "batch"})
    assert not budget.covers("team-a", {"app": "serving"})


def test_the_recorded_kueue_job_fails_on_its_first_eviction() -> None:
    job = recorded("kueue-samples", "job-4gpu-admitted")
    pod = recorded("kueue-samples", "pod-4gpu-bound")
    assert controller_of(pod) == ("Job", "rc-train-4gpu")
    assert is_kueue_pod(pod)  # Kueue's local-queue label and workload annotation
    owner = job_owner(job, kueue_pod=is_kueue_pod(pod))
    assert (owner.backoff_limit, owner.failed, owner.kueue) == (0, 0, True)
    assert eviction_outcome(owner) == (
        True,
        "Job rc-train-4gpu fails (backoffLimit 0); Kueue finishes its Workload as Failed",
    )


@pytest.mark.parametrize(
    ("owner", "outcome"),
    [
        (Owner(), (True, "deleted, nothing recreates it")),
        (
            Owner("ReplicaSet", "serve-7d9f"),
            (False, "rescheduled: ReplicaSet serve-7d9f creates a new pod"),
        ),
        (Owner("StatefulSet", "db"), (False, "rescheduled: StatefulSet db creates a new pod")),
        (Owner("DaemonSet", "probe"), (False, "recreated on the same node by DaemonSet probe")),
        (
            Owner("Job", "sweep", backoff_limit=6, failed=0),
            (
                False,
                "rescheduled: Job sweep starts a new pod (failure 1 of the 6 its backoffLimit "
                "allows)",
            ),
        ),
        (
            Owner("Job", "sweep", backoff_limit=2, failed=2),
            (True, "Job sweep fails (backoffLimit 2)"),
        ),
        (
            Owner("Job", "sweep", backoff_limit=0, on_disruption="Ignore"),
            (
                False,
                "rescheduled: Job sweep starts a new pod (its podFailurePolicy ignores "
                "disruptions)",
            ),
        ),
        (
            Owner("Job", "sweep", backoff_limit=6, on_disruption="FailJob"),
            (True, "Job sweep fails (its podFailurePolicy fails it on a disruption)"),
        ),
        (
            Owner("Job", "sweep", unread="it is gone"),
            (None, "Job sweep could not be read (it is gone)"),
        ),
        (
            Owner("RayCluster", "ray"),
            (None, "its owner RayCluster ray decides whether it comes back"),
        ),
    ],
)
def test_each_owner_says_what_an_eviction_does_to_its_work(
    owner: Owner, outcome: tuple[bool | None, str]
) -> None:
    assert eviction_outcome(owner) == outcome


def test_a_job_past_its_retries_and_a_bare_pod_are_named_as_ending_work() -> None:
    fleet = fleet_with(
        [
            ("team-b", "dev-test-1g", PodWork({"app": "dev-test"}, Owner())),
            ("team-b", "sweep-x1", PodWork({"app": "sweep"}, Owner("Job", "sweep", 0, 0))),
            ("team-b", "web-abc", PodWork({"app": "web"}, Owner("ReplicaSet", "web-5c"))),
        ]
    )
    result = assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb")
    assert result.verdict == "needs_drain"
    assert result.reasons[:2] == [
        "3 GPU pods of team-b must be evicted first (MIG Manager fails on a GPU in use).",
        "Evicting ends work: team-b/dev-test-1g — deleted, nothing recreates it; "
        "team-b/sweep-x1 — Job sweep fails (backoffLimit 0).",
    ]
    rows = {e["pod"]: e for e in result.as_json()["evictions"]}
    assert rows["web-abc"]["outcome"] == "rescheduled: ReplicaSet web-5c creates a new pod"
    assert (rows["web-abc"]["ends_work"], rows["dev-test-1g"]["ends_work"]) == (False, True)


def test_a_budget_allowing_no_disruption_says_the_drain_will_be_blocked() -> None:
    budget = budget_of(
        {
            **recorded("k8s-api-samples", "g2b-pdb-status"),
            "metadata": {"name": "serving-pdb", "namespace": "team-b"},
        }
    )
    serve = PodWork({"app": "serving"}, Owner("ReplicaSet", "serve-6f"))
    fleet = fleet_with([("team-b", "serve-0", serve)], [budget])
    result = assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb")
    assert result.reasons[1] == (
        "The drain will be blocked: PodDisruptionBudget team-b/serving-pdb allows no "
        "disruption now (2 healthy, 2 needed), so team-b/serve-0 cannot be evicted; the change "
        "waits at evict and fails after the eviction timeout unless the budget allows it by "
        "then."
    )
    (row,) = result.as_json()["evictions"]
    assert (row["budget"], row["budget_allows"]) == ("team-b/serving-pdb", 0)


def test_a_budget_allowing_fewer_disruptions_than_pods_to_evict_says_the_rest_wait() -> None:
    budget = budget_of(
        {
            "metadata": {"name": "serving", "namespace": "team-b"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "serving"}}},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2},
        }
    )
    serve = PodWork({"app": "serving"}, Owner("ReplicaSet", "serve-6f"))
    fleet = fleet_with([("team-b", "serve-0", serve), ("team-b", "serve-1", serve)], [budget])
    result = assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb")
    assert result.reasons[1] == (
        "PodDisruptionBudget team-b/serving allows 1 disruption now and covers 2 of the pods "
        "to evict (team-b/serve-0, team-b/serve-1): the rest wait until their replacements "
        "are healthy."
    )


def test_what_could_not_be_read_is_a_note_and_changes_no_verdict() -> None:
    fleet = seed_fleet()
    fleet.disruption = Disruption(unread="cannot reach the Kubernetes API: timed out")
    result = assess(fleet, targets=["gpu-a100-03"], config="all-3g.40gb")
    assert result.verdict == "needs_drain"
    assert result.notes[-1] == (
        "Whether the evictions end work or are held by a PodDisruptionBudget could not be "
        "read: cannot reach the Kubernetes API: timed out"
    )


def test_label_selectors_match_as_the_api_server_matches_them() -> None:
    labels = {"app": "serving", "tier": "gpu"}
    assert label_selector_matches({}, labels)  # empty: every pod of the namespace
    assert not label_selector_matches({"none": True}, labels)  # no selector: none
    assert label_selector_matches(
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu", "cpu"]}]},
        labels,
    )
    assert not label_selector_matches(
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gpu"]}]}, labels
    )
    assert label_selector_matches(
        {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, labels
    )
    assert not label_selector_matches(
        {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, labels
    )
    assert (
        budget_of({"metadata": {"name": "b", "namespace": "n"}, "spec": {}}).covers("n", labels)
        is False
    )
