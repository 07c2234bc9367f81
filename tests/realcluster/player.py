"""The node side the real control plane lacks, played by the test as the real parts would write
it: a kubelet (a bound pod Running, then Succeeded or Failed, through the status subresource;
a node's status Ready with its allocatable) and the GPU Operator's MIG Manager (the
``nvidia.com/mig.config.state`` label pending, then success or failed, and the node's new
allocatable profile counts). It writes as the cluster's administrator."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from kubernetes import client, config

from tests.realcluster.kit import RealCluster

STATE = "nvidia.com/mig.config.state"
CONFIG = "nvidia.com/mig.config"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def admin_api(cluster: RealCluster) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))


class Kubelet:
    """The kubelet of whichever node a pod was bound to."""

    def __init__(self, api: client.CoreV1Api) -> None:
        self.api = api

    def _pod(self, namespace: str, name: str) -> Any:
        return self.api.read_namespaced_pod(name, namespace)

    def _conditions(self, ready: bool) -> list[dict[str, Any]]:
        now, status = _now(), "True" if ready else "False"
        reason = None if ready else "PodCompleted"
        return [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": status, "reason": reason, "lastTransitionTime": now},
            {
                "type": "ContainersReady",
                "status": status,
                "reason": reason,
                "lastTransitionTime": now,
            },
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
        ]

    def run(self, namespace: str, name: str) -> None:
        """The pod's containers started (the pod must be bound to a node)."""
        pod = self._pod(namespace, name)
        assert pod.spec.node_name, f"{namespace}/{name} is not bound to a node"
        now = _now()
        status = {
            "phase": "Running",
            "startTime": now,
            "hostIP": "10.20.0.1",
            "podIP": "10.128.0.10",
            "conditions": self._conditions(ready=True),
            "containerStatuses": [
                {
                    "name": c.name,
                    "image": c.image,
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": now}},
                }
                for c in pod.spec.containers
            ],
        }
        self.api.patch_namespaced_pod_status(name, namespace, {"status": status})

    def finish(self, namespace: str, name: str, *, exit_code: int = 0) -> None:
        """The pod's containers ended: Succeeded with 0, Failed otherwise."""
        pod = self._pod(namespace, name)
        started = (
            pod.status.start_time.strftime("%Y-%m-%dT%H:%M:%SZ")
            if pod.status.start_time
            else _now()
        )
        now = _now()
        reason = "Completed" if exit_code == 0 else "Error"
        status = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": self._conditions(ready=False),
            "containerStatuses": [
                {
                    "name": c.name,
                    "image": c.image,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": exit_code,
                            "reason": reason,
                            "startedAt": started,
                            "finishedAt": now,
                        }
                    },
                }
                for c in pod.spec.containers
            ],
        }
        self.api.patch_namespaced_pod_status(name, namespace, {"status": status})

    def end_deleted(self, node: str) -> list[str]:
        """The node's pods a graceful deletion (an eviction) marked, their containers
        stopped and the pods removed, as the kubelet ends them (``namespace/name`` of each)."""
        ended = []
        for pod in self.api.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node}"
        ).items:
            if pod.metadata.deletion_timestamp is None:
                continue
            self.api.delete_namespaced_pod(
                pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
            )
            ended.append(f"{pod.metadata.namespace}/{pod.metadata.name}")
        return ended

    def pods_of_job(
        self, namespace: str, job: str, *, bound: bool = True, timeout: float = 30
    ) -> list[Any]:
        """The Job's pods, once the Job controller made them (and the scheduler bound them)."""
        deadline = time.monotonic() + timeout
        while True:
            pods = self.api.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
            if pods and (not bound or all(p.spec.node_name for p in pods)):
                return pods
            if time.monotonic() > deadline:
                raise AssertionError(f"no {'bound ' if bound else ''}pods of Job {namespace}/{job}")
            time.sleep(0.3)

    def node_status(self, node: str, allocatable: dict[str, str], *, ready: bool = True) -> None:
        """The node's status as its kubelet posts it: capacity/allocatable and Ready."""
        now = _now()
        status = {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "kubelet is posting ready status"
                    if ready
                    else "container runtime is down",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        }
        self.api.patch_node_status(node, {"status": status})


# The operands MIG Manager pauses while it re-slices (``paused-for-mig-change``), then sets
# back to ``true`` before it writes ``success``.
OPERANDS = (
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
)
# MIG devices per A100-80GB GPU of the standard configs (mig-parted's config file).
A100_80GB_LAYOUTS = {
    "all-disabled": {},
    "all-1g.10gb": {"1g.10gb": 7},
    "all-2g.20gb": {"2g.20gb": 3},
    "all-3g.40gb": {"3g.40gb": 2},
    "all-7g.80gb": {"7g.80gb": 1},
    "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
}


class MigManager:
    """The GPU Operator's MIG Manager on one node: it sees ``nvidia.com/mig.config`` change,
    marks the state pending, re-slices the GPUs, then marks success (with the new allocatable
    the device plugin then reports) or failed."""

    def __init__(self, api: client.CoreV1Api) -> None:
        self.api = api
        self.seen: dict[str, str] = {}  # node: the config value it last acted on
        self.working: dict[str, str] = {}  # node: the config it is applying (state pending)

    def watch(self, node: str) -> None:
        """Start on ``node``: its current ``nvidia.com/mig.config`` is the one in place."""
        self.seen[node] = self.api.read_node(node).metadata.labels.get(CONFIG, "")

    def answer(self, node: str) -> str:
        """One look at the node, as the manager's label watch sees it: a new config value is
        taken (state ``pending``, operands paused, GPU allocatable 0 while the device plugin
        is down); at the next look the GPUs carry its layout (the new allocatable, operands
        back, ``success``), or ``failed`` for a name mig-parted's file does not have. Returns
        the state it wrote ("" when nothing changed)."""
        labels = self.api.read_node(node).metadata.labels
        config = labels.get(CONFIG, "")
        if node in self.working:
            config = self.working.pop(node)
            per_gpu = A100_80GB_LAYOUTS[config]
            gpus = int(labels["nvidia.com/gpu.count"])
            self._allocatable(node, {f"nvidia.com/mig-{p}": n * gpus for p, n in per_gpu.items()})
            self._labels(node, {**dict.fromkeys(OPERANDS, "true"), STATE: "success"})
            return "success"
        if config == self.seen.get(node):
            return ""  # the same value again: MIG Manager does nothing
        self.seen[node] = config
        if config not in A100_80GB_LAYOUTS:  # refused at validation, nothing disrupted
            self._labels(node, {STATE: "failed"})
            return "failed"
        self._labels(node, {STATE: "pending", **dict.fromkeys(OPERANDS, "paused-for-mig-change")})
        self._allocatable(node, {})
        self.working[node] = config
        return "pending"

    def _labels(self, node: str, labels: dict[str, str]) -> None:
        self.api.patch_node(node, {"metadata": {"labels": labels}})

    def _allocatable(self, node: str, resources: dict[str, int]) -> None:
        """The device plugin's report: ``resources``, every other GPU resource at 0 (the
        kubelet keeps a removed resource's key)."""
        current = self.api.read_node(node).status.allocatable
        new = {k: v for k, v in current.items() if not k.startswith("nvidia.com/")}
        new.update({k: "0" for k in current if k.startswith("nvidia.com/")})
        new.update({k: str(v) for k, v in resources.items()})
        self.api.patch_node_status(node, {"status": {"capacity": new, "allocatable": new}})

    def reconfigure(self, node: str, resources: dict[str, int], *, ok: bool = True) -> None:
        self.api.patch_node(node, {"metadata": {"labels": {STATE: "pending"}}})
        if not ok:
            self.api.patch_node(node, {"metadata": {"labels": {STATE: "failed"}}})
            return
        current = self.api.read_node(node).status.allocatable
        kept = {k: v for k, v in current.items() if not k.startswith("nvidia.com/")}
        new = {**kept, **{k: str(v) for k, v in resources.items()}}
        # the device plugin re-registers: the old profiles' counts drop to 0 (a kubelet keeps them)
        for old in current:
            if old.startswith("nvidia.com/") and old not in resources:
                new[old] = "0"
        self.api.patch_node_status(node, {"status": {"capacity": new, "allocatable": new}})
        self.api.patch_node(node, {"metadata": {"labels": {STATE: "success"}}})
