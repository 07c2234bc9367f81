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

from portal.vocabulary.quantity import canonical_quantity

KUEUE_NAMESPACE = "kueue-system"
CONFIGMAP = "kueue-manager-config"
CONFIGMAP_KEY = "controller_manager_config.yaml"
GATE = "KueueDRAIntegration"
COUNTER_GATE = "KueueDRAIntegrationPartitionableDevices"


@dataclass(frozen=True)
class CounterSource:
    """A mapping's ``sources[].counter``: Kueue charges a claim of the mapping's classes the
    largest value of the counter ``name`` the matching devices of ``driver`` consume (times
    the request's count), among the devices ``selector`` (its ``deviceSelector``'s CEL, ""
    for none written) and the class select."""

    name: str
    driver: str
    selector: str = ""


@dataclass(frozen=True)
class KueueDra:
    """Kueue's DRA settings on one cluster. ``read``: whether its configuration was read
    (``why`` says why not); ``mapped``: resource -> the device classes Kueue charges in it;
    ``counters``: the resources charged in a counter's units rather than in devices (a
    ``counter`` source, with its gate on) -> their sources; ``enabled``: the gate."""

    read: bool
    mapped: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    counters: Mapping[str, tuple[CounterSource, ...]] = field(default_factory=dict)
    enabled: bool = True
    why: str = ""

    @property
    def counted(self) -> frozenset[str]:
        """The resources Kueue charges in a counter's units."""
        return frozenset(self.counters)

    def unit(self, resource: str) -> str:
        """What a quota of ``resource`` counts: the counter its sources name (``memory``,
        several joined by "+"), ``devices`` for a resource charged in devices."""
        sources = self.counters.get(resource, ())
        return "+".join(dict.fromkeys(s.name for s in sources)) if sources else "devices"

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
    counters: dict[str, tuple[CounterSource, ...]] = {}
    seen: set[str] = set()
    for mapping in mappings if isinstance(mappings, list) else []:
        if not isinstance(mapping, Mapping) or not mapping.get("name"):
            continue
        name = str(mapping["name"])
        for device_class in mapping.get("deviceClassNames") or []:
            if str(device_class) not in seen:  # the first mapping of a class wins
                seen.add(str(device_class))
                mapped.setdefault(name, []).append(str(device_class))
        found = _counter_sources(mapping.get("sources"))
        if found and gates.get(COUNTER_GATE, True):
            counters[name] = counters.get(name, ()) + found
    return KueueDra(
        read=True,
        mapped={r: tuple(c) for r, c in mapped.items()},
        counters=counters,
        enabled=gates.get(GATE, True),
    )


def _counter_sources(sources: Any) -> tuple[CounterSource, ...]:
    """A mapping's ``sources[].counter`` entries (``name``, ``driver``, ``deviceSelector.cel
    .expression``, as ``configuration_types.go`` spells them)."""
    out = []
    for source in sources if isinstance(sources, list) else []:
        counter = source.get("counter") if isinstance(source, Mapping) else None
        if not isinstance(counter, Mapping):
            continue
        selector = counter.get("deviceSelector") or {}
        cel = selector.get("cel") if isinstance(selector, Mapping) else None
        expression = cel.get("expression") if isinstance(cel, Mapping) else None
        out.append(
            CounterSource(
                name=str(counter.get("name") or ""),
                driver=str(counter.get("driver") or ""),
                selector=str(expression or ""),
            )
        )
    return tuple(out)


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
    counter_ceilings: Mapping[str, int | None] | None = None,
) -> dict[str, str]:
    """Resource -> why Kueue would count nothing (or not devices) in a ClusterQueue's quota
    of it, on a cluster serving DRA: a device class named as a resource, a resource no node
    offers that Kueue's configuration maps no class to (and no class names as its extended
    resource), a mapping with the gate off, one counted in a counter's units (with the most
    of that counter the fleet could give at once, ``counter_ceilings``: None where it is
    not known). ``device_classes``: the cluster's classes, each with its
    ``extendedResourceName`` ("" for none); ``offered``: the resources its nodes offer.
    Nothing for Kubernetes' own resources that Kueue's configuration does not map."""
    offered = set(offered)
    extended = {e for e in device_classes.values() if e}
    notes = {}
    for resource in resources:
        if resource in offered or resource in extended:
            continue
        if _native(resource) and resource not in device_classes and resource not in config.mapped:
            continue
        note = _note(resource, config, device_classes, counter_ceilings or {})
        if note:
            notes[resource] = note
    return notes


def counter_text(amount: int) -> str:
    """A counter's amount as a quota is written: a whole number of mebibytes or more in its
    binary form (``171798691840`` is ``160Gi``, as the API server lists a memory counter),
    anything else as Kubernetes' canonical form writes it (``196``)."""
    if amount >= 1024**2 and amount % 1024 == 0:
        return canonical_quantity(f"{amount // 1024}Ki")
    return canonical_quantity(str(amount))


def _counted_note(resource: str, config: KueueDra, ceiling: int | None) -> str:
    said = (
        f"Kueue charges {resource} in the units of the DRA counter {config.unit(resource)} (a "
        "counter source), not in devices: "
    )
    if ceiling is None:
        return said + (
            "how much of it the cluster's devices could give at once is not known here (a "
            "selector this reading does not evaluate), so its quota is held to no ceiling."
        )
    return said + (
        f"the cluster's DRA devices of {', '.join(config.mapped.get(resource, ()))} could give "
        f"at most {counter_text(ceiling)} of it at once, the most its quota can be backed by."
    )


def _note(
    resource: str,
    config: KueueDra,
    device_classes: Mapping[str, str],
    counter_ceilings: Mapping[str, int | None],
) -> str:
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
        return _counted_note(resource, config, counter_ceilings.get(resource))
    missing = [c for c in mapped if c not in device_classes]
    if missing:
        return (
            f"Kueue charges claims of {', '.join(mapped)} in {resource}, but the cluster has no "
            f"DeviceClass {', '.join(missing)}."
        )
    return ""
