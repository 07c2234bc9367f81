"""How a node's GPUs are sliced, drawn as strips: per GPU its MIG instances (width = compute
slices), busy or free. From the DCGM exporter when it answered (exact: which instance runs
which pod), else from the node's MIG config and its allocated counts."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpus import catalog

NO_INSTANCE = "no instance"  # the profile shown for a GPU with MIG on and no instance


@dataclass
class Slice:
    profile: str  # "" for a whole GPU
    width: int
    busy: bool | None  # None: not known
    pod: str = ""
    note: str = ""  # said instead of the profile and state (a DRA GPU's counters left)

    @property
    def label(self) -> str:
        if self.note:
            return self.note
        if self.profile == NO_INSTANCE:
            return "MIG on, no instance (offers nothing)"
        what = self.profile or "whole GPU"
        state = {True: "in use", False: "free", None: "use unknown"}[self.busy]
        return f"{what} ({state})"  # never the pod: the fleet page is every team's


@dataclass
class GpuStrip:
    index: int
    total: int
    slices: list[Slice] = field(default_factory=list)
    lost: bool = False
    util: float | None = None
    name: str = ""  # said instead of "GPU <index>" (a DRA GPU: its counter set or device)

    @property
    def label(self) -> str:
        said = self.name or f"GPU {self.index}"
        if self.lost:
            return f"{said}: not reporting"
        return f"{said}: " + ", ".join(s.label for s in self.slices)


def _compute(model: str | None, profile: str) -> int:
    if model:
        try:
            return catalog.gpu_share(model, profile)[0]
        except (KeyError, StopIteration):
            pass
    head = profile.split("g.", 1)[0]
    return int(head) if head.isdigit() else 1


def _total(model: str | None) -> int:
    if model and model in catalog.gpu_models():
        return int(catalog.gpu_models()[model].get("compute_slices") or 7)
    return 7


@functools.lru_cache(maxsize=256)
def _layout(
    model: str | None, gpu_count: int, mig_config: str
) -> tuple[dict[str, int] | None, ...]:
    """A standard config's per-GPU devices on a model (the same for every node alike)."""
    config = catalog.standard_configs().get(mig_config)
    if model and config is not None:
        return tuple(catalog.config_layout(config, model, gpu_count)[0])
    return (None,) * gpu_count


def gpu_strips(
    *,
    product: str,
    gpu_count: int,
    mig_config: str,
    allocated: Mapping[str, int],
    health_gpus: Sequence[Mapping[str, Any]] | None = None,
) -> list[GpuStrip]:
    model = catalog.model_for_product(product) if product else None
    total = _total(model)
    if health_gpus:
        strips = []
        for gpu in health_gpus:
            strip = GpuStrip(int(gpu["index"]), total, util=gpu.get("util"))
            strip.lost = gpu.get("temperature_c") is None and bool(gpu.get("xid"))
            for instance in gpu.get("instances") or []:
                strip.slices.append(
                    Slice(
                        instance["profile"],
                        _compute(model, instance["profile"]),
                        bool(instance.get("pod")),
                        instance.get("pod", ""),
                    )
                )
            if not strip.slices and not strip.lost:
                strip.slices.append(Slice("", total, bool(gpu.get("pod")), gpu.get("pod", "")))
            strips.append(strip)
        return strips
    layout = _layout(model, gpu_count, mig_config)
    left = dict(allocated)
    strips = []
    for index, devices in enumerate(layout):
        strip = GpuStrip(index, total)
        if devices is None:
            strip.slices.append(Slice("", total, None))
        elif devices == catalog.NO_INSTANCES:
            strip.slices.append(Slice(NO_INSTANCE, total, None))
        elif not devices:
            busy = left.get("nvidia.com/gpu", 0) > 0
            left["nvidia.com/gpu"] = left.get("nvidia.com/gpu", 0) - 1
            strip.slices.append(Slice("", total, busy))
        else:
            for profile, count in sorted(devices.items()):  # devices is shared: read only
                resource = catalog.resource_name(profile)
                for _ in range(count):
                    busy = left.get(resource, 0) > 0
                    left[resource] = left.get(resource, 0) - 1
                    strip.slices.append(Slice(profile, _compute(model, profile), busy))
        strips.append(strip)
    return strips
