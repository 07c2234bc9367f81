"""Governed per-claim MIG on the real control plane: a MIG policy proposed and approved
through the portal's services, rendered by the loop as one DeviceClass per MIG profile and a
ResourceQuota per namespace, applied as the portal's ServiceAccount; the real API server
refuses a claim of the driver's generic MIG class and one of a profile the policy does not
grant, admits one of the granted profile, and the real scheduler allocates it on the
published partitionable A100. A pod whose template asks for the generic class waits, and the
portal's "why is it waiting" says the policy closes it and what to ask for. The impact of
the next changes names the allocated claim a policy granting nothing would leave beyond it,
and the waiting pod that ungoverning lets start, which it does once the loop has removed the
classes and the quota. With
``QM_RECORD_DRA=<folder>`` the API server's refusals and the pod's events are written there
as ``mig-policy.json`` (tests/data/dra/ was recorded so)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from changes.mig_policy import (
    approve_mig_policy_change,
    propose_mig_policy,
    reject_mig_policy_change,
)
from cluster.models import Drift, ObservedPod
from cluster.services import settings_cluster
from kube import Gateway, ObjectRef, PermanentKubeError
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from tenants.mig_policy import policy_quota_name, profile_class
from tests.factories import NamespaceFactory
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.test_dra import (
    A100_NODE,
    DRA,
    DRIVER,
    NAMESPACE,
    allocated,
    attributes,
    claim,
    pod,
    published,
)
from tests.realcluster.test_dra_waits import templated_pod
from tests.realcluster.test_loop import hands
from tests.support import wait_for

need_kit()
pytestmark = pytest.mark.django_db
__all__ = ["published"]
GRANTED, CLOSED = "3g.40gb", "1g.10gb"


def small_mig_slice() -> dict[str, Any]:
    """Two 1g.10gb MIG devices made beforehand on a second pool of the A100's node (no
    counters): the cluster offers a profile the policy will not grant."""
    devices = [
        {
            "name": f"gpu-1-mig-1g10gb-19-{start}",
            "attributes": attributes(
                type="mig",
                parentUUID="GPU-a100-01-1",
                profile=CLOSED,
                productName="NVIDIA A100-SXM4-80GB",
            ),
            "capacity": {"memory": {"value": "9856Mi"}},
        }
        for start in (0, 1)
    ]
    return {
        "apiVersion": DRA,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{A100_NODE}-{DRIVER}-small"},
        "spec": {
            "driver": DRIVER,
            "nodeName": A100_NODE,
            "pool": {"name": f"{A100_NODE}-small", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def template_of(name: str, device_class: str) -> dict[str, Any]:
    made = claim(name, device_class, f"device.driver == '{DRIVER}'")
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": made["spec"]},
    }


def refusal(admin: Gateway, item: dict[str, Any]) -> str:
    with pytest.raises(PermanentKubeError) as refused:
        admin.apply(item)
    return refused.value.message


def test_a_governed_cluster_admits_only_the_granted_profiles(
    real_gateway: Gateway,
    published: Gateway,
    real_cluster: RealCluster,
    platform_admin: Any,
    approver: Any,
    team_a: Any,
) -> None:
    admin = hands(real_cluster, "kubectl-create")
    extra = small_mig_slice()
    admin.apply(extra)
    cluster = settings_cluster()
    try:
        assert poll_cluster(gateway=real_gateway).ok  # the profiles the GPUs offer
        NamespaceFactory(name=NAMESPACE, team=team_a, cluster=cluster)
        change = propose_mig_policy(
            actor=platform_admin,
            cluster=cluster,
            governed=True,
            grants=[{"namespace": NAMESPACE, "profile": GRANTED, "devices": 1}],
            reason="3g.40gb for the team's training, nothing else",
        )
        approve_mig_policy_change(request_id=change.pk, approver=approver)
        report = apply_desired_state(gateway=real_gateway)
        assert not report.failed and not report.conflicts, report
        (quota,) = [
            q
            for q in admin.list("v1", "ResourceQuota", namespace=NAMESPACE)
            if q["metadata"]["name"] == policy_quota_name(NAMESPACE)
        ]
        assert quota["spec"]["hard"] == {
            f"{profile_class(CLOSED)}.deviceclass.resource.k8s.io/devices": "0",
            f"{profile_class(GRANTED)}.deviceclass.resource.k8s.io/devices": "1",
            "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
        }
        quota_ref = ObjectRef("v1", "ResourceQuota", policy_quota_name(NAMESPACE), NAMESPACE)
        wait_for(
            lambda: (admin.get(quota_ref).get("status") or {}).get("hard"),
            60,
            "the quota's status computed",
        )
        generic = refusal(admin, claim("rc-generic", "mig.nvidia.com", "true"))
        closed = refusal(admin, claim("rc-closed", profile_class(CLOSED), "true"))
        assert "exceeded quota" in generic and "mig.nvidia.com.deviceclass" in generic, generic
        assert "exceeded quota" in closed and profile_class(CLOSED) in closed, closed

        admin.apply(claim("rc-granted", profile_class(GRANTED), "true"))
        admin.apply(pod("rc-granted-pod", "rc-granted"))
        got = wait_for(lambda: allocated(admin, "rc-granted"), 60, "the granted claim allocated")
        (result,) = got["status"]["allocation"]["devices"]["results"]
        assert result["device"].startswith("gpu-0-mig-3g40gb-9-"), result

        admin.apply(template_of("rc-generic-template", "mig.nvidia.com"))
        admin.apply(templated_pod("rc-policy-waits", "rc-generic-template"))

        def told() -> list[dict[str, object]]:
            return [
                {k: e.get(k) for k in ("type", "reason", "message")}
                for e in admin.list("v1", "Event", namespace=NAMESPACE)
                if (e.get("involvedObject") or {}).get("name") == "rc-policy-waits"
                and "quota" in str(e.get("message"))
            ]

        events = wait_for(told, 60, "the policy's refusal told on the pod")
        folder = os.environ.get("QM_RECORD_DRA")
        if folder:
            (Path(folder) / "mig-policy.json").write_text(
                json.dumps(
                    {"refusals": {"generic": generic, "closed": closed}, "events": events},
                    indent=1,
                    sort_keys=True,
                )
                + "\n"
            )
        assert poll_cluster(gateway=real_gateway).ok
        # the classes and the quota as applied: no drift (the poll reads the portal's classes)
        assert not Drift.objects.on(cluster).filter(resolved_at__isnull=True).exists(), list(
            Drift.objects.on(cluster).values_list("subject", "detail")
        )
        waiting = ObservedPod.objects.on(cluster).get(namespace=NAMESPACE, name="rc-policy-waits")
        why = waiting.explained["why"]
        # the template the pod's claim comes from, as the poll read it: the one cause
        assert why["cause"] == (
            f"Namespace {NAMESPACE}'s MIG policy on this cluster closes device class "
            "mig.nvidia.com, which the pod's template rc-generic-template asks for (it grants "
            f"{profile_class(GRANTED)} only): the API server refuses the claim."
        ), why
        assert "ask for the profile" in why["next_step"], why

        # The impact of a change, read from what the poll saw: granting nothing would leave
        # the allocated claim beyond the policy (it keeps its device); ungoverning lets the
        # waiting pod's claim be made.
        cut = propose_mig_policy(
            actor=platform_admin, cluster=cluster, governed=True, grants=[], reason="none"
        )
        assert cut.assessment["cut"] == [
            {
                "namespace": NAMESPACE,
                "claim": "rc-granted",
                "device_class": profile_class(GRANTED),
                "allocated": True,
                "allowed": 0,
            }
        ], cut.assessment
        reject_mig_policy_change(request_id=cut.pk, approver=approver, comment="no")
        free = propose_mig_policy(
            actor=platform_admin, cluster=cluster, governed=False, grants=[], reason="back"
        )
        assert [(w["pod"], w["template"]) for w in free.assessment["could_start"]] == [
            ("rc-policy-waits", "rc-generic-template")
        ], free.assessment
        approve_mig_policy_change(request_id=free.pk, approver=approver)
        report = apply_desired_state(gateway=real_gateway)
        assert not report.failed and not report.conflicts, report
        assert policy_quota_name(NAMESPACE) not in {
            q["metadata"]["name"] for q in admin.list("v1", "ResourceQuota", namespace=NAMESPACE)
        }
        assert not {profile_class(GRANTED), profile_class(CLOSED)} & {
            c["metadata"]["name"] for c in admin.list(DRA, "DeviceClass")
        }
        wait_for(
            lambda: (
                admin.get(ObjectRef("v1", "Pod", "rc-policy-waits", NAMESPACE)).get("status") or {}
            ).get("resourceClaimStatuses"),
            90,
            "the waiting pod's claim made once the policy is gone",
        )
    finally:
        real_cluster.kube("delete", "pods", "-n", NAMESPACE, "--all", "--grace-period=0", "--force")
        real_cluster.kube("delete", "resourceclaims", "-n", NAMESPACE, "--all", "--wait=false")
        admin.delete(ObjectRef.of(extra))
        for profile in (GRANTED, CLOSED):
            with contextlib.suppress(PermanentKubeError):
                admin.delete(ObjectRef(DRA, "DeviceClass", profile_class(profile)))
