"""The GPU and MIG catalog, read from ``reference/mig-profiles.yaml`` (reference data).

Pure Python (no Django): rules and renderers may use it. The YAML is a research snapshot
of NVIDIA's MIG profiles per GPU model, with placements and the resource names the device
plugin advertises; its header explains every field.
"""

from __future__ import annotations

import difflib
import functools
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
