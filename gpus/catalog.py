"""The GPU and MIG catalog, read from ``reference/mig-profiles.yaml`` (reference data).

Pure Python (no Django): rules and renderers may use it. The YAML is a research snapshot
of NVIDIA's MIG profiles per GPU model, with placements and the resource names the device
plugin advertises; its header explains every field.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parent.parent / "reference" / "mig-profiles.yaml"

# Whole GPUs and time-sliced / MPS GPUs renamed with renameByDefault.
WHOLE_GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")


@functools.cache
def catalog() -> dict[str, Any]:
    return dict(yaml.safe_load(DATA.read_text()))


@functools.cache
def known_gpu_resources() -> frozenset[str]:
    """Every ``nvidia.com/...`` resource name a node of a known GPU model can offer."""
    names = set(WHOLE_GPU_RESOURCES)
    for model in catalog()["gpus"].values():
        for profile in model.get("profiles", []):
            names.add(profile["resource_name"])
            names.add(f"{profile['resource_name']}.shared")
    return frozenset(names)


def unknown_gpu_resource_note(resource: str) -> str | None:
    """A note when an ``nvidia.com/`` name is offered by no known GPU (likely a typo)."""
    if not resource.startswith("nvidia.com/") or resource in known_gpu_resources():
        return None
    close = difflib.get_close_matches(resource, sorted(known_gpu_resources()), n=1, cutoff=0.8)
    hint = f" Did you mean {close[0]}?" if close else ""
    return (
        f"{resource} is not offered by any GPU model in the MIG catalog, so nothing will ever "
        f"use this entry.{hint}"
    )


# ----------------------------------------------------------------------------- models

CONFIGS = Path(__file__).resolve().parent.parent / "reference" / "mig-parted-config.yaml"


@functools.cache
def standard_configs() -> dict[str, list[dict[str, Any]]]:
    """The GPU Operator's named mig-parted configs (and the reference's custom examples)."""
    return dict(yaml.safe_load(CONFIGS.read_text())["mig-configs"])


def gpu_models() -> dict[str, dict[str, Any]]:
    return dict(catalog()["gpus"])


@functools.cache
def model_for_product(product: str) -> str | None:
    """The catalog key of a GFD ``nvidia.com/gpu.product`` value (MIG suffixes ignored)."""
    base = product.split("-MIG-")[0]
    for name, model in catalog()["gpus"].items():
        if any(label["value"] == base for label in model.get("gfd_product_labels", [])):
            return str(name)
    return None


def resource_name(profile: str) -> str:
    """``1g.10gb+me`` -> ``nvidia.com/mig-1g.10gb.me`` (the device plugin's spelling)."""
    return "nvidia.com/mig-" + profile.replace("+", ".")


def most_per_gpu(model_name: str | None, resource: str) -> int:
    """The most of ``resource`` one GPU of this model can ever offer, whatever its layout:
    1 whole GPU (any model, known or not), or the profile's ``max_instances`` (0 for a
    profile the model lacks, or a model the catalog does not know)."""
    if resource == "nvidia.com/gpu":
        return 1
    model = gpu_models().get(model_name or "")
    if model is None:
        return 0
    return max(
        (
            int(p["max_instances"])
            for p in model.get("profiles", [])
            if resource_name(p["name"]) == resource
        ),
        default=0,
    )


def placement_errors(model_name: str, devices: dict[str, int]) -> list[str]:
    """Why these MIG instances cannot share one GPU of this model (empty when they can).

    Checks each profile exists for the model, its maximum count, and that all instances
    can be given non-overlapping placements on the model's grid (as nvidia-smi's
    ``-lgipp`` lists them); mig-parted tries every order, so order does not matter.
    """
    model = gpu_models().get(model_name)
    if model is None:
        return [f"unknown GPU model {model_name!r}"]
    profiles = {p["name"]: p for p in model.get("profiles", [])}
    errors = []
    instances: list[tuple[list[int], int]] = []
    for name, count in devices.items():
        profile = profiles.get(name)
        if profile is None:
            known = ", ".join(sorted(profiles)) or "none"
            errors.append(f"{model_name} has no MIG profile {name} (it has: {known})")
            continue
        if count < 0:
            errors.append(f"{name}: the count cannot be negative")
            continue
        if count > profile["max_instances"]:
            errors.append(
                f"{name}: at most {profile['max_instances']} per GPU on {model_name}, not {count}"
            )
            continue
        placements = profile["placements"]
        instances += [(list(placements["starts"]), int(placements["size"]))] * count
    if errors:
        return errors
    units = int(model["placement_units"])
    instances.sort(key=lambda item: -item[1])

    def place(index: int, used: int) -> bool:
        if index == len(instances):
            return True
        starts, size = instances[index]
        for start in starts:
            mask = ((1 << size) - 1) << start
            if start + size <= units and not used & mask and place(index + 1, used | mask):
                return True
        return False

    if not place(0, 0):
        mix = " + ".join(f"{n} x {p}" for p, n in devices.items() if n)
        return [
            f"{mix} does not fit one {model_name}: the instances overlap on its {units}-slot "
            "placement grid (see the profiles' allowed start positions)"
        ]
    return []


def _entry_matches(entry: dict[str, Any], model: dict[str, Any], index: int) -> bool:
    filters = entry.get("device-filter")
    if filters is not None:
        wanted = {f.upper() for f in ([filters] if isinstance(filters, str) else filters)}
        if not wanted & {d.upper() for d in model.get("pci_device_ids", [])}:
            return False
    devices = entry.get("devices", "all")
    return devices == "all" or index in devices


# A GPU with MIG mode on and no instance (``all-enabled``, or a failed re-slice): it offers
# neither a whole GPU nor any MIG device. Written as a layout entry with one zero count, so
# that ``{}`` keeps meaning "MIG off, the whole GPU".
NO_INSTANCES: Mapping[str, int] = {"": 0}


def config_layout(
    config: list[dict[str, Any]],
    model_name: str,
    gpu_count: int,
) -> tuple[list[dict[str, int] | None], list[str]]:
    """Per GPU: its MIG devices ({} = MIG off, whole GPU; :data:`NO_INSTANCES` = MIG on with
    no instance, nothing offered; None = no entry matches, left as it is), and errors for
    entries that cannot work on this model."""
    model = gpu_models()[model_name]
    layout: list[dict[str, int] | None] = []
    errors: list[str] = []
    for index in range(gpu_count):
        chosen = next((e for e in config if _entry_matches(e, model, index)), None)
        if chosen is None:
            layout.append(None)
        elif not chosen.get("mig-enabled"):
            layout.append({})
        elif not any(int(v) for v in (chosen.get("mig-devices") or {}).values()):
            layout.append(dict(NO_INSTANCES))  # MIG on, no instance: the GPU offers nothing
        else:
            devices = {str(k): int(v) for k, v in (chosen.get("mig-devices") or {}).items()}
            problems = placement_errors(model_name, devices)
            if problems:
                errors.extend(f"GPU {index}: {p}" for p in problems)
            layout.append(devices)
    return layout, sorted(set(errors))


def layout_resources(layout: list[dict[str, int] | None]) -> dict[str, int]:
    """What a node with this layout advertises (mixed strategy)."""
    totals: dict[str, int] = {}
    for gpu in layout:
        if gpu is None:
            continue
        if not gpu:
            totals["nvidia.com/gpu"] = totals.get("nvidia.com/gpu", 0) + 1
        for profile, count in gpu.items():
            if count and profile:
                name = resource_name(profile)
                totals[name] = totals.get(name, 0) + count
    return totals


def gpu_share(model_name: str, profile: str) -> tuple[int, int, int, int]:
    """(compute slices, of total, memory slices, of total) of one instance of a profile."""
    model = gpu_models()[model_name]
    entry = next(p for p in model["profiles"] if p["name"] == profile)
    return (
        int(entry["compute_slices"]),
        int(model["compute_slices"]),
        int(entry["memory_slices"]),
        int(model["memory_slices_total"]),
    )


# ----------------------------------------------------------------------------- configs on nodes

# Custom configs an admin defined: name -> (GPU model, MIG devices on every GPU).
CustomConfigs = Mapping[str, tuple[str, Mapping[str, int]]]


def config_entries(name: str, custom: CustomConfigs) -> list[dict[str, Any]] | None:
    """A config's mig-parted entries: standard, or custom (same devices on every GPU)."""
    if name in custom:
        model, devices = custom[name]
        return [
            {"devices": "all", "mig-enabled": True, "mig-devices": dict(devices), "_model": model}
        ]
    return standard_configs().get(name)


def promised_resources(
    config: str, *, node: str, model: str | None, gpu_count: int, custom: CustomConfigs
) -> tuple[dict[str, int] | None, list[str]]:
    """What ``node`` (``gpu_count`` GPUs of ``model``) will offer on ``config``, or None with
    the reasons the config cannot apply."""
    entries = config_entries(config, custom)
    if entries is None:
        return None, [f"There is no MIG config named {config}."]
    if model is None:
        return None, [f"{node} has no GPU model the portal knows."]
    custom_model = entries[0].get("_model")
    if custom_model and custom_model != model:
        return None, [f"{config} is defined for {custom_model}, but {node} has {model} GPUs."]
    devices = tuple(sorted(custom[config][1].items())) if config in custom else None
    offered, error = _config_on(config, devices, model, gpu_count)
    if error == "none":
        return None, [
            f"{config} matches none of {node}'s {model} GPUs: MIG Manager would "
            "report success and change nothing."
        ]
    if error:
        return None, [f"{config} cannot be applied to {model}: {error}"]
    return dict(offered), []


@functools.lru_cache(maxsize=4096)
def _config_on(
    config: str, devices: tuple[tuple[str, int], ...] | None, model: str, gpu_count: int
) -> tuple[tuple[tuple[str, int], ...], str]:
    """What a config makes of ``gpu_count`` GPUs of ``model``: the resources, or why not
    ("none" when no entry matches). Computed once per config, model and GPU count (a pool
    of a thousand alike nodes asks a thousand times)."""
    if devices is None:
        entries = standard_configs()[config]
    else:
        entries = [{"devices": "all", "mig-enabled": True, "mig-devices": dict(devices)}]
    layout, errors = config_layout(entries, model, gpu_count)
    if errors:
        return (), errors[0]
    if all(gpu is None for gpu in layout):
        return (), "none"
    return tuple(layout_resources(layout).items()), ""


def valid_configs(
    *, node: str, model: str | None, gpu_count: int, custom: CustomConfigs
) -> list[str]:
    """Config names a node's GPU model can take (what a request form offers)."""
    names = sorted(set(standard_configs()) | set(custom))
    return [
        name
        for name in names
        if promised_resources(name, node=node, model=model, gpu_count=gpu_count, custom=custom)[0]
        is not None
    ]
