"""Kueue's DRA mappings read from its Configuration, and what the queue form says of a quota
Kueue would count nothing in (docs/reference/dra.md, "Kueue's quota on DRA devices")."""

from __future__ import annotations

import json
from pathlib import Path

from cluster.decode import charged_requests
from queues.kueue_config import parse, quota_notes
from queues.observed import held_by_kueue
from queues.whatif import Group, Queue, Quota, Workload, World, what_if

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
