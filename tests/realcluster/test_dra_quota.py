"""A namespace quota on a DRA device class, as the portal renders it, enforced by the real API
server: the claim a pod's template would make beyond it is refused, and the pod waits with
the words the control plane gives it. With ``QM_RECORD_DRA=<folder>`` what the pod and its
events say is written there as ``quota.json`` (tests/data/dra/ was recorded so)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kube import Gateway, ObjectRef
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.test_dra import NAMESPACE, allocated, published
from tests.realcluster.test_dra_waits import template, templated_pod
from tests.realcluster.test_loop import hands
from tests.support import wait_for

need_kit()
pytestmark = pytest.mark.django_db
__all__ = ["published"]
MIG_CLASS = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"


def test_a_device_class_quota_refuses_the_claim_beyond_it(
    real_gateway: Gateway, published: Gateway, real_cluster: RealCluster
) -> None:
    admin = hands(real_cluster, "kubectl-create")
    admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "team-quota", "namespace": NAMESPACE},
            "spec": {"hard": {MIG_CLASS: "1"}},
        }
    )
    admin.apply(template("rc-mig-template"))
    admin.apply(templated_pod("rc-quota-first", "rc-mig-template"))
    first = wait_for(
        lambda: (
            admin.get(ObjectRef("v1", "Pod", "rc-quota-first", NAMESPACE)).get("status") or {}
        ).get("resourceClaimStatuses"),
        60,
        "the first claim made",
    )
    wait_for(lambda: allocated(admin, first[0]["resourceClaimName"]), 60, "the first allocated")
    admin.apply(templated_pod("rc-quota-second", "rc-mig-template"))

    def told() -> list[dict[str, object]]:
        return [
            {k: e.get(k) for k in ("type", "reason", "message")}
            for e in admin.list("v1", "Event", namespace=NAMESPACE)
            if (e.get("involvedObject") or {}).get("name") == "rc-quota-second"
            and "quota" in str(e.get("message"))
        ]

    events = wait_for(told, 60, "the quota's refusal told on the pod")
    second = admin.get(ObjectRef("v1", "Pod", "rc-quota-second", NAMESPACE))
    folder = os.environ.get("QM_RECORD_DRA")
    if folder:
        (Path(folder) / "quota.json").write_text(
            json.dumps({"pod": second, "events": events}, indent=1, sort_keys=True) + "\n"
        )
    assert "exceeded quota" in str(events[0]["message"]), events
    assert MIG_CLASS in str(events[0]["message"])
    assert not (second.get("status") or {}).get("resourceClaimStatuses")
