"""The DCGM exporter's metrics into per-GPU readings. Pure: exposition text or Prometheus
query results in, plain data out (reference/gpu-operator-facts.md section 8). What needs
attention is judged in ``health.findings``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

WANTED = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
)
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


def parse_exposition(text: str, names: Iterable[str] = WANTED) -> list[Sample]:
    """The samples of the wanted metrics in Prometheus text format (others skipped unparsed)."""
    wanted = set(names)
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        head = line.split("{", 1)[0].split(" ", 1)[0]
        if head not in wanted:
            continue
        match = _LINE.match(line.strip())
        if not match:
            continue
        labels = {
            k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
            for k, v in _LABEL.findall(match[2] or "")
        }
        try:
            value = float(match[3])
        except ValueError:
            continue
        out.append(Sample(match[1], labels, value))
    return out


def samples_from_prometheus(result: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """An instant query's ``data.result`` (vector) as samples."""
    out = []
    for item in result:
        metric = dict(item.get("metric") or {})
        name = metric.pop("__name__", "")
        try:
            value = float((item.get("value") or [0, "nan"])[1])
        except (TypeError, ValueError):
            continue
        out.append(Sample(name, metric, value))
    return out


def node_of(labels: Mapping[str, str]) -> str:
    """The exporter's host name label: ``Hostname`` up to 4.8, ``hostname`` after."""
    for key, value in labels.items():
        if key.lower() == "hostname":
            return value
    return labels.get("node", "") or labels.get("kubernetes_node", "")


@dataclass
class Instance:
    profile: str
    instance: int
    util: float | None = None
    fb_used_mib: int | None = None
    fb_free_mib: int | None = None
    namespace: str = ""
    pod: str = ""


@dataclass
class Gpu:
    index: int
    uuid: str = ""
    model: str = ""
    util: float | None = None
    fb_used_mib: int | None = None
    fb_free_mib: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    xid: int = 0
    xid_message: str = ""
    row_remap_failure: bool = False
    namespace: str = ""
    pod: str = ""
    instances: list[Instance] = field(default_factory=list)

    @property
    def lost(self) -> bool:
        """It reported an Xid and nothing else (Xid 79: it fell off the bus)."""
        return self.temperature_c is None and self.xid != 0


def gpus_by_node(samples: Iterable[Sample], default_node: str = "") -> dict[str, list[Gpu]]:
    """Per node, its GPUs in index order, each with its MIG instances."""
    gpus: dict[tuple[str, int], Gpu] = {}
    instances: dict[tuple[str, int, int], Instance] = {}
    for sample in samples:
        labels = sample.labels
        try:
            index = int(labels.get("gpu", ""))
        except ValueError:
            continue
        node = node_of(labels) or default_node
        gpu = gpus.setdefault((node, index), Gpu(index))
        gpu.uuid = gpu.uuid or labels.get("UUID", labels.get("uuid", ""))
        gpu.model = gpu.model or labels.get("modelName", "")
        profile = labels.get("GPU_I_PROFILE", "")
        target: Gpu | Instance = gpu
        if profile:
            key = (node, index, int(labels.get("GPU_I_ID", "0") or 0))
            target = instances.setdefault(key, Instance(profile, key[2]))
        if labels.get("pod"):
            target.namespace, target.pod = labels.get("namespace", ""), labels["pod"]
        value, name = sample.value, sample.name
        if name == "DCGM_FI_DEV_GPU_UTIL":
            gpu.util = value
        elif name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
            if profile:
                target.util = round(value * 100, 1)
            elif gpu.util is None:
                gpu.util = round(value * 100, 1)
        elif name == "DCGM_FI_DEV_FB_USED":
            target.fb_used_mib = int(value)
        elif name == "DCGM_FI_DEV_FB_FREE":
            target.fb_free_mib = int(value)
        elif name == "DCGM_FI_DEV_GPU_TEMP":
            gpu.temperature_c = value
        elif name == "DCGM_FI_DEV_POWER_USAGE":
            gpu.power_w = round(value, 1)
        elif name == "DCGM_FI_DEV_XID_ERRORS" and value:
            gpu.xid = int(value)
            gpu.xid_message = labels.get("err_msg", "")
        elif name == "DCGM_FI_DEV_ROW_REMAP_FAILURE":
            gpu.row_remap_failure = value >= 1
    for (node, index, _), instance in sorted(instances.items()):
        gpus[(node, index)].instances.append(instance)
    for gpu in gpus.values():
        if gpu.instances:
            used = [i.fb_used_mib or 0 for i in gpu.instances]
            free = [i.fb_free_mib or 0 for i in gpu.instances]
            if gpu.fb_used_mib is None:
                gpu.fb_used_mib, gpu.fb_free_mib = sum(used), sum(free)
            utils = [i.util for i in gpu.instances if i.util is not None]
            if gpu.util is None and utils:
                gpu.util = round(sum(utils) / len(utils), 1)
    out: dict[str, list[Gpu]] = {}
    for (node, _), gpu in sorted(gpus.items()):
        out.setdefault(node, []).append(gpu)
    return out


def as_json(gpus: Iterable[Gpu]) -> list[dict[str, Any]]:
    return [asdict(g) for g in gpus]
