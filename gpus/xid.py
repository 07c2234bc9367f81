"""Xid codes: what they mean and what to do (NVIDIA's Xid catalog for Ampere and later, and
the device plugin's behaviour, as in reference/gpu-operator-facts.md section 9). Pure."""

from __future__ import annotations

from dataclasses import dataclass

# What the node needs: nothing (the application's own fault), a watch, a GPU reset (drain
# first: on a MIG GPU a reset removes every instance, so every tenant on it), or a reboot.
APP, MONITOR, RESET, REBOOT, UNKNOWN = "app", "monitor", "reset", "reboot", "unknown"


@dataclass(frozen=True)
class Xid:
    code: int
    meaning: str
    node_action: str
    advice: str

    @property
    def needs_drain(self) -> bool:
        """A reset or a reboot: the node is cordoned and drained first (a reviewed request)."""
        return self.node_action in (RESET, REBOOT)


_TABLE = [
    Xid(
        13,
        "Graphics engine exception (usually the application's out-of-bounds access or "
        "illegal instruction)",
        APP,
        "Tell the job's owner. No node action unless it repeats across many jobs.",
    ),
    Xid(
        31,
        "GPU memory page fault (MMU), usually an application bug",
        APP,
        "Tell the job's owner. No node action unless it repeats across many jobs.",
    ),
    Xid(
        43,
        "GPU stopped processing: the application hit a software fault; the GPU is healthy",
        APP,
        "None.",
    ),
    Xid(
        45,
        "Preemptive cleanup after an earlier error or an application being killed",
        APP,
        "Look for the Xid that came before it.",
    ),
    Xid(
        48,
        "Double-bit (uncorrectable) ECC error",
        RESET,
        "Drain the GPU and reset it. Replace it if it recurs, if Xid 63/64 follow, or if the "
        "SRAM threshold is exceeded.",
    ),
    Xid(
        63,
        "Row remapping event: a new row is marked for remapping, a GPU reset activates it",
        MONITOR,
        "Schedule a GPU reset so the remap takes effect; watch the row-remap counters.",
    ),
    Xid(
        64,
        "Row-remapping / page-retirement failure",
        RESET,
        "Drain and reset the GPU. Likely a replacement.",
    ),
    Xid(
        74,
        "NVLink error (this GPU or the peer at the far end)",
        RESET,
        "Drain, then reset the GPU or reboot the node. Open a hardware ticket if it recurs.",
    ),
    Xid(
        79,
        "GPU has fallen off the bus (PCIe)",
        REBOOT,
        "Cordon and drain the node, then reboot it. Replace the GPU if it recurs.",
    ),
    Xid(
        92,
        "High single-bit ECC error rate",
        MONITOR,
        "Monitor; plan a reset or a replacement if it persists.",
    ),
    Xid(
        94,
        "Contained memory error: only one application was affected",
        APP,
        "Restart the job; reset the GPU when convenient.",
    ),
    Xid(
        95,
        "Uncontained memory error: several applications were affected",
        RESET,
        "Drain the GPU (every MIG tenant on it) and reset it before it is used again.",
    ),
    Xid(
        119,
        "GSP RPC timeout",
        RESET,
        "Drain and reset; reboot or power-cycle if it persists. Note the driver version.",
    ),
    Xid(
        120,
        "GSP error",
        RESET,
        "Drain and reset; reboot or power-cycle if it persists. Note the driver version.",
    ),
]
# The catalog's other drain-and-reset codes.
_TABLE += [
    Xid(
        code,
        f"Xid {code} (the catalog resolves it with a drain and a GPU reset)",
        RESET,
        "Drain and reset the GPU.",
    )
    for code in (46, 62, 109, 140)
]
XIDS = {x.code: x for x in _TABLE}


def describe(code: int, message: str = "") -> Xid:
    """The catalog entry, or an honest 'unknown' that keeps the driver's own words."""
    if code in XIDS:
        return XIDS[code]
    return Xid(
        code,
        message or f"Xid {code} (not in the portal's table)",
        UNKNOWN,
        "Look it up in NVIDIA's Xid catalog; check the node's kernel log (NVRM: Xid).",
    )
