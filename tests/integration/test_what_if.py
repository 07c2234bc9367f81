"""The quota what-if against the demo cluster's Kueue: what the simulation (written from
Kueue's docs) says a nominal increase admits is what Kueue admits once it is applied."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from cluster.apply import apply_desired_state
from cluster.models import ObservedWorkload
from cluster.poll import poll_cluster
from kube import Gateway
from queues.models import ClusterQueue
from queues.selectors import cluster_queue_what_if, with_nominal
from queues.services import save_cluster_queue
from tests.support import wait_for

pytestmark = pytest.mark.django_db

GPU = "nvidia.com/gpu"


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

    save_cluster_queue(actor=admin, cluster_queue=edited, source="web")
    apply_desired_state(gateway=portal_cluster)

    def kueue_acted() -> dict[str, dict[str, str]] | None:
        seen = holding(portal_cluster)
        moved = "team-b/job-big-train" in seen or message_of_big_train() != waited_with
        return seen if moved else None

    now = wait_for(kueue_acted, timeout=15, what="Kueue to act on the new quota")
    assert set(now) == set(expected)
    for key, flavors in expected.items():
        assert {r: now[key].get(r) for r in flavors} == flavors, key
    if admits:
        assert shown["admitted"][0]["flavors"] == {GPU: "h100-80gb"}
        assert shown["admitted"][0]["borrows"]
    else:
        assert "2 more needed" in message_of_big_train()
        assert "10 free" in shown["waiting"][0]["why"]
