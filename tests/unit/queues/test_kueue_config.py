"""Kueue's DRA mappings read from its Configuration, and what the queue form says of a quota
Kueue would count nothing in (docs/reference/dra.md, "Kueue's quota on DRA devices")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from changes.quota import request_quota_change
from cluster.decode import charged_requests
from cluster.scope import settings_cluster_id
from loop.write import write_managed
from queues.dra import Ceiling, dra_ceilings, kueue_dra
from queues.kueue_config import (
    CONFIGMAP,
    CONFIGMAP_KEY,
    KUEUE_NAMESPACE,
    CounterSource,
    counter_text,
    parse,
    quota_notes,
)
from queues.models import ClusterQueue
from queues.observed import held_by_kueue
from queues.services import save_cluster_queue
from queues.whatif import Group, Queue, Quota, Workload, World, what_if
from tenants.models import Team
from tests.factories import (
    ClusterQueueFactory,
    LocalQueueFactory,
    NamespaceFactory,
    ResourceFlavorFactory,
)
from tests.support import bearer
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
    assert config.counters == {
        "dra.nvidia.com/mig-memory": (CounterSource("memory", "gpu.nvidia.com", "true"),)
    }
    assert config.unit("dra.nvidia.com/mig-memory") == "memory"
    assert config.unit("dra.nvidia.com/gpu") == "devices"
    gate_off = parse(CONFIG + "featureGates:\n  KueueDRAIntegrationPartitionableDevices: false\n")
    assert gate_off.counted == frozenset() and "dra.nvidia.com/mig-memory" in gate_off.devices
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
        "dra.nvidia.com/mig-memory": "Kueue charges dra.nvidia.com/mig-memory in the units of "
        "the DRA counter memory (a counter source), not in devices: how much of it the "
        "cluster's devices could give at once is not known here (a selector this reading does "
        "not evaluate), so its quota is held to no ceiling.",
    }
    summed = quota_notes(
        ["dra.nvidia.com/mig-memory"],
        parse(CONFIG),
        device_classes=CLASSES,
        offered=(),
        counter_ceilings={"dra.nvidia.com/mig-memory": 2 * 85899345920},
    )
    assert summed == {
        "dra.nvidia.com/mig-memory": "Kueue charges dra.nvidia.com/mig-memory in the units of "
        "the DRA counter memory (a counter source), not in devices: the cluster's DRA devices "
        "of mig.nvidia.com could give at most 160Gi of it at once, the most its quota can be "
        "backed by."
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
    assert dra_ceilings(cluster_id, ["dra.nvidia.com/gpu", "cpu"]) == {
        "dra.nvidia.com/gpu": Ceiling(3, "devices", ("gpu.nvidia.com",))
    }
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


# Counter sources as Kueue 0.19's Configuration spells them (apis/config/v1beta2,
# DeviceClassCounterSource: name, driver, deviceSelector), the counters the NVIDIA driver
# publishes (docs/reference/dra.md): the A100's set shares 98 multiprocessors and 80Gi memory.
COUNTERS = """
resources:
  deviceClassMappings:
  - name: dra.nvidia.com/mig-sm
    deviceClassNames: [mig.nvidia.com]
    sources:
    - counter:
        name: multiprocessors
        driver: gpu.nvidia.com
        deviceSelector:
          cel:
            expression: "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'"
  - name: gpu.memory
    deviceClassNames: [vfio.gpu.nvidia.com, gpu.nvidia.com]
    sources:
    - counter: {name: memory, driver: gpu.nvidia.com, deviceSelector: {cel: {expression: "true"}}}
"""


def test_the_counter_ceiling_sums_each_shared_set_its_classes_devices_consume() -> None:
    assert counter_text(98) == "98" and counter_text(85899345920) == "80Gi"
    assert counter_text(42 * 1024**2 + 512) == "44040704"


@pytest.mark.django_db
def test_a_counter_quota_is_held_to_the_counter_its_gpus_share_at_once() -> None:
    cluster_id = kueue_on_the_recorded_dra_cluster(COUNTERS)
    # The A100's one counter set, once, whatever how many of its devices the classes select;
    # the H100s share no counter set and give none.
    assert dra_ceilings(cluster_id, ["dra.nvidia.com/mig-sm", "gpu.memory", "cpu"]) == {
        "dra.nvidia.com/mig-sm": Ceiling(98, "multiprocessors", ("mig.nvidia.com",)),
        "gpu.memory": Ceiling(80 * 1024**3, "memory", ("vfio.gpu.nvidia.com", "gpu.nvidia.com")),
    }
    other = COUNTERS.replace("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3")
    kueue_on_the_recorded_dra_cluster(other)
    assert dra_ceilings(cluster_id, ["dra.nvidia.com/mig-sm"]) == {
        "dra.nvidia.com/mig-sm": Ceiling(0, "multiprocessors", ("mig.nvidia.com",))
    }
    unread = COUNTERS.replace("productName ==", "productName.startsWith(").replace(
        "80GB'", "80GB')"
    )
    kueue_on_the_recorded_dra_cluster(unread)
    assert "dra.nvidia.com/mig-sm" not in dra_ceilings(cluster_id, ["dra.nvidia.com/mig-sm"])


@pytest.mark.django_db
def test_a_counter_quota_beyond_the_fleets_counter_is_refused_with_its_ceiling(
    client: Client, platform_admin: User
) -> None:
    kueue_on_the_recorded_dra_cluster(COUNTERS)
    cq = dra_queue("dra.nvidia.com/mig-sm", "98")
    cq.set_nominal_quota("dra-devices", "dra.nvidia.com/mig-sm", "140")
    with pytest.raises(ValidationError) as refused:
        save_cluster_queue(actor=platform_admin, cluster_queue=cq, source="api")
    assert refused.value.message_dict["override_reason"] == [
        "Queues would promise 140 dra.nvidia.com/mig-sm, which Kueue charges in the DRA counter "
        "multiprocessors, but the cluster's DRA devices could give at most 98 of it at once: "
        "give the reason to promise beyond the fleet (recorded with the save), or lower it."
    ]
    save_cluster_queue(
        actor=platform_admin,
        cluster_queue=cq,
        source="api",
        override_reason="a second A100 is on order",
        promise_more_than_exists=True,
    )
    client.force_login(platform_admin)
    with CaptureQueriesContext(connection) as asked:
        page = client.get("/queues/cluster-queues/dra-gpus/edit/").content.decode()
    slices = [q for q in asked.captured_queries if "observedresourceslice" in q["sql"]]
    assert len(slices) == 1  # the counter's ceiling summed once, for the promise and the note
    cell = page[page.index("_capacity") : page.index("_capacity") + 600]
    assert (
        "DRA: 98 of the counter multiprocessors at once on the GPUs of mig.nvidia.com "
        "(Kueue's counter source); queues would promise 140" in page
    ), cell
    assert "the cluster&#x27;s DRA devices of mig.nvidia.com could give at most 98 of it" in page


@pytest.mark.django_db
def test_a_quota_request_on_a_counter_is_weighed_against_its_ceiling(
    team_a: Team, team_a_admin: User, platform_admin: User
) -> None:
    kueue_on_the_recorded_dra_cluster(COUNTERS)
    cq = dra_queue("dra.nvidia.com/mig-sm", "42")
    LocalQueueFactory(namespace=NamespaceFactory(name="team-a-work", team=team_a), cluster_queue=cq)
    with pytest.raises(ValidationError) as refused:
        request_quota_change(
            actor=team_a_admin,
            team=team_a,
            kind="queue",
            cluster_queue=cq,
            flavor="dra-devices",
            resource="dra.nvidia.com/mig-sm",
            requested="120",
            reason="more 3g slices",
            source="api",
        )
    assert refused.value.message_dict["requested"] == [
        "The cluster's DRA devices of mig.nvidia.com could never give more than 98 of the "
        "counter multiprocessors, which Kueue charges dra.nvidia.com/mig-sm in: 120 can never "
        "be backed. Ask for at most 98, or ask a platform admin (who can override this with a "
        "reason)."
    ]
    asked = request_quota_change(
        actor=platform_admin,
        team=team_a,
        kind="queue",
        cluster_queue=cq,
        flavor="dra-devices",
        resource="dra.nvidia.com/mig-sm",
        requested="84",
        reason="two 3g slices",
        source="api",
    )
    assert any(
        "Kueue charges dra.nvidia.com/mig-sm in the DRA counter multiprocessors: the cluster's "
        "devices of mig.nvidia.com could give 98 of it at once; queues would promise 84." in n
        for n in asked.assessment["notes"]
    ), asked.assessment


@pytest.mark.django_db
def test_a_quota_in_a_memory_counters_bytes_is_no_count_of_devices(platform_admin: User) -> None:
    """A resource with a domain is counted in whole devices, below 2^31; one Kueue charges in
    a memory counter is bytes (80Gi is 85899345920), held to the counter's ceiling instead."""
    kueue_on_the_recorded_dra_cluster(CONFIG)
    cq = dra_queue("dra.nvidia.com/mig-memory", "80Gi")
    assert dra_ceilings(cq.cluster_id, ["dra.nvidia.com/mig-memory"]) == {
        "dra.nvidia.com/mig-memory": Ceiling(80 * 1024**3, "memory", ("mig.nvidia.com",))
    }
    save_cluster_queue(actor=platform_admin, cluster_queue=cq, source="api")
    cq.set_nominal_quota("dra-devices", "dra.nvidia.com/mig-memory", "120Gi")
    with pytest.raises(ValidationError) as refused:
        save_cluster_queue(actor=platform_admin, cluster_queue=cq, source="api")
    assert (
        "could give at most 80Gi of it at once" in refused.value.message_dict["override_reason"][0]
    )
    other = ClusterQueue(name="dra-typo", cluster_id=cq.cluster_id, namespace_selector={})
    other.resource_groups = [
        {
            "coveredResources": ["dra.nvidia.com/typo"],
            "flavors": [
                {
                    "name": "dra-devices",
                    "resources": [{"name": "dra.nvidia.com/typo", "nominalQuota": "80Gi"}],
                }
            ],
        }
    ]
    with pytest.raises(ValidationError) as counted:
        other.full_clean()
    assert "must be at most 2147483647" in str(counted.value)


@pytest.mark.django_db
def test_the_apis_dry_run_shows_a_counter_quota_against_its_ceiling(
    client: Client, platform_admin: User
) -> None:
    kueue_on_the_recorded_dra_cluster(COUNTERS)
    dra_queue("dra.nvidia.com/mig-sm", "42")
    read = client.get("/api/v1/cluster-queues/dra-gpus/", headers=bearer("padmin"))
    groups = read.json()["resource_groups"]
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "140"
    dry = client.put(
        "/api/v1/cluster-queues/dra-gpus/quotas/",
        {"resource_groups": groups, "dry_run": True},
        content_type="application/json",
        headers=bearer("padmin"),
    ).json()
    (promise,) = dry["promises"]
    assert (promise["offered"], promise["promised"], promise["ceiling"], promise["unit"]) == (
        98,
        140,
        98,
        "multiprocessors",
    )
    assert any("could give at most 98 of it at once" in m for m in dry["refused"]), dry
    assert dry["kueue_notes"]["dra.nvidia.com/mig-sm"].endswith(
        "the cluster's DRA devices of mig.nvidia.com could give at most 98 of it at once, the "
        "most its quota can be backed by."
    )
