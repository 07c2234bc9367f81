"""Kueue's DRA mappings read from its Configuration, and what the queue form says of a quota
Kueue would count nothing in (docs/reference/dra.md, "Kueue's quota on DRA devices")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client

from cluster.decode import charged_requests
from cluster.scope import settings_cluster_id
from loop.write import write_managed
from queues.dra import device_ceilings, kueue_dra
from queues.kueue_config import CONFIGMAP, CONFIGMAP_KEY, KUEUE_NAMESPACE, parse, quota_notes
from queues.models import ClusterQueue
from queues.observed import held_by_kueue
from queues.services import save_cluster_queue
from queues.whatif import Group, Queue, Quota, Workload, World, what_if
from tests.factories import ClusterQueueFactory, ResourceFlavorFactory
from tests.unit.cluster.test_decode_dra import NOW, listing, write_dra

CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: dra.nvidia.com/gpu
    deviceClassNames: [gpu.nvidia.com]
  - name: dra.nvidia.com/mig-memory
    deviceClassNames: [mig.nvidia.com, gpu.nvidia.com]
    sources:
    - counter: {name: memory, driver: gpu.nvidia.com, deviceSelector: {cel: {expression: "true"}}}
"""
DATA = Path(__file__).resolve().parents[2] / "data" / "dra"
CLASSES = {"gpu.nvidia.com": "", "mig.nvidia.com": "", "vfio.gpu.nvidia.com": "nvidia.com/vgpu"}


def test_the_mappings_are_read_the_first_mapping_of_a_class_winning() -> None:
    config = parse(CONFIG)
    assert config.read and config.enabled
    assert config.mapped == {
        "dra.nvidia.com/gpu": ("gpu.nvidia.com",),
        "dra.nvidia.com/mig-memory": ("mig.nvidia.com",),
    }
    assert config.resource_of("gpu.nvidia.com") == "dra.nvidia.com/gpu"
    assert config.resource_of("vfio.gpu.nvidia.com") is None
    # a counter source charges the counter's units: no device count to hold it to
    assert config.devices == {"dra.nvidia.com/gpu": ("gpu.nvidia.com",)}
    gate_off = parse(CONFIG + "featureGates:\n  KueueDRAIntegration: false\n")
    assert not gate_off.enabled and gate_off.devices == {}


def test_a_configuration_not_found_or_unreadable_says_so() -> None:
    assert not parse(None).read and "kueue-system/kueue-manager-config" in parse(None).why
    assert not parse("resources: [").read
    assert parse("").mapped == {}


def test_the_form_says_which_quota_kueue_would_count_nothing_in() -> None:
    notes = quota_notes(
        [
            "cpu",
            "nvidia.com/gpu",
            "dra.nvidia.com/gpu",
            "gpu.nvidia.com",
            "dra.nvidia.com/typo",
            "nvidia.com/vgpu",
            "dra.nvidia.com/mig-memory",
        ],
        parse(CONFIG),
        device_classes=CLASSES,
        offered={"nvidia.com/gpu"},
    )
    assert notes == {
        "gpu.nvidia.com": "gpu.nvidia.com is a DeviceClass, not a resource Kueue counts: "
        "Kueue charges its claims in dra.nvidia.com/gpu.",
        "dra.nvidia.com/typo": "Kueue counts nothing in dra.nvidia.com/typo: no node offers it "
        "and resources.deviceClassMappings in Kueue's configuration maps no device class to it.",
        "dra.nvidia.com/mig-memory": "Kueue charges dra.nvidia.com/mig-memory in the units of a "
        "DRA counter (a counter source), not in devices: its quota is not held to the fleet's "
        "device count.",
    }
    unread = quota_notes(["dra.nvidia.com/gpu"], parse(None), device_classes=CLASSES, offered=())
    assert "could not be read" in unread["dra.nvidia.com/gpu"]


def test_the_what_if_leaves_a_workload_kueue_holds_as_misconfigured_waiting() -> None:
    recorded = json.loads((DATA / "kueue.json").read_text())["workloads"]
    unmapped = next(w for w in recorded if "unmapped" in w["metadata"]["name"])
    conditions = unmapped["status"]["conditions"]
    reserved = next(c for c in conditions if c["type"] == "QuotaReserved")
    held = held_by_kueue(reserved["reason"], reserved["message"], conditions)
    assert held == (
        "Kueue keeps it out of line whatever the quota: spec.podSets[0].template.spec."
        'resourceClaims[0].resourceClaimTemplateName: Not found: "DeviceClass mig.nvidia.com '
        'is not mapped in DRA configuration for podset main"'
    )
    assert held_by_kueue("Misconfigured", "KueueDRAIntegration feature does not support use")
    second = next(w for w in recorded if "second" in w["metadata"]["name"])
    reserved = next(c for c in second["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert (
        held_by_kueue(reserved["reason"], reserved["message"], second["status"]["conditions"]) == ""
    )
    assert charged_requests(second["status"]) == {"dra.nvidia.com/gpu": 1}
    queue = Queue(
        "q",
        groups=(Group(("dra.nvidia.com/gpu",), ("f",)),),
        quotas={("f", "dra.nvidia.com/gpu"): Quota(1)},
    )
    raised = Queue("q", groups=queue.groups, quotas={("f", "dra.nvidia.com/gpu"): Quota(3)})
    workloads = (
        Workload(
            "ns/first",
            "q",
            {"dra.nvidia.com/gpu": 1},
            created=1,
            admitted=True,
            flavors={"dra.nvidia.com/gpu": "f"},
        ),
        Workload("ns/second", "q", {"dra.nvidia.com/gpu": 1}, created=2),
        Workload("ns/unmapped", "q", {}, created=3, held=held),
    )
    outcome = what_if(World((queue,), workloads), World((raised,), workloads))
    assert [a.workload for a in outcome.admitted] == ["ns/second"]
    assert [(w.workload, w.why) for w in outcome.waiting] == [("ns/unmapped", held)]


def kueue_on_the_recorded_dra_cluster(text: str) -> int:
    """The recorded DRA objects (two whole H100s, a partitionable A100) polled, and Kueue's
    ConfigMap holding ``text``: the settings' cluster id."""
    cluster_id = settings_cluster_id()
    write_dra(listing(), cluster_id=cluster_id, now=NOW)
    config_map = {
        "metadata": {"name": CONFIGMAP, "namespace": KUEUE_NAMESPACE},
        "data": {CONFIGMAP_KEY: text},
    }
    write_managed({("v1", "ConfigMap"): [config_map]}, cluster_id=cluster_id, now=NOW)
    return cluster_id


def dra_queue(resource: str, nominal: str) -> ClusterQueue:
    flavor = ResourceFlavorFactory(name="dra-devices")
    groups = [
        {
            "coveredResources": [resource],
            "flavors": [
                {"name": flavor.name, "resources": [{"name": resource, "nominalQuota": nominal}]}
            ],
        }
    ]
    return ClusterQueueFactory(name="dra-gpus", resource_groups=groups)


@pytest.mark.django_db
def test_a_dra_quota_is_held_to_the_devices_its_classes_publish_at_once(
    client: Client, platform_admin: User
) -> None:
    cluster_id = kueue_on_the_recorded_dra_cluster(CONFIG)
    assert kueue_dra(cluster_id).mapped["dra.nvidia.com/gpu"] == ("gpu.nvidia.com",)
    # two whole H100s and the A100 whole (its counters let one whole GPU at a time)
    assert device_ceilings(cluster_id, ["dra.nvidia.com/gpu", "cpu"]) == {"dra.nvidia.com/gpu": 3}
    cq = dra_queue("dra.nvidia.com/gpu", "3")
    cq.set_nominal_quota("dra-devices", "dra.nvidia.com/gpu", "4")
    with pytest.raises(ValidationError) as refused:
        save_cluster_queue(actor=platform_admin, cluster_queue=cq, source="api")
    assert "override_reason" in refused.value.message_dict
    client.force_login(platform_admin)
    page = client.get("/queues/cluster-queues/dra-gpus/edit/").content.decode()
    cell = page[page.index("_capacity") : page.index("_capacity") + 400]
    assert "DRA: 3 devices of gpu.nvidia.com at once (Kueue's mapping)" in page, cell
    assert 'id="kueue-config-box"' not in page


@pytest.mark.django_db
def test_the_form_says_kueue_maps_no_class_to_a_quota_it_names(
    client: Client, platform_admin: User
) -> None:
    kueue_on_the_recorded_dra_cluster("resources: {}\n")
    dra_queue("gpu.nvidia.com", "2")
    client.force_login(platform_admin)
    page = client.get("/queues/cluster-queues/dra-gpus/edit/").content.decode()
    assert 'id="kueue-config-box"' in page
    assert (
        "gpu.nvidia.com is a DeviceClass, not a resource Kueue counts: Kueue charges its claims "
        "in no resource (resources.deviceClassMappings in Kueue&#x27;s configuration maps it to "
        "none)." in page
    )
