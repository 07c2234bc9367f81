"""The quota what-if against the demo cluster's Kueue: what the simulation (written from
Kueue's docs) says a nominal increase admits is what Kueue admits once it is applied."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from cluster.models import ObservedWorkload
from kube import Gateway
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from queues.models import ClusterQueue
from queues.selectors import cluster_queue_what_if, with_nominal
from queues.services import save_cluster_queue
from tests.conftest import FAST
from tests.support import wait_for

pytestmark = pytest.mark.django_db

GPU = "nvidia.com/gpu"
# These raises go past the demo fleet's H100s on purpose (what Kueue does with a promise the
# nodes cannot keep): the admin confirms it as the Queues page asks, with the reason.
BEYOND_THE_FLEET: dict[str, Any] = {
    "promise_more_than_exists": True,
    "override_reason": "what-if checked against Kueue",
}


def holding(gateway: Gateway) -> dict[str, dict[str, str]]:
    """Polled now: the workloads that hold quota, with the flavor of each resource."""
    poll_cluster(gateway=gateway)
    return {
        f"{w.namespace}/{w.name}": w.flavors
        for w in ObservedWorkload.objects.filter(finished=False).exclude(cluster_queue="")
    }


def settled(gateway: Gateway) -> dict[str, dict[str, str]]:
    """Poll until Kueue has looked at job-big-train (it waits for quota)."""

    def looked_at() -> bool:
        poll_cluster(gateway=gateway)
        waiting = ObservedWorkload.objects.filter(
            namespace="team-b", name="job-big-train", admitted=False
        )
        return waiting.exclude(message="").exists()

    wait_for(looked_at, timeout=15, what="Kueue to report on team-b/job-big-train")
    return holding(gateway)


def predicted(before: dict[str, Any], shown: dict[str, Any]) -> dict[str, dict[str, str]]:
    after = {
        k: v for k, v in before.items() if k not in {p["workload"] for p in shown["preempted"]}
    }
    after.update({a["workload"]: a["flavors"] for a in shown["admitted"]})
    return after


def message_of_big_train() -> str:
    return ObservedWorkload.objects.get(namespace="team-b", name="job-big-train").message


def after_kueue_acted(
    gateway: Gateway, waited_with: str, expected: dict[str, Any]
) -> dict[str, dict[str, str]]:
    """What holds quota once Kueue acted on a new quota (team-b's job admitted, or the
    message it waits with changed) and, when the simulation expects an admission, once
    Kueue is done preempting for it (the demo's Kueue evicts, then admits a cycle later):
    what holds quota then, or at the timeout, for the test to compare."""
    deadline = time.monotonic() + 15
    while True:
        seen = holding(gateway)
        moved = "team-b/job-big-train" in seen or message_of_big_train() != waited_with
        if (moved and set(seen) == set(expected)) or time.monotonic() > deadline:
            return seen
        if moved and "team-b/job-big-train" not in expected:
            return seen  # it still waits, as expected or not: compare now
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("nominal", "admits"),
    [
        # 20 + cq-infer's 4 idle GPUs lent to the cohort: 12 in use, 12 free (borrowing 4).
        ("20", ["team-b/job-big-train"]),
        # 18: 10 free in the cohort for a workload charged 12: it keeps waiting.
        ("18", []),
    ],
)
def test_what_the_what_if_admits_after_a_nominal_increase_kueue_admits(
    portal_cluster: Gateway, nominal: str, admits: list[str]
) -> None:
    admin = User.objects.get(username="admin")
    before = settled(portal_cluster)
    assert "team-b/job-big-train" not in before
    waited_with = message_of_big_train()
    cq = ClusterQueue.objects.select_related("cohort").get(name="cq-train")
    # As things are, the simulation admits nothing: Kueue agrees, it keeps it waiting.
    assert cluster_queue_what_if(admin, cq)["admitted"] == []
    edited = with_nominal(cq, "h100-80gb", GPU, nominal)
    shown = cluster_queue_what_if(admin, edited)
    assert [a["workload"] for a in shown["admitted"]] == admits
    expected = predicted(before, shown)

    save_cluster_queue(actor=admin, cluster_queue=edited, source="web", **BEYOND_THE_FLEET)
    apply_desired_state(gateway=portal_cluster)

    now = after_kueue_acted(portal_cluster, waited_with, expected)
    assert set(now) == set(expected)
    for key, flavors in expected.items():
        assert {r: now[key].get(r) for r in flavors} == flavors, key
    if admits:
        assert shown["admitted"][0]["flavors"] == {GPU: "h100-80gb"}
        assert shown["admitted"][0]["borrows"]
    else:
        assert "2 more needed" in message_of_big_train()
        assert "10 free" in shown["waiting"][0]["why"]


def a_workload(namespace: str, name: str, queue: str, gpus: int) -> dict[str, Any]:
    """A Kueue Workload (one pod set, as Kueue makes for a Job)."""
    container = {
        "name": "main",
        "image": "trainer:latest",
        "resources": {"requests": {GPU: str(gpus)}},
    }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": queue,
            "priority": 0,
            "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
            ],
        },
    }


def test_what_the_what_if_preempts_to_reclaim_nominal_quota_kueue_preempts(
    portal_cluster: Gateway,
) -> None:
    """cq-train borrows cq-infer's idle GPUs for team-b's job; cq-infer (reclaimWithinCohort:
    Any) gets a workload of 8, above its nominal 4, so it waits: raising cq-infer to 8 lets
    it reclaim, and the simulation and Kueue preempt the same, most recently admitted,
    workload of the borrowing queue."""
    admin = User.objects.get(username="admin")
    settled(portal_cluster)
    # Kueue's times have whole seconds: team-b's job is admitted in a later one than the
    # seed's workloads, so "the most recently admitted" is one workload.
    seeded = max(w.admitted_at for w in ObservedWorkload.objects.filter(admitted=True))
    wait_for(
        lambda: timezone.now() - seeded > dt.timedelta(seconds=1),
        what="a second after the seed's admissions",
    )
    train = ClusterQueue.objects.get(name="cq-train")
    save_cluster_queue(
        actor=admin,
        cluster_queue=with_nominal(train, "h100-80gb", GPU, "20"),
        source="web",
        **BEYOND_THE_FLEET,
    )
    infer = ClusterQueue.objects.select_related("cohort").get(name="cq-infer")
    infer.preemption_reclaim_within_cohort = "Any"
    save_cluster_queue(actor=admin, cluster_queue=infer, source="web")
    apply_desired_state(gateway=portal_cluster)
    wait_for(
        lambda: "team-b/job-big-train" in holding(portal_cluster),
        timeout=15,
        what="team-b/job-big-train to borrow",
    )
    portal_cluster.apply(a_workload("team-infer", "serve-8", "online-infer", 8))

    def serve_waits() -> bool:
        poll_cluster(gateway=portal_cluster)
        return (
            ObservedWorkload.objects.filter(namespace="team-infer", name="serve-8", admitted=False)
            .exclude(message="")
            .exists()
        )

    wait_for(serve_waits, timeout=15, what="Kueue to keep team-infer/serve-8 waiting")
    before = holding(portal_cluster)
    infer = ClusterQueue.objects.select_related("cohort").get(name="cq-infer")
    shown = cluster_queue_what_if(admin, with_nominal(infer, "h100-80gb", GPU, "8"))
    assert [a["workload"] for a in shown["admitted"]] == ["team-infer/serve-8"]
    assert [(p["workload"], p["reason"]) for p in shown["preempted"]] == [
        ("team-b/job-big-train", "InCohortReclamation")
    ]
    expected = predicted(before, shown)

    save_cluster_queue(
        actor=admin,
        cluster_queue=with_nominal(infer, "h100-80gb", GPU, "8"),
        source="web",
        **BEYOND_THE_FLEET,
    )
    apply_desired_state(gateway=portal_cluster)
    now = wait_for(
        lambda: (seen := holding(portal_cluster)) and "team-infer/serve-8" in seen and seen,
        timeout=15,
        what="Kueue to admit team-infer/serve-8",
    )
    assert set(now) == set(expected)
    evicted = ObservedWorkload.objects.get(namespace="team-b", name="job-big-train")
    assert evicted.evicted_reason == "Preempted"


def wait_polled(gateway: Gateway, namespace: str, name: str, *, admitted: bool) -> None:
    def seen() -> bool:
        poll_cluster(gateway=gateway)
        rows = ObservedWorkload.objects.filter(namespace=namespace, name=name)
        return (
            rows.filter(admitted=True).exists() if admitted else rows.exclude(message="").exists()
        )

    wait_for(seen, timeout=15, what=f"Kueue to look at {namespace}/{name}")


@pytest.mark.parametrize(
    "fair",
    [
        pytest.param(
            True,
            marks=pytest.mark.demo_cluster(options=dataclasses.replace(FAST, fair_sharing=True)),
        ),
        False,
    ],
)
def test_fair_sharing_weights_decide_what_a_raise_reclaims_as_in_kueue(
    portal_cluster: Gateway, fair: bool
) -> None:
    """cq-dev (weight 5) borrows 4 idle GPUs; cq-train (weight 80, reclaimWithinCohort: Any)
    goes to 20 for team-b's 12-GPU job, which would then borrow 4 itself. Classic
    preemption: a borrowing workload may not preempt without borrowWithinCohort, so it
    waits. Fair sharing: cq-train's share with the job (4/24/80) is below cq-dev's
    (4/24/5), so LessThanInitialShare lets it preempt cq-dev's workload."""
    admin = User.objects.get(username="admin")
    settled(portal_cluster)
    train = ClusterQueue.objects.select_related("cohort").get(name="cq-train")
    train.preemption_reclaim_within_cohort = "Any"
    save_cluster_queue(actor=admin, cluster_queue=train, source="web")
    apply_desired_state(gateway=portal_cluster)
    portal_cluster.apply(a_workload("team-dev", "dev-4", "dev-test", 4))
    wait_polled(portal_cluster, "team-dev", "dev-4", admitted=True)
    before = holding(portal_cluster)
    waited_with = message_of_big_train()
    shown = cluster_queue_what_if(admin, with_nominal(train, "h100-80gb", GPU, "20"))
    assert shown["fair_sharing"] is fair
    if fair:
        assert [a["workload"] for a in shown["admitted"]] == ["team-b/job-big-train"]
        assert [(p["workload"], p["reason"]) for p in shown["preempted"]] == [
            ("team-dev/dev-4", "InCohortFairSharing")
        ]
    else:
        assert shown["admitted"] == [] and shown["preempted"] == []
    expected = predicted(before, shown)

    save_cluster_queue(
        actor=admin,
        cluster_queue=with_nominal(train, "h100-80gb", GPU, "20"),
        source="web",
        **BEYOND_THE_FLEET,
    )
    apply_desired_state(gateway=portal_cluster)

    now = after_kueue_acted(portal_cluster, waited_with, expected)
    assert set(now) == set(expected)
