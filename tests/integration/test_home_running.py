"""A team lead's home on the demo cluster: the Job that cannot create its pods and its one
Pending pod are one card, counted from the quota as last polled, and a pod that starts after
a visit is on the next one, marked new, with its GPUs, its node and since when."""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.auth.models import User
from django.test import Client

from cluster.models import ObservedCreateFailure, ObservedPod
from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
from tests.support import wait_for

pytestmark = pytest.mark.django_db

QUOTA = ObjectRef("v1", "ResourceQuota", "team-a-gpu-quota", "team-a")
TOLERATION = {
    "key": "nvidia.com/gpu",
    "operator": "Equal",
    "value": "present",
    "effect": "NoSchedule",
}


def lead_a() -> Client:
    client = Client()
    client.force_login(User.objects.get(username="lead-a"))
    return client


def card_of(page: str, marker: str) -> str:
    start = page.rindex("<li", 0, page.index(marker))
    return page[start : page.index("</li>", page.index(marker))]


def test_the_job_that_cannot_create_pods_and_its_pending_pod_are_one_card(
    portal_cluster: Gateway,
) -> None:
    def refused() -> bool:
        poll_cluster(gateway=portal_cluster)
        return ObservedCreateFailure.objects.filter(namespace="team-a", name="eval-sweep").exists()

    wait_for(refused, timeout=15, what="eval-sweep refused by the quota")
    pod = ObservedPod.objects.get(namespace="team-a", name__startswith="eval-sweep-")
    assert (pod.owner_kind, pod.owner_name, pod.phase) == ("Job", "eval-sweep", "Pending")
    page = lead_a().get("/").content.decode()
    card = card_of(page, 'id="create-failure-')
    assert f"Its pod <code>{pod.name}</code> was created and waits too" in card
    assert page.count(pod.name) == 1  # not a second card under Pending pods
    used = portal_cluster.get(QUOTA)["status"]["used"]["requests.nvidia.com/gpu"]
    assert f"16 requests.nvidia.com/gpu in team-a, {used} are in use" in card
    assert f"{used} of 16" in page


def test_a_pod_that_starts_after_a_visit_is_on_the_next_marked_new(
    portal_cluster: Gateway,
) -> None:
    # The cluster's times have whole seconds, and work that started in the second of the
    # visit's poll counts as new: the seed's pods started in the fixture's second.
    time.sleep(1.1)
    poll_cluster(gateway=portal_cluster)
    client = lead_a()
    assert client.get("/").status_code == 200  # the visit the next one is compared with
    portal_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "quick-eval", "namespace": "team-a"},
            "spec": {
                "tolerations": [TOLERATION],
                "containers": [
                    {
                        "name": "main",
                        "image": "trainer:latest",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            },
        }
    )

    def running() -> bool:
        poll_cluster(gateway=portal_cluster)
        return ObservedPod.objects.filter(name="quick-eval", phase="Running").exists()

    wait_for(running, timeout=15, what="quick-eval running")
    pod = ObservedPod.objects.get(name="quick-eval")
    assert pod.started_at is not None and pod.node_name
    page = client.get("/").content.decode()
    line = card_of(page, "Pod <code>quick-eval</code>")
    assert re.search(r'last visit">new</span> Pod <code>quick-eval</code>: 1 GPU, ', line)
    assert f">{pod.node_name}</a>" in line
    assert "just now" in line or "min ago" in line
    # the seed's pods that ran before the first visit are not new
    assert page.count('last visit">new</span>') == 1
