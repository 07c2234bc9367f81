"""A Job run to its end on the real control plane (its pod Succeeded, the kubelet played):
what kube-controller-manager v1.36.2 writes on the Job and Kueue v0.19.2 on its Workload and
queues. The demo cluster is held to the same facts (``scenarios.JOB_COMPLETE``,
``WORKLOAD_FINISHED``, ``QUOTA_RELEASED``, ``FINISHED_EVENTS``) by
``tests/devcluster/test_job_completion.py``."""

from __future__ import annotations

import pytest

from kube import Gateway, ObjectRef
from tests.realcluster import scenarios
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.player import Kubelet
from tests.realcluster.test_loop import hands as admin
from tests.realcluster.test_loop import job
from tests.support import wait_for

need_kit()
pytestmark = pytest.mark.django_db

CQ = ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", "cq-train")
LQ = ObjectRef("kueue.x-k8s.io/v1beta2", "LocalQueue", "team-a-train", "team-a")
JOB = ObjectRef("batch/v1", "Job", "rc-done", "team-a")


def test_a_job_whose_pod_succeeded_is_complete_and_its_workload_finished(
    real_portal: Gateway, real_cluster: RealCluster, kubelet: Kubelet
) -> None:
    hands = admin(real_cluster)
    hands.apply(job("rc-done", "team-a", "team-a-train", 2))
    try:
        scenarios.wait_reserved(hands, "team-a", "rc-done")
        (pod,) = kubelet.pods_of_job("team-a", "rc-done")
        kubelet.run("team-a", pod.metadata.name)
        wait_for(
            lambda: (
                scenarios.condition(
                    scenarios.workload_of(hands, "team-a", "rc-done"), "PodsReady"
                ).get("status")
                == "True"
            ),
            timeout=30,
            what="Kueue to see the pod ready",
        )
        running = {"reservingWorkloads": 1, "admittedWorkloads": 1, "in use": {"2"}}
        wait_for(  # held while it runs
            lambda: all(scenarios.quota_in_use(hands.get(q)) == running for q in (CQ, LQ)),
            timeout=30,
            what="Kueue to count the running Job's quota",
        )
        kubelet.finish("team-a", pod.metadata.name)
        wait_for(
            lambda: (
                scenarios.quota_in_use(hands.get(CQ)) == scenarios.QUOTA_RELEASED
                and scenarios.quota_in_use(hands.get(LQ)) == scenarios.QUOTA_RELEASED
                and scenarios.workload_finished(scenarios.workload_of(hands, "team-a", "rc-done"))
                == scenarios.WORKLOAD_FINISHED
            ),
            timeout=30,
            what="Kueue to mark the Workload Finished and give its quota back",
        )
        assert scenarios.job_complete(hands.get(JOB)) == scenarios.JOB_COMPLETE
        workload = scenarios.workload_of(hands, "team-a", "rc-done")
        assert workload is not None
        name = f"team-a/{workload['metadata']['name']}"
        expected = [
            (kind, reason, message.format(workload=name), component)
            for kind, reason, message, component in scenarios.FINISHED_EVENTS
        ]
        events = hands.list("v1", "Event", namespace="team-a")
        assert scenarios.finished_events(events, "rc-done") == expected
    finally:
        real_cluster.remove_job("team-a", "rc-done")
