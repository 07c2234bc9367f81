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


class MigManager:
    """The GPU Operator's MIG Manager on one node: it sees ``nvidia.com/mig.config`` change,
    marks the state pending, re-slices the GPUs, then marks success (with the new allocatable
    the device plugin then reports) or failed."""

    def __init__(self, api: client.CoreV1Api) -> None:
        self.api = api

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
