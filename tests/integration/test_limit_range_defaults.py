"""A LimitRange's defaults on the demo cluster, as on a real one: team-a's seed LimitRange
(a default of one whole GPU) reaches a pod that asks only for a MIG slice, and the portal
says so instead of sending the team to a MIG change that cannot help."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

import devcluster
from cluster.models import ObservedPod
from cluster.scope import settings_cluster_id
from diagnostics.selectors import explain_waiting
from kube import Gateway
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from tests.support import EVERY_NAME

pytestmark = pytest.mark.django_db

CAUSE = (
    "The LimitRange of team-a gave the pod 1 gpu it did not ask for (it asks for 1 "
    "mig-3g.40gb), and no node has that free. A MIG change alone will not start it: it needs "
    "a whole GPU as well."
)


def test_a_mig_pod_given_a_whole_gpu_by_the_seed_limit_range(
    settings: Any, demo: None, demo_cluster: devcluster.DemoCluster, gateway: Gateway
) -> None:
    settings.KUBE_URL = demo_cluster.url
    apply_desired_state(gateway=gateway)
    created = gateway.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "vision-3g", "namespace": "team-a"},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "trainer:latest",
                        "resources": {"limits": {"nvidia.com/mig-3g.40gb": "1"}},
                    }
                ]
            },
        }
    )
    resources = created["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {"nvidia.com/mig-3g.40gb": "1", "nvidia.com/gpu": "1"}
    assert resources["requests"] == {"nvidia.com/mig-3g.40gb": "1", "nvidia.com/gpu": "1"}
    deadline = time.monotonic() + 10
    while True:
        poll_cluster(gateway=gateway)
        _, pods, _ = explain_waiting(["team-a"], cluster_id=settings_cluster_id(), names=EVERY_NAME)
        why = next((p.why for p in pods if p.name == "vision-3g"), None)
        if (why is not None and why.cause == CAUSE) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert ObservedPod.objects.get(name="vision-3g").limit_defaulted == [
        {
            "container": "main",
            "init": False,
            "resource": "nvidia.com/gpu",
            "amount": 1,
            "only": True,
        }
    ]
    assert why is not None and why.cause == CAUSE, why and why.evidence
    assert why.next_step == (
        "Set nvidia.com/gpu: 0 in the pod's container limits, or ask a platform admin to take "
        "the default out of team-a's LimitRange (a max alone becomes the default too)."
    )
    client = Client()
    client.force_login(User.objects.get(username="lead-a"))
    page = client.get("/").content.decode()
    assert CAUSE.replace("'", "&#x27;") in page
    # The seed's LimitRange is warned about where the team reads it.
    assert "no MIG change starts them" in page
