"""What needs attention on a node's GPUs, from their DCGM readings: Xids (by NVIDIA's
catalog), failed row remapping and heat. Pure: readings in, findings out, worst first."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpus import knowledge
from gpus.dcgm import Gpu
from gpus.xid import MONITOR, UNKNOWN, describe

SEVERITY = {"ok": 0, "info": 1, "warning": 2, "critical": 3}


@dataclass(frozen=True)
class Finding:
    gpu: int
    severity: str  # info, warning, critical
    title: str
    advice: str
    xid: int = 0
    needs_drain: bool = False
    topic: str = ""  # the fault table's entry (gpus.knowledge)


def assess(gpus: Iterable[Gpu], *, hot_c: float = 85.0) -> list[Finding]:
    """What needs someone's attention on a node's GPUs, worst first."""
    findings = []
    for gpu in gpus:
        if gpu.xid:
            entry = describe(gpu.xid, gpu.xid_message)
            severity = (
                "critical"
                if entry.needs_drain
                else "warning"
                if entry.node_action in (MONITOR, UNKNOWN)
                else "info"
            )
            findings.append(
                Finding(
                    gpu.index,
                    severity,
                    f"GPU {gpu.index}: Xid {gpu.xid}, {entry.meaning}"
                    + (" (no metrics since)" if gpu.lost else ""),
                    entry.advice,
                    gpu.xid,
                    entry.needs_drain,
                    knowledge.for_xid(gpu.xid),
                )
            )
        if gpu.row_remap_failure:
            findings.append(
                Finding(
                    gpu.index,
                    "critical",
                    f"GPU {gpu.index}: row remapping failed",
                    "A replacement candidate: drain the node and open a hardware ticket.",
                    0,
                    True,
                    "xid-hardware",
                )
            )
        if gpu.temperature_c is not None and gpu.temperature_c >= hot_c:
            findings.append(
                Finding(
                    gpu.index,
                    "warning",
                    f"GPU {gpu.index}: {gpu.temperature_c:.0f} °C",
                    "Check cooling and fans (the DCGM temperature metric, a look at the rack).",
                    topic="thermal",
                )
            )
    return sorted(findings, key=lambda f: (-SEVERITY[f.severity], f.gpu))


def worst(findings: Iterable[Finding]) -> str:
    return max((f.severity for f in findings), key=SEVERITY.__getitem__, default="ok")
