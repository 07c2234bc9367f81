"""GPU behaviour: what a MIG config makes of a node, as mig-parted and the device plugin do.

Reads ``reference/mig-profiles.yaml`` (profiles, placements, PCI ids per GPU model) and
``reference/mig-parted-config.yaml`` (the GPU Operator's named configs).
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REFERENCE = Path(__file__).resolve().parent.parent / "reference"


@functools.cache
def profiles_data() -> dict[str, Any]:
    return dict(yaml.safe_load((REFERENCE / "mig-profiles.yaml").read_text()))


@functools.cache
def mig_configs() -> dict[str, list[dict[str, Any]]]:
    return dict(yaml.safe_load((REFERENCE / "mig-parted-config.yaml").read_text())["mig-configs"])


@functools.cache
def model_for_product(product: str) -> tuple[str, dict[str, Any]] | None:
    """The catalog entry of a GFD ``nvidia.com/gpu.product`` label value."""
    base = product.split("-MIG-")[0]
    for name, model in profiles_data()["gpus"].items():
        if any(label["value"] == base for label in model.get("gfd_product_labels", [])):
            return name, model
    return None


def resource_name(profile: str) -> str:
    return "nvidia.com/mig-" + profile.replace("+", ".")


@dataclass
class Layout:
    """What a node offers after a MIG config is applied."""

    resources: Counter[str]
    success: bool
    message: str = ""
    per_gpu: list[dict[str, int]] | None = None


def _fits(model: dict[str, Any], devices: dict[str, int]) -> bool:
    """Whether these instances fit one GPU under the placement grid."""
    by_name = {p["name"]: p for p in model.get("profiles", [])}
    instances: list[tuple[list[int], int]] = []
    for name, count in devices.items():
        profile = by_name.get(name)
        if profile is None or count > profile["max_instances"]:
            return False
        instances += [(profile["placements"]["starts"], profile["placements"]["size"])] * count
    units = model["placement_units"]
    instances.sort(key=lambda i: -i[1])

    def place(i: int, used: int) -> bool:
        if i == len(instances):
            return True
        starts, size = instances[i]
        for start in starts:
            mask = ((1 << size) - 1) << start
            if start + size <= units and not used & mask and place(i + 1, used | mask):
                return True
        return False

    return place(0, 0)


def apply_config(
    product: str, gpu_count: int, config_name: str, current: list[dict[str, int]] | None
) -> Layout:
    """The node's GPU resources after mig-parted applies ``config_name``.

    Mirrors the facts in the reference: an unknown name fails; an entry whose profile the
    GPU lacks leaves MIG on with no instances and fails; GPUs no entry matches are left as
    they were (and the state still says success).
    """
    found = model_for_product(product)
    if found is None:
        return Layout(
            Counter({"nvidia.com/gpu": gpu_count}), False, f"unknown GPU product {product}"
        )
    _, model = found
    entries = mig_configs().get(config_name)
    before = current or [{} for _ in range(gpu_count)]
    if entries is None:
        return Layout(
            Counter(), False, f"config {config_name!r} not found", [{"mig-enabled": 1}] * gpu_count
        )
    device_ids = {d.upper() for d in model.get("pci_device_ids", [])}
    per_gpu: list[dict[str, int]] = [dict(g) for g in before]
    ok = True
    for index in range(gpu_count):
        for entry in entries:
            filters = entry.get("device-filter")
            if filters is not None:
                filters = [filters] if isinstance(filters, str) else filters
                if not device_ids & {f.upper() for f in filters}:
                    continue
            devices = entry.get("devices", "all")
            if devices != "all" and index not in devices:
                continue
            if not entry.get("mig-enabled"):
                per_gpu[index] = {}
            else:
                wanted = {str(k): int(v) for k, v in (entry.get("mig-devices") or {}).items()}
                if not _fits(model, wanted):
                    per_gpu[index] = {"mig-enabled": 1}
                    ok = False
                else:
                    per_gpu[index] = {"mig-enabled": 1, **wanted}
            break
    return Layout(_count(per_gpu), ok, "" if ok else "MIG profile not found on this GPU", per_gpu)


def _count(per_gpu: list[dict[str, int]]) -> Counter[str]:
    resources: Counter[str] = Counter()
    for gpu in per_gpu:
        if not gpu:
            resources["nvidia.com/gpu"] += 1
            continue
        for name, count in gpu.items():
            if name != "mig-enabled":
                resources[resource_name(name)] += count
    return resources


def layout_from_resources(resources: dict[str, int], gpu_count: int) -> list[dict[str, int]]:
    """A per-GPU picture consistent with a node's advertised resources (for seeding)."""
    per_gpu: list[dict[str, int]] = [{} for _ in range(gpu_count)]
    whole = resources.get("nvidia.com/gpu", 0)
    mig = {
        k.removeprefix("nvidia.com/mig-"): v
        for k, v in resources.items()
        if k.startswith("nvidia.com/mig-")
    }
    for index in range(whole, gpu_count):
        per_gpu[index] = {"mig-enabled": 1}
        for name, total in mig.items():
            share = total // max(1, gpu_count - whole)
            if share:
                per_gpu[index][name] = share
    return per_gpu


def node_gpu_labels(product: str, gpu_count: int, resources: dict[str, int]) -> dict[str, str]:
    """GFD labels for the MIG devices a node offers (mixed strategy)."""
    labels: dict[str, str] = {}
    found = model_for_product(product)
    profiles = {p["name"]: p for p in found[1].get("profiles", [])} if found else {}
    for resource, count in sorted(resources.items()):
        if not resource.startswith("nvidia.com/mig-") or not count:
            continue
        short = resource.removeprefix("nvidia.com/")
        name = resource.removeprefix("nvidia.com/mig-")
        profile = profiles.get(name) or profiles.get(name.replace(".me", "+me"))
        labels[f"nvidia.com/{short}.count"] = str(count)
        labels[f"nvidia.com/{short}.product"] = f"{product}-MIG-{name}"
        labels[f"nvidia.com/{short}.replicas"] = "1"
        labels[f"nvidia.com/{short}.sharing-strategy"] = "none"
        if profile:
            labels[f"nvidia.com/{short}.slices.gi"] = str(profile["compute_slices"])
            labels[f"nvidia.com/{short}.slices.ci"] = str(profile["compute_slices"])
            labels[f"nvidia.com/{short}.memory"] = str(
                int(profile.get("memory_gib_reported", profile["memory_gib_nominal"]) * 1024)
            )
    return labels
