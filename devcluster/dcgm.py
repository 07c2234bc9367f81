"""What NVIDIA's DCGM exporter answers on ``:9400/metrics`` for one node, in its own format.

Series and labels follow dcgm-exporter's defaults (``dcp-metrics-included.csv`` with
Kubernetes mode on): per GPU ``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``,
``Hostname``, ``DCGM_FI_DRIVER_VERSION``; MIG instances add ``GPU_I_PROFILE`` and
``GPU_I_ID``; a device given to a pod adds ``namespace``, ``pod`` and ``container``.
``DCGM_FI_DEV_GPU_UTIL`` is not reported for MIG devices (``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
is). Values are deterministic for a node, GPU and minute, so tests can rely on them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

DRIVER = "580.105.08"
MODEL_NAMES = {
    "NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA-H100-80GB-HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA-L40S": "NVIDIA L40S",
    "NVIDIA-L40S-SHARED": "NVIDIA L40S",  # time-sliced: GFD marks the label, NVML does not
}
XID_MESSAGES = {
    48: "DBE (Double Bit Error) ECC Error",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate",
    79: "GPU has fallen off the bus",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
}
SERIES = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
)


@dataclass(frozen=True)
class Device:
    """One GPU (``profile`` empty) or one MIG instance, and the pod it is given to."""

    gpu: int
    profile: str = ""
    instance: int = 0
    namespace: str = ""
    pod: str = ""
    container: str = ""


def _noise(*parts: object) -> float:
    """A stable number in [0, 1) for these parts."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def devices(
    layout: list[dict[str, int]], pods: Iterable[tuple[str, str, str, dict[str, int]]]
) -> list[Device]:
    """The node's devices (per GPU: whole, or its MIG instances in profile order), each given
    to a pod in turn: ``pods`` are (namespace, name, container, {resource: count})."""
    free: dict[str, list[Device]] = {}
    for index, gpu in enumerate(layout):
        profiles = {k: v for k, v in gpu.items() if k != "mig-enabled"}
        if not profiles and "mig-enabled" not in gpu:
            free.setdefault("nvidia.com/gpu", []).append(Device(index))
            continue
        instance = 1
        for profile in sorted(profiles):
            for _ in range(profiles[profile]):
                resource = "nvidia.com/mig-" + profile
                free.setdefault(resource, []).append(Device(index, profile, instance))
                instance += 1
    given: list[Device] = []
    for namespace, name, container, wants in pods:
        for resource, count in sorted(wants.items()):
            pool = free.get(resource, [])
            for _ in range(min(count, len(pool))):
                device = pool.pop(0)
                given.append(
                    Device(
                        device.gpu,
                        device.profile,
                        device.instance,
                        namespace,
                        name,
                        container,
                    )
                )
    rest = [d for pool in free.values() for d in pool]
    return sorted(given + rest, key=lambda d: (d.gpu, d.instance))


def _labels(pairs: dict[str, str]) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in pairs.items()) + "}"


def exposition(
    *,
    node: str,
    product: str,
    memory_mib: int,
    layout: list[dict[str, int]],
    pods: Iterable[tuple[str, str, str, dict[str, int]]],
    xids: dict[int, int] | None = None,
    minute: int = 0,
    idle: frozenset[tuple[str, str]] = frozenset(),
) -> str:
    """The text ``/metrics`` returns. ``xids``: GPU index -> the last Xid it reported (a GPU
    that fell off the bus, Xid 79, reports nothing else); ``idle``: (namespace, pod) of the
    pods that hold their devices without using them (0 % active)."""
    xids = xids or {}
    model = MODEL_NAMES.get(product, product.replace("-", " "))
    rows: dict[str, list[str]] = {name: [] for name, _, _ in SERIES}
    by_gpu: dict[int, list[Device]] = {}
    for device in devices(layout, pods):
        by_gpu.setdefault(device.gpu, []).append(device)
    for index in range(len(layout)):
        base = {
            "gpu": str(index),
            "UUID": "GPU-" + hashlib.md5(f"{node}/{index}".encode()).hexdigest()[:8] + "-demo",
            "pci_bus_id": f"00000000:{0x18 + index * 0x10:02X}:00.0",
            "device": f"nvidia{index}",
            "modelName": model,
            "Hostname": node,
            "DCGM_FI_DRIVER_VERSION": DRIVER,
        }
        xid = xids.get(index, 0)
        if xid:
            message = XID_MESSAGES.get(xid, f"Xid {xid}")
            xid_labels = _labels({**base, "err_code": str(xid), "err_msg": message})
            rows["DCGM_FI_DEV_XID_ERRORS"].append(f"DCGM_FI_DEV_XID_ERRORS{xid_labels} {xid}")
            if xid == 79:
                continue
        gpu_devices = by_gpu.get(index, [])
        busy = [d for d in gpu_devices if d.pod]
        whole = len(gpu_devices) == 1 and not gpu_devices[0].profile
        temperature = 34 + int(18 * len(busy) / max(1, len(gpu_devices)) + 6 * _noise(node, index))
        power = 62 + 330 * len(busy) / max(1, len(gpu_devices)) + 20 * _noise(node, index, minute)
        rows["DCGM_FI_DEV_GPU_TEMP"].append(f"DCGM_FI_DEV_GPU_TEMP{_labels(base)} {temperature}")
        rows["DCGM_FI_DEV_POWER_USAGE"].append(
            f"DCGM_FI_DEV_POWER_USAGE{_labels(base)} {power:.3f}"
        )
        rows["DCGM_FI_DEV_ROW_REMAP_FAILURE"].append(
            f"DCGM_FI_DEV_ROW_REMAP_FAILURE{_labels(base)} 0"
        )
        if xid == 0:
            rows["DCGM_FI_DEV_XID_ERRORS"].append(f"DCGM_FI_DEV_XID_ERRORS{_labels(base)} 0")
        for device in gpu_devices:
            labels = dict(base)
            if device.profile:
                labels["GPU_I_PROFILE"] = device.profile
                labels["GPU_I_ID"] = str(device.instance)
            if device.pod:
                labels.update(
                    {
                        "namespace": device.namespace,
                        "pod": device.pod,
                        "container": device.container,
                    }
                )
            busy_pod = device.pod and (device.namespace, device.pod) not in idle
            active = (
                (0.55 + 0.4 * _noise(node, index, device.instance, minute)) if busy_pod else 0.0
            )
            share = 1.0 if whole else _share(device.profile)
            used = int(memory_mib * share * (0.35 + 0.5 * active)) if device.pod else 0
            text = _labels(labels)
            rows["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].append(
                f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{text} {active:.6f}"
            )
            rows["DCGM_FI_DEV_FB_USED"].append(f"DCGM_FI_DEV_FB_USED{text} {used}")
            rows["DCGM_FI_DEV_FB_FREE"].append(
                f"DCGM_FI_DEV_FB_FREE{text} {int(memory_mib * share) - used}"
            )
            if whole:
                rows["DCGM_FI_DEV_GPU_UTIL"].append(
                    f"DCGM_FI_DEV_GPU_UTIL{text} {round(active * 100)}"
                )
    out = []
    for name, kind, help_text in SERIES:
        if rows[name]:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(rows[name])
    return "\n".join(out) + "\n"


def _share(profile: str) -> float:
    """The memory share of a MIG profile: ``3g.40gb`` is 40/80 of an 80 GB GPU."""
    try:
        memory = float(profile.split(".")[1].removesuffix("gb").split("+")[0])
    except (IndexError, ValueError):
        return 1 / 7
    return min(1.0, memory / 80)
