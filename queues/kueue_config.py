"""What Kueue's own configuration says of Dynamic Resource Allocation (pure, no Django).

Kueue charges a workload's DRA devices in a ClusterQueue's quota only through its
Configuration (``config.kueue.x-k8s.io/v1beta2``): ``resources.deviceClassMappings``, each
mapping a ``name`` (the resource a ClusterQueue's ``resourceGroups`` cover) to the
``deviceClassNames`` it counts; a class in two mappings counts in the first. The feature gate
``KueueDRAIntegration`` (beta and on by default from Kueue 0.18) turns it on. A Kueue install
keeps the Configuration in the ConfigMap ``kueue-system/kueue-manager-config``, under the key
``controller_manager_config.yaml``; the poll reads it (the portal's ClusterRole may get that
ConfigMap by name and no other). The facts and their sources: ``docs/reference/dra.md``,
"Kueue's quota on DRA devices".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

KUEUE_NAMESPACE = "kueue-system"
CONFIGMAP = "kueue-manager-config"
CONFIGMAP_KEY = "controller_manager_config.yaml"
GATE = "KueueDRAIntegration"
COUNTER_GATE = "KueueDRAIntegrationPartitionableDevices"


@dataclass(frozen=True)
class KueueDra:
    """Kueue's DRA settings on one cluster. ``read``: whether its configuration was read
    (``why`` says why not); ``mapped``: resource -> the device classes Kueue charges in it;
    ``counted``: the resources charged in a counter's units rather than in devices (a
    ``counter`` source, with its gate on); ``enabled``: the gate."""

    read: bool
    mapped: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    counted: frozenset[str] = frozenset()
    enabled: bool = True
    why: str = ""

    def resource_of(self, device_class: str) -> str | None:
        """The resource Kueue charges a claim of ``device_class`` in (None: in none, and
        Kueue holds the workload as misconfigured)."""
        for resource, classes in self.mapped.items():
            if device_class in classes:
                return resource
        return None

    @property
    def devices(self) -> dict[str, tuple[str, ...]]:
        """The mapped resources charged in devices (one per device a claim asks for)."""
        if not self.enabled:
            return {}
        return {r: c for r, c in self.mapped.items() if r not in self.counted}


NOT_READ = KueueDra(read=False, why="not read yet: the cluster has not been polled")


def _gates(config: Mapping[str, Any]) -> dict[str, bool]:
    gates = config.get("featureGates") or {}
    return {str(k): bool(v) for k, v in gates.items()} if isinstance(gates, Mapping) else {}


def parse(text: str | None) -> KueueDra:
    """Kueue's DRA settings from its Configuration as YAML text (None: no ConfigMap found)."""
    if text is None:
        return KueueDra(
            read=False,
            why=f"the ConfigMap {KUEUE_NAMESPACE}/{CONFIGMAP} was not found or may not be read",
        )
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return KueueDra(read=False, why=f"its configuration is no YAML ({exc.__class__.__name__})")
    if not isinstance(config, Mapping):
        return KueueDra(read=False, why="its configuration is no YAML mapping")
    gates = _gates(config)
    resources = config.get("resources") or {}
    mappings = resources.get("deviceClassMappings") if isinstance(resources, Mapping) else None
    mapped: dict[str, list[str]] = {}
    counted = set()
    seen: set[str] = set()
    for mapping in mappings if isinstance(mappings, list) else []:
        if not isinstance(mapping, Mapping) or not mapping.get("name"):
            continue
        name = str(mapping["name"])
        for device_class in mapping.get("deviceClassNames") or []:
            if str(device_class) not in seen:  # the first mapping of a class wins
                seen.add(str(device_class))
                mapped.setdefault(name, []).append(str(device_class))
        sources = mapping.get("sources") or []
        if gates.get(COUNTER_GATE, True) and any(
            isinstance(s, Mapping) and s.get("counter") for s in sources
        ):
            counted.add(name)
    return KueueDra(
        read=True,
        mapped={r: tuple(c) for r, c in mapped.items()},
        counted=frozenset(counted),
        enabled=gates.get(GATE, True),
    )


def _native(resource: str) -> bool:
    """Kubernetes' own resources (cpu, memory, pods, hugepages-…: no domain, or
    kubernetes.io's), which Kueue counts from pods' requests whatever its configuration."""
    return "/" not in resource or resource.split("/", 1)[0].endswith("kubernetes.io")


def quota_notes(
    resources: Iterable[str],
    config: KueueDra,
    *,
    device_classes: Mapping[str, str],
    offered: Iterable[str],
) -> dict[str, str]:
    """Resource -> why Kueue would count nothing (or not devices) in a ClusterQueue's quota
    of it, on a cluster serving DRA: a device class named as a resource, a resource no node
    offers that Kueue's configuration maps no class to (and no class names as its extended
    resource), a mapping with the gate off, one counted in a counter's units. ``device_classes``:
    the cluster's classes, each with its ``extendedResourceName`` ("" for none);
    ``offered``: the resources its nodes offer. Nothing for Kubernetes' own resources."""
    offered = set(offered)
    extended = {e for e in device_classes.values() if e}
    notes = {}
    for resource in resources:
        if resource in offered or resource in extended:
            continue
        if _native(resource) and resource not in device_classes:
            continue
        note = _note(resource, config, device_classes)
        if note:
            notes[resource] = note
    return notes


def _note(resource: str, config: KueueDra, device_classes: Mapping[str, str]) -> str:
    mapped = config.mapped.get(resource)
    where = "resources.deviceClassMappings in Kueue's configuration"
    if not config.read:
        if mapped is None and resource in device_classes:
            return (
                f"{resource} is a DeviceClass, not a resource Kueue counts: Kueue charges its "
                f"claims in the resource {where} maps it to."
            )
        return (
            f"No node offers {resource}: Kueue counts it only if {where} maps a device class "
            f"to it, and that configuration could not be read ({config.why})."
        )
    if mapped is None:
        if resource in device_classes:
            to = config.resource_of(resource)
            return (
                f"{resource} is a DeviceClass, not a resource Kueue counts: Kueue charges its "
                + (
                    f"claims in {to}."
                    if to
                    else f"claims in no resource ({where} maps it to none)."
                )
            )
        return (
            f"Kueue counts nothing in {resource}: no node offers it and {where} maps no "
            "device class to it."
        )
    if not config.enabled:
        return f"Kueue runs with its {GATE} feature gate off: it charges no claim in {resource}."
    if resource in config.counted:
        return (
            f"Kueue charges {resource} in the units of a DRA counter (a counter source), not "
            "in devices: its quota is not held to the fleet's device count."
        )
    missing = [c for c in mapped if c not in device_classes]
    if missing:
        return (
            f"Kueue charges claims of {', '.join(mapped)} in {resource}, but the cluster has no "
            f"DeviceClass {', '.join(missing)}."
        )
    return ""
