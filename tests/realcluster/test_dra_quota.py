"""A namespace quota on a DRA device class, set through the portal's service, rendered and
applied by the loop, enforced by the real API server: the claim a pod's template would make
beyond it is refused, the pod waits with the words the control plane gives it, and the
portal's "why is it waiting" says the class's quota is used up. With
``QM_RECORD_DRA=<folder>`` what the pod and its events say is written there as
``quota.json`` (tests/data/dra/ was recorded so)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cluster.models import ObservedPod
from cluster.services import settings_cluster
from kube import Gateway, ObjectRef
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from tenants.services import set_namespace_quota
from tests.factories import NamespaceFactory
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
    real_gateway: Gateway,
    published: Gateway,
    real_cluster: RealCluster,
    platform_admin: Any,
    team_a: Any,
) -> None:
    admin = hands(real_cluster, "kubectl-create")
    assert poll_cluster(gateway=real_gateway).ok  # the published devices: the quota's ceiling
    namespace = NamespaceFactory(name=NAMESPACE, team=team_a)
    set_namespace_quota(
        actor=platform_admin, namespace=namespace, hard={MIG_CLASS: "1"}, source="web"
    )
    report = apply_desired_state(gateway=real_gateway)
    assert not report.failed and not report.conflicts, report
    (quota,) = admin.list("v1", "ResourceQuota", namespace=NAMESPACE)
    assert quota["spec"]["hard"] == {MIG_CLASS: "1"}
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

    assert poll_cluster(gateway=real_gateway).ok
    waiting = ObservedPod.objects.on(settings_cluster()).get(
        namespace=NAMESPACE, name="rc-quota-second"
    )
    assert waiting.explained["why"]["cause"] == (
        "The namespace's quota on device class mig.nvidia.com is used up (1 of 1 devices): the "
        "claim the pod asks for from its template rc-mig-template cannot be made."
    ), waiting.explained
