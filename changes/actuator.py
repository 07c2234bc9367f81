"""The MIG actuator: what re-slices a node's GPUs once the node is cordoned and drained.

Today it is the GPU Operator's MIG Manager, driven by the node label
``nvidia.com/mig.config`` and answering in ``nvidia.com/mig.config.state``. Kubernetes DRA
partitionable devices or HAMi's dynamic MIG may replace it: a class with the same two
methods, returned by :func:`get_actuator`. Cordoning, draining and verifying what the node
offers afterwards stay the executor's job, whatever the actuator (MIG Manager itself does
not cordon, drain or wait for pods).
"""

from __future__ import annotations

from typing import Protocol

from gpus.labels import MIG_CONFIG, MIG_CONFIG_STATE
from kube import Gateway, ObjectRef

PENDING, SUCCESS, FAILED = "pending", "success", "failed"


class MigActuator(Protocol):
    def request(self, gateway: Gateway, node: str, config: str) -> str:
        """Ask for ``config`` on ``node`` (safe to repeat); what was done, in words."""
        ...

    def progress(self, gateway: Gateway, node: str) -> str:
        """``pending``, ``success``, ``failed``, or "" while nothing is reported yet."""
        ...


class MigManagerLabel:
    """The GPU Operator's MIG Manager: set the config label, read the state label."""

    def request(self, gateway: Gateway, node: str, config: str) -> str:
        live = gateway.get(ObjectRef("v1", "Node", node))
        if (live["metadata"].get("labels") or {}).get(MIG_CONFIG) == config:
            return f"{MIG_CONFIG} is already {config}"
        # The state label is never cleared by MIG Manager: remove it in the same patch, or a
        # poll may read the previous "success".
        gateway.patch_node_labels(node, {MIG_CONFIG: config, MIG_CONFIG_STATE: None})
        return f"set {MIG_CONFIG}={config} and removed the old {MIG_CONFIG_STATE}"

    def progress(self, gateway: Gateway, node: str) -> str:
        live = gateway.get(ObjectRef("v1", "Node", node))
        return str((live["metadata"].get("labels") or {}).get(MIG_CONFIG_STATE, ""))


def get_actuator() -> MigActuator:
    return MigManagerLabel()
