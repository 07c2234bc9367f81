"""Pods that wait for a device their namespace's LimitRange gave them, and Jobs whose pods
are larger than the whole quota: the explainer's exact sentences."""

from __future__ import annotations

from cluster.decode import limit_defaulted, pod_gpu_requests, pod_values, workload_values
from diagnostics.explain import FleetView, explain_create_failure, explain_pod
from tests.unit.diagnostics.test_explain import INCIDENT

# As a real kube-scheduler v1.36 words it for the seed pod once team-a's LimitRange added a
# whole GPU to it (the A100 nodes offer no whole GPU, the H100 nodes are tainted).
BOTH = (
    "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient nvidia.com/gpu, "
    "3 Insufficient nvidia.com/mig-3g.40gb. no new claims to deallocate, preemption: 0/5 nodes "
    "are available: 2 No preemption victims found for incoming pod, 3 Preemption is not helpful "
    "for scheduling."
)
SET_GPU = (
    "LimitRanger plugin set: nvidia.com/gpu request for container main; "
    "nvidia.com/gpu limit for container main"
)


def test_the_limit_ranger_annotation_names_what_it_set() -> None:
    main = {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    assert limit_defaulted({"kubernetes.io/limit-ranger": SET_GPU}, main) == [
        {
            "container": "main",
            "init": False,
            "resource": "nvidia.com/gpu",
            "amount": 1,
            "only": True,
        }
    ]
    assert limit_defaulted(
        {
            "kubernetes.io/limit-ranger": "LimitRanger plugin set: cpu, memory request for "
            "container app; nvidia.com/mig-1g.10gb, nvidia.com/mig-2g.20gb limit for init "
            "container setup"
        }
    ) == [
        {"container": "setup", "init": True, "resource": r, "amount": 0, "only": False}
        for r in ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb")
    ]
    assert limit_defaulted({"kubernetes.io/limit-ranger": "something else"}) == []
    assert limit_defaulted({}) == []


def test_a_polled_pod_keeps_what_its_limit_range_set() -> None:
    pod = {
        "metadata": {
            "name": "train-3g",
            "namespace": "team-a",
            "annotations": {"kubernetes.io/limit-ranger": SET_GPU},
        },
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": "Pending"},
    }
    assert pod_values(pod, {"nvidia.com/gpu": 1})["limit_defaulted"] == [
        {
            "container": "main",
            "init": False,
            "resource": "nvidia.com/gpu",
            "amount": 0,
            "only": True,
        }
    ]


def test_a_mig_pod_given_a_whole_gpu_is_told_a_mig_change_will_not_start_it() -> None:
    why = explain_pod(
        namespace="team-a",
        name="train-3g",
        requests={"nvidia.com/mig-3g.40gb": 1, "nvidia.com/gpu": 1},
        message=BOTH,
        fleet=INCIDENT,
        defaulted=["nvidia.com/gpu"],
    )
    assert why.cause == (
        "The LimitRange of team-a gave the pod 1 gpu it did not ask for (it asks for 1 "
        "mig-3g.40gb), and no node has that free. A MIG change alone will not start it: it "
        "needs a whole GPU as well."
    )
    assert why.next_step == (
        "Set nvidia.com/gpu: 0 in the pod's container limits, or ask a platform admin to take "
        "the default out of team-a's LimitRange (a max alone becomes the default too)."
    )
    assert why.action is None and why.evidence == [BOTH]


def test_a_cpu_only_pod_given_mig_slices_by_a_max_is_told_so() -> None:
    message = (
        "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient "
        "nvidia.com/mig-1g.10gb, 3 Insufficient nvidia.com/mig-2g.20gb."
    )
    why = explain_pod(
        namespace="team-dev",
        name="notebook",
        requests={"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1},
        message=message,
        fleet=INCIDENT,
        defaulted=["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb"],
    )
    assert why.cause == (
        "The LimitRange of team-dev gave the pod 2 mig-1g.10gb, 1 mig-2g.20gb it did not ask "
        "for (it asks for no GPU itself), and no node has that free."
    )
    assert why.next_step.startswith(
        "Set nvidia.com/mig-1g.10gb: 0, nvidia.com/mig-2g.20gb: 0 in the pod's container limits"
    )


def test_a_defaulted_resource_the_pod_does_not_wait_for_is_not_blamed() -> None:
    fleet = FleetView(offered={"nvidia.com/gpu": 16}, free={"nvidia.com/gpu": 0})
    why = explain_pod(
        namespace="team-a",
        name="train",
        requests={"nvidia.com/gpu": 4, "nvidia.com/mig-3g.40gb": 1},
        message="0/2 nodes are available: 2 Insufficient nvidia.com/mig-3g.40gb.",
        fleet=fleet,
        defaulted=["nvidia.com/gpu"],
    )
    assert not why.cause.startswith("The LimitRange")


def test_a_job_larger_than_the_whole_quota_is_told_waiting_will_not_help() -> None:
    message = (
        'Error creating: pods "big-train-x7k2p" is forbidden: exceeded quota: team-a-gpu-quota, '
        "requested: requests.nvidia.com/gpu=20, used: requests.nvidia.com/gpu=4, "
        "limited: requests.nvidia.com/gpu=16"
    )
    why = explain_create_failure(namespace="team-a", kind="Job", name="big-train", message=message)
    assert why.cause == (
        "Job big-train can never create its pods: each asks for 20 requests.nvidia.com/gpu, "
        "more than its 16 in all (quota team-a-gpu-quota of team-a). Waiting will not help."
    )
    assert why.next_step == (
        "Make each pod ask for at most 16 requests.nvidia.com/gpu, or ask for a larger quota."
    )
    # One that fits once others finish still says so.
    fits = message.replace("=20", "=12")
    assert explain_create_failure(
        namespace="team-a", kind="Job", name="big-train", message=fits
    ).cause.startswith("Job big-train cannot create its pods: quota team-a-gpu-quota allows")


def test_a_container_with_a_cpu_request_and_a_gpu_limit_asks_for_the_gpu() -> None:
    container = {
        "name": "main",
        "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "4"}},
    }
    pod = {"spec": {"containers": [container]}}
    assert pod_gpu_requests(pod) == {"nvidia.com/gpu": 4}
    workload = {
        "metadata": {"name": "w", "namespace": "team-a"},
        "spec": {
            "podSets": [
                {"name": "main", "count": 2, "template": {"spec": {"containers": [container]}}}
            ]
        },
    }
    assert workload_values(workload)["requests"] == {"cpu": 2, "nvidia.com/gpu": 8}


def test_a_workload_counts_what_kueue_charges_not_what_its_template_says() -> None:
    """Kueue fills a container's unset request from the LimitRange's defaultRequest before it
    takes the limit: a Job with only ``limits: {gpu: 20}`` is charged 1 (finding 2)."""
    template = {
        "spec": {
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "20"}}}]
        }
    }
    spec = {"podSets": [{"name": "main", "count": 1, "template": template}]}
    waiting = {
        "metadata": {"name": "big", "namespace": "team-a"},
        "spec": spec,
        "status": {"resourceRequests": [{"name": "main", "resources": {"nvidia.com/gpu": "1"}}]},
    }
    assert workload_values(waiting)["requests"] == {"nvidia.com/gpu": 1}
    admitted = {
        "metadata": {"name": "big", "namespace": "team-a"},
        "spec": spec,
        "status": {
            "admission": {
                "clusterQueue": "cq-train",
                "podSetAssignments": [
                    {"name": "main", "count": 1, "resourceUsage": {"nvidia.com/gpu": "1"}}
                ],
            }
        },
    }
    assert workload_values(admitted)["requests"] == {"nvidia.com/gpu": 1}
    # Without Kueue's word, the template's.
    assert workload_values({"metadata": {}, "spec": spec})["requests"] == {"nvidia.com/gpu": 20}
