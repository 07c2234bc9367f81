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


# A config name no MIG Manager config file has: setting it fails at validation with no
# disruption, the way to make MIG Manager act again on a value it already failed on.
RETRY_NAME = "quartermaster-retry"


class MigActuator(Protocol):
    def request(self, gateway: Gateway, node: str, config: str) -> tuple[bool, str]:
        """Ask for ``config`` on ``node`` (safe to repeat): whether it is asked (False: call
        again shortly), and what was done, in words."""
        ...

    def progress(self, gateway: Gateway, node: str) -> str:
        """``pending``, ``success``, ``failed``, or "" while nothing is reported yet."""
        ...


class MigManagerLabel:
    """The GPU Operator's MIG Manager: set the config label, read the state label."""

    def request(self, gateway: Gateway, node: str, config: str) -> tuple[bool, str]:
        live = gateway.get(ObjectRef("v1", "Node", node))
        labels = live["metadata"].get("labels") or {}
        if labels.get(MIG_CONFIG) == config and labels.get(MIG_CONFIG_STATE) != FAILED:
            return True, f"{MIG_CONFIG} is already {config}"
        if labels.get(MIG_CONFIG) == config:
            # MIG Manager acts only when the value changes: a retry after "failed" goes
            # through a name no config file has (refused at validation, nothing disrupted).
            gateway.patch_node_labels(node, {MIG_CONFIG: RETRY_NAME, MIG_CONFIG_STATE: None})
            return False, f"{config} failed before: asking MIG Manager again"
        if labels.get(MIG_CONFIG) == RETRY_NAME and labels.get(MIG_CONFIG_STATE) != FAILED:
            return False, "waiting for MIG Manager to refuse the retry name"
        # The state label is never cleared by MIG Manager: remove it in the same patch, or a
        # poll may read the previous "success".
        gateway.patch_node_labels(node, {MIG_CONFIG: config, MIG_CONFIG_STATE: None})
        return True, f"set {MIG_CONFIG}={config} and removed the old {MIG_CONFIG_STATE}"

    def progress(self, gateway: Gateway, node: str) -> str:
        live = gateway.get(ObjectRef("v1", "Node", node))
        return str((live["metadata"].get("labels") or {}).get(MIG_CONFIG_STATE, ""))


def get_actuator() -> MigActuator:
    return MigManagerLabel()
