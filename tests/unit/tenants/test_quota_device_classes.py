"""A namespace quota on a DRA device class (``<class>.deviceclass.resource.k8s.io/devices``)
through the tenants' quota service: a whole count, rendered into the ResourceQuota as the
API server takes it, and raised beyond what the cluster's published devices could give at
once only with an override reason; a pod whose claim the used-up quota refuses is told so.
The fleet: the recorded slices (tests/data/dra: two whole
H100s, an A100 partitionable into two 3g.40gb devices or taken whole)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from cluster.models import ObservedObject
from cluster.scope import settings_cluster_id
from diagnostics.explain import FleetView, explain_pod
from diagnostics.explainer import claim_verdicts
from loop.fetch import DraListing
from loop.write import write_dra
from tenants.manifests import render_resource_quota
from tenants.rules import check_quota_item
from tenants.services import set_namespace_quota
from tests.factories import NamespaceFactory, ObservedPodFactory

pytestmark = pytest.mark.django_db
RECORDED = Path(__file__).resolve().parents[2] / "data" / "dra"
GPU_CLASS = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIG_CLASS = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"


def recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text())


def test_a_device_class_quota_is_a_whole_count() -> None:
    assert check_quota_item(GPU_CLASS, "2").errors == []
    assert check_quota_item(MIG_CLASS, "1.5").errors == [
        "hard: must be a whole number: devices and objects are counted in units"
    ]
    assert check_quota_item("Bad_Class.deviceclass.resource.k8s.io/devices", "1").errors


def test_a_quota_beyond_what_the_devices_could_give_at_once_needs_a_reason(
    platform_admin: Any,
) -> None:
    write_dra(
        DraListing(recorded("deviceclasses.json"), recorded("resourceslices.json"), []),
        cluster_id=settings_cluster_id(),
        now=dt.datetime(2026, 12, 6, 10, 0, tzinfo=dt.UTC),
    )
    namespace = NamespaceFactory(name="team-a-dra")
    # whole GPUs: the two H100s and the A100; MIG devices: the A100's two 3g.40gb at once
    set_namespace_quota(
        actor=platform_admin,
        namespace=namespace,
        hard={GPU_CLASS: "3", MIG_CLASS: "2"},
        source="web",
    )
    with pytest.raises(ValidationError) as refused:
        set_namespace_quota(
            actor=platform_admin,
            namespace=namespace,
            hard={GPU_CLASS: "3", MIG_CLASS: "3"},
            source="web",
        )
    assert refused.value.message_dict == {
        f"hard[{MIG_CLASS}]": [
            "3 is more than the cluster's DRA devices of class mig.nvidia.com could ever give "
            "at once (2): give an override reason to set it anyway."
        ]
    }
    set_namespace_quota(
        actor=platform_admin,
        namespace=namespace,
        hard={GPU_CLASS: "3", MIG_CLASS: "3"},
        source="web",
        override_reason="more A100s are on order",
    )
    manifest = render_resource_quota(
        namespace, namespace.quota_items.all(), team_slug=namespace.team.slug
    )
    assert manifest is not None
    assert manifest["spec"]["hard"] == {GPU_CLASS: "3", MIG_CLASS: "3"}


def test_a_pod_whose_claim_the_quota_refuses_is_told_the_class_is_used_up() -> None:
    """The claim the pod's template would make is refused by the namespace's quota (the API
    server's admission); the pod names its template and no claim, and the quota's status
    says the class is used up."""
    ObservedObject.objects.create(
        api_version="v1",
        kind="ResourceQuota",
        namespace="team-a-dra",
        name="team-a-dra-quota",
        status={"hard": {MIG_CLASS: "1"}, "used": {MIG_CLASS: "1"}},
        last_seen=timezone.now(),
    )
    pod = ObservedPodFactory(
        namespace="team-a-dra",
        name="serve-0",
        phase="Pending",
        resource_claims=[{"name": "gpu", "claim": "", "template": "mig-3g"}],
    )
    said = explain_pod(
        namespace=pod.namespace,
        name=pod.name,
        requests={},
        message="",
        fleet=FleetView(offered={}, free={}),
        claims=claim_verdicts([pod], settings_cluster_id())[(pod.namespace, pod.name)],
    )
    assert (said.cause, said.next_step) == (
        "The namespace's quota on device class mig.nvidia.com is used up (1 of 1 devices): the "
        "claim the pod asks for from its template mig-3g cannot be made.",
        "It is made when a claim of namespace team-a-dra on that class is released; ask for "
        "more quota on the class if this is normal now.",
    )
