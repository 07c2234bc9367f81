"""The explainer's exact sentences for the causes the demo cluster produces."""

from __future__ import annotations

import dataclasses
import datetime as dt
from types import SimpleNamespace

from diagnostics.explain import (
    FleetView,
    explain_pod,
    explain_workload,
    fleet_view,
    parse_failed_scheduling,
)

E1 = (
    "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient nvidia.com/mig-3g.40gb. "
    "no new claims to deallocate, preemption: 0/5 nodes are available: 2 No preemption victims found for "
    "incoming pod, 3 Preemption is not helpful for scheduling."
)
OLD = (
    "0/15 nodes are available: 10 node(s) didn't match Pod's node affinity/selector, 5 Insufficient "
    "nvidia.com/gpu. preemption: 0/15 nodes are available: 10 Preemption is not helpful for scheduling, "
    "5 No preemption victims found for incoming pod."
)

INCIDENT = FleetView(
    offered={
        "nvidia.com/mig-3g.40gb": 32,
        "nvidia.com/mig-2g.20gb": 8,
        "nvidia.com/mig-1g.10gb": 16,
        "nvidia.com/gpu": 16,
    },
    free={
        "nvidia.com/mig-3g.40gb": 0,
        "nvidia.com/mig-2g.20gb": 8,
        "nvidia.com/mig-1g.10gb": 12,
        "nvidia.com/gpu": 16,
    },
    offered_by_node={
        "gpu-a100-01": {"nvidia.com/mig-3g.40gb": 16},
        "gpu-a100-02": {"nvidia.com/mig-3g.40gb": 16},
        "gpu-a100-03": {"nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16},
        "gpu-h100-01": {"nvidia.com/gpu": 8},
        "gpu-h100-02": {"nvidia.com/gpu": 8},
    },
    intended={
        "gpu-a100-01": "all-3g.40gb",
        "gpu-a100-02": "all-3g.40gb",
        "gpu-a100-03": "all-3g.40gb",
    },
    promised_by_intended={
        n: {"nvidia.com/mig-3g.40gb": 16} for n in ("gpu-a100-01", "gpu-a100-02", "gpu-a100-03")
    },
    current_config={
        "gpu-a100-01": "all-3g.40gb",
        "gpu-a100-02": "all-3g.40gb",
        "gpu-a100-03": "all-balanced",
    },
    drift_since={"gpu-a100-03": "Nov 30, 10:42 UTC"},
    tainted=["nvidia.com/gpu=present:NoSchedule on gpu-h100-01, gpu-h100-02"],
)


def test_parses_new_and_old_scheduler_messages() -> None:
    new = parse_failed_scheduling(E1)
    assert new is not None and (new.nodes, new.insufficient, new.untolerated_taint) == (
        5,
        {"nvidia.com/mig-3g.40gb": 3},
        2,
    )
    old = parse_failed_scheduling(OLD)
    assert old is not None and (old.nodes, old.insufficient, old.selector_mismatch) == (
        15,
        {"nvidia.com/gpu": 5},
        10,
    )
    assert parse_failed_scheduling("something else") is None


def test_the_seed_incident_points_at_the_drifted_node() -> None:
    result = explain_pod(
        namespace="team-a",
        name="train-3g",
        requests={"nvidia.com/mig-3g.40gb": 1},
        message=E1,
        fleet=INCIDENT,
    )
    assert result.cause == (
        "All 32 mig-3g.40gb in the fleet are in use (0 free, the pod needs 1): gpu-a100-03 would offer 16 "
        "more but was changed to all-balanced instead of its pool's all-3g.40gb "
        "(drift since Nov 30, 10:42 UTC)."
    )
    assert result.next_step == "Ask for a MIG change that puts gpu-a100-03 back on all-3g.40gb."
    assert result.action == {
        "label": "Ask for a MIG change",
        "url": "/changes/new/?nodes=gpu-a100-03&target_config=all-3g.40gb",
    }
    assert result.evidence == [E1]
    # Who set the label, when managedFields say so.
    who = explain_pod(
        namespace="team-a",
        name="train-3g",
        requests={"nvidia.com/mig-3g.40gb": 1},
        message=E1,
        fleet=dataclasses.replace(INCIDENT, changed_by={"gpu-a100-03": "kubectl-label"}),
    )
    assert "was changed to all-balanced by kubectl-label instead of its pool's" in who.cause


def test_a_node_being_reconfigured_is_named() -> None:
    fleet = dataclasses.replace(INCIDENT, changing={"gpu-a100-03": 12})
    result = explain_pod(
        namespace="team-a",
        name="train-3g",
        requests={"nvidia.com/mig-3g.40gb": 1},
        message=E1,
        fleet=fleet,
    )
    assert result.cause.endswith("gpu-a100-03 is being reconfigured to all-3g.40gb by request #12.")


def test_mig_profile_nobody_offers() -> None:
    message = "0/5 nodes are available: 5 Insufficient nvidia.com/mig-4g.40gb. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    result = explain_pod(
        namespace="team-a",
        name="p",
        requests={"nvidia.com/mig-4g.40gb": 1},
        message=message,
        fleet=INCIDENT,
    )
    assert (
        result.cause
        == "No node offers nvidia.com/mig-4g.40gb. The fleet offers mig-1g.10gb, mig-2g.20gb, mig-3g.40gb."
    )


def test_too_many_gpus_for_one_node() -> None:
    message = "0/5 nodes are available: 5 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    result = explain_pod(
        namespace="team-a",
        name="train-16gpu",
        requests={"nvidia.com/gpu": 16},
        message=message,
        fleet=INCIDENT,
    )
    assert result.cause == "The pod asks for 16 gpu on one node; the largest node offers 8."


def test_every_gpu_in_use() -> None:
    fleet = dataclasses.replace(
        INCIDENT, free={**INCIDENT.free, "nvidia.com/gpu": 0}, promised_by_intended={}
    )
    message = "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 node(s) didn't match Pod's node affinity/selector."
    result = explain_pod(
        namespace="team-a", name="p", requests={"nvidia.com/gpu": 2}, message=message, fleet=fleet
    )
    assert result.cause == "All 16 gpu in the fleet are in use (0 free, the pod needs 2)."


def test_untolerated_taint() -> None:
    message = "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    result = explain_pod(
        namespace="team-a",
        name="train-no-toleration",
        requests={"nvidia.com/gpu": 1},
        message=message,
        fleet=INCIDENT,
    )
    assert result.cause == (
        "2 node(s) with the resources carry taints the pod does not tolerate "
        "(nvidia.com/gpu=present:NoSchedule on gpu-h100-01, gpu-h100-02)."
    )


def test_queue_quota_short_and_beyond_maximum() -> None:
    short = explain_workload(
        namespace="team-b",
        name="job-big-train",
        queue="team-b-train",
        reason="Pending",
        message="couldn't assign flavors to pod set main: insufficient unused quota for "
        "nvidia.com/gpu in flavor h100-80gb, 4 more needed",
    )
    assert (
        short.cause
        == "Queue team-b-train has no unused quota for nvidia.com/gpu in flavor h100-80gb: 4 more needed."
    )
    assert short.action == {"label": "Ask for quota", "url": "/quota/new/"}
    too_big = explain_workload(
        namespace="team-a",
        name="j",
        queue="team-a-train",
        reason="Pending",
        message="couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, "
        "previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)",
    )
    assert too_big.cause == (
        "The workload asks for more nvidia.com/gpu in flavor h100 than queue team-a-train "
        "can ever give (at most 8)."
    )
    missing = explain_workload(
        namespace="team-b",
        name="j",
        queue="team-b-train",
        reason="Inadmissible",
        message="LocalQueue team-b-train doesn't exist",
    )
    assert missing.cause == "LocalQueue team-b-train doesn't exist in namespace team-b."


def test_a_workload_says_its_place_in_line_when_kueue_tells() -> None:
    from diagnostics.explain import _ordinal

    why = explain_workload(
        namespace="team-b",
        name="job-big-train",
        queue="team-b-train",
        reason="Pending",
        message="couldn't assign flavors to pod set main: insufficient unused quota for "
        "nvidia.com/gpu in flavor h100-80gb, 4 more needed",
        position=1,
        cluster_queue="cq-train",
    )
    assert why.cause.endswith("4 more needed. It is 2nd in line for cq-train.")
    assert [_ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "101st",
        "111th",
    ]


def test_a_pod_bound_to_a_node_but_not_running_waits_on_that_node() -> None:
    """Pending with a node (ContainerCreating, an image pull): the scheduler is done with it."""
    result = explain_pod(
        namespace="team-a",
        name="train-0",
        requests={"nvidia.com/gpu": 1},
        message="",
        fleet=INCIDENT,
        node_name="gpu-a100-01",
    )
    assert result.cause == (
        "The pod is placed on gpu-a100-01 but has not started: its containers are still being "
        "created there (pulling the image, mounting volumes, or waiting for the GPU device "
        "plugin)."
    )
    assert "kubectl -n team-a describe pod train-0" in result.next_step
    assert "scheduler" not in result.cause


def test_a_drift_is_dated_in_utc_as_every_sentence_writes_a_moment() -> None:
    paris = dt.timezone(dt.timedelta(hours=1))
    drift = [
        SimpleNamespace(
            subject="gpu-a100-03",
            kind="mig_layout",
            first_seen=dt.datetime(2026, 12, 2, 1, 54, tzinfo=paris),
        ),
        SimpleNamespace(
            subject="gpu-a100-04",
            kind="mig_layout",
            first_seen=dt.datetime(2026, 11, 30, 10, 42, tzinfo=dt.UTC),
        ),
        SimpleNamespace(
            subject="gpu-a100-05",
            kind="labels",
            first_seen=dt.datetime(2026, 11, 30, tzinfo=dt.UTC),
        ),
    ]
    view = fleet_view([], [], [], drift, {}, {})
    assert view.drift_since == {
        "gpu-a100-03": "Dec 2, 00:54 UTC",
        "gpu-a100-04": "Nov 30, 10:42 UTC",
    }
