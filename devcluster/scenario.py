"""Fleets the demo cluster starts with.

``seed``: the recorded cluster of ``tests/data/k8s-api-samples`` and the seed chapter's
incident: two tainted H100 nodes, two A100 80GB nodes on ``all-3g.40gb`` filled by team-b,
and ``gpu-a100-03`` left on a ``2g.20gb`` + ``1g.10gb`` layout after a test, so team-a's pod
asking for ``nvidia.com/mig-3g.40gb`` stays Pending.

``inference`` (``devcluster.inference``) builds its fleet from the same parts:
``gpu_node``, ``register_nodes``, ``run_operator_pods``, ``seed_running``,
``submit_workloads``.

``generate_fleet``: a large synthetic fleet (e.g. 5,000 nodes, 50,000 pods) for benchmarks.
"""

from __future__ import annotations

import copy
import datetime as dt
import uuid
from typing import Any

from devcluster import dra, gpu
from devcluster.cluster import Cluster, Obj, now
from devcluster.controllers import Controllers, pod_ip
from devcluster.resources import find

NODES = find("", "v1", "nodes")
PODS = find("", "v1", "pods")
NAMESPACES = find("", "v1", "namespaces")
WORKLOADS = find("kueue.x-k8s.io", "v1beta2", "workloads")
PODGROUPS = find("scheduling.volcano.sh", "v1beta1", "podgroups")

A100 = {
    "product": "NVIDIA-A100-SXM4-80GB",
    "family": "ampere",
    "compute_major": "8",
    "machine": "DGX-A100",
    "instance_type": "dgx-a100-80gb",
    "memory": "81920",
    "replicas": "0",
}
H100 = {
    "product": "NVIDIA-H100-80GB-HBM3",
    "family": "hopper",
    "compute_major": "9",
    "machine": "PowerEdge-XE9680",
    "instance_type": "xe9680-h100x8",
    "memory": "81559",
    "replicas": "1",
}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {
    "key": "nvidia.com/gpu",
    "operator": "Equal",
    "value": "present",
    "effect": "NoSchedule",
}
OPERATOR_NAMESPACE = "gpu-operator"
MIG_MANAGER_DEPLOY = "nvidia.com/gpu.deploy.mig-manager"
OPERATOR_DAEMONSETS = (
    "nvidia-device-plugin-daemonset",
    "gpu-feature-discovery",
    "nvidia-dcgm-exporter",
    "nvidia-mig-manager",
)


def gpu_node(
    name: str,
    model: dict[str, str],
    *,
    ip: str,
    config: str,
    state: str,
    resources: dict[str, int],
    taints: list[dict[str, str]] | None = None,
    gpu_count: int = 8,
    pool: str = "",
    sharing: str = "none",
) -> Obj:
    """A Node as a kubelet registers it with GPU Feature Discovery's labels (mixed strategy).

    A model with ``"mig_capable": "false"`` (an L40S) gets no MIG Manager and no
    ``nvidia.com/mig.config`` labels (the operator sets those on MIG-capable nodes only);
    ``sharing`` is the device plugin's ``time-slicing`` or ``mps`` (``gpu.replicas`` and the
    ``-SHARED`` product then come with the model)."""
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": model["instance_type"],
        "nvidia.com/cuda.driver-version.full": "580.105.08",
        "nvidia.com/cuda.driver-version.major": "580",
        "nvidia.com/cuda.driver-version.minor": "105",
        "nvidia.com/cuda.driver-version.revision": "08",
        "nvidia.com/cuda.runtime-version.full": "13.0",
        "nvidia.com/cuda.runtime-version.major": "13",
        "nvidia.com/cuda.runtime-version.minor": "0",
        "nvidia.com/gpu.compute.major": model["compute_major"],
        "nvidia.com/gpu.compute.minor": model.get("compute_minor", "0"),
        "nvidia.com/gpu.count": str(gpu_count),
        "nvidia.com/gpu.deploy.dcgm": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.mig-manager": "true",
        "nvidia.com/gpu.family": model["family"],
        "nvidia.com/gpu.machine": model["machine"],
        "nvidia.com/gpu.memory": model["memory"],
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": model["product"],
        "nvidia.com/gpu.replicas": model["replicas"],
        "nvidia.com/gpu.sharing-strategy": sharing,
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.config": config,
        "nvidia.com/mig.config.state": state,
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mps.capable": str(sharing == "mps").lower(),
    }
    if model.get("mig_capable", "true") != "true":
        labels["nvidia.com/mig.capable"] = "false"
        for key in (MIG_MANAGER_DEPLOY, "nvidia.com/mig.config", "nvidia.com/mig.config.state"):
            del labels[key]
    if pool:
        labels["quartermaster.io/pool"] = pool
    labels.update(gpu.node_gpu_labels(model["product"], gpu_count, resources))
    base = {
        "cpu": "128",
        "ephemeral-storage": "3750000000Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "2064100Mi",
        "pods": "110",
    }
    allocatable = {
        **base,
        "cpu": "127500m",
        "ephemeral-storage": "3456075120119",
        "memory": "2063076Mi",
    }
    extended = {k: str(v) for k, v in sorted(resources.items())}
    conditions = [
        _condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        _condition(
            "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
        ),
        _condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
    return {
        "metadata": {
            "name": name,
            "labels": dict(sorted(labels.items())),
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": dict(sorted({**base, **extended}.items())),
            "allocatable": dict(sorted({**allocatable, **extended}.items())),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": "6.8.0-87-generic",
                "osImage": "Ubuntu 24.04.3 LTS",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kubeletVersion": "v1.36.2",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    stamp = now()
    return {
        "type": kind,
        "status": status,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def pod(
    name: str,
    namespace: str,
    *,
    limits: dict[str, str],
    node: str = "",
    labels: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    phase: str = "",
    image: str = "nvcr.io/nvidia/pytorch:25.01-py3",
    priority_class: str = "",
    annotations: dict[str, str] | None = None,
) -> Obj:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": image,
                "resources": {"limits": dict(limits)} if limits else {},
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if priority_class:
        spec["priorityClassName"] = priority_class
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": labels or {"app": name.rsplit("-", 1)[0]},
    }
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase} if phase else {}}


def seed_running(cluster: Cluster, obj: Obj) -> None:
    """Create a pod through admission, then mark it bound and Running (as if long started)."""
    created = cluster.create(PODS, obj["metadata"]["namespace"], obj, manager="kubectl")
    if obj["spec"].get("nodeName"):
        running = copy.deepcopy(created)
        stamp = now()
        ip = pod_ip(obj["metadata"]["namespace"], obj["metadata"]["name"])
        running["status"].update(
            {
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "startTime": stamp,
                "conditions": [
                    {
                        "type": t,
                        "status": "True",
                        "lastProbeTime": None,
                        "lastTransitionTime": stamp,
                    }
                    for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
            }
        )
        cluster._store(PODS, running, created)


def _set_by_hand(obj: Obj, label: str, manager: str, *, hours_ago: float) -> None:
    """Record in managedFields that someone labelled the object by hand a while ago (the
    seed incident: ``kubectl label node gpu-a100-03 nvidia.com/mig.config=all-balanced``)."""
    stamp = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    key = f"f:{label}"
    for entry in obj["metadata"].get("managedFields") or []:
        labels = (entry.get("fieldsV1") or {}).get("f:metadata", {}).get("f:labels", {})
        labels.pop(key, None)
    obj["metadata"]["managedFields"].append(
        {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "v1",
            "time": stamp,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {key: {}}}},
        }
    )


def create_namespaces(cluster: Cluster, *names: str) -> None:
    """The system namespaces, the GPU Operator's, then ``names``."""
    for name in ("default", "kube-system", OPERATOR_NAMESPACE, *names):
        cluster.create(NAMESPACES, "", {"metadata": {"name": name}}, manager="devcluster")


def register_nodes(cluster: Cluster, controllers: Controllers, nodes: list[Obj]) -> list[Obj]:
    """Create the nodes (as their kubelets register them) and tell the MIG Manager and the
    DCGM exporter each node's per-GPU layout; the stored nodes."""
    created = []
    for node in nodes:
        created.append(cluster.create(NODES, "", node, manager="kubelet"))
        count = int(node["metadata"]["labels"]["nvidia.com/gpu.count"])
        extended = {
            k: int(v)
            for k, v in node["status"]["allocatable"].items()
            if k.startswith("nvidia.com/")
        }
        controllers.node_layouts[node["metadata"]["name"]] = gpu.layout_from_resources(
            extended, count
        )
    return created


def run_operator_pods(cluster: Cluster, nodes: list[Obj]) -> None:
    """The GPU Operator's DaemonSet pods, Running on each node their node selector picks (the
    MIG Manager only where ``nvidia.com/gpu.deploy.mig-manager=true``)."""
    for node in nodes:
        node_name = node["metadata"]["name"]
        labels = node["metadata"]["labels"]
        for daemonset in OPERATOR_DAEMONSETS:
            if daemonset == "nvidia-mig-manager" and labels.get(MIG_MANAGER_DEPLOY) != "true":
                continue
            seed_running(
                cluster,
                pod(
                    f"{daemonset}-{node_name.removeprefix('gpu-')}",
                    OPERATOR_NAMESPACE,
                    limits={},
                    node=node_name,
                    labels={"app": daemonset},
                    tolerations=[GPU_TOLERATION],
                    image=f"nvcr.io/nvidia/{daemonset}:v26.7.0",
                ),
            )


def submit_workloads(
    cluster: Cluster, rows: tuple[tuple[str, str, str, int, dict[str, str]], ...]
) -> None:
    """Kueue Workloads (as Kueue makes them from Jobs), submitted a minute apart half an
    hour ago, in this order (Kueue admits the oldest first); they wait for the portal's
    queues."""
    for minutes, (namespace, name, queue, count, requests) in enumerate(rows):
        created = cluster.create(
            WORKLOADS, namespace, workload(name, namespace, queue, count, requests), manager="kueue"
        )
        stamp = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=30 - minutes)
        created["metadata"]["creationTimestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def load_seed(cluster: Cluster, controllers: Controllers, *, idle_notebook: bool = False) -> None:
    create_namespaces(cluster, "team-a", "team-b")
    nodes = [
        gpu_node(
            "gpu-a100-01",
            A100,
            ip="10.20.1.11",
            config="all-3g.40gb",
            state="success",
            resources={"nvidia.com/mig-3g.40gb": 16},
            pool="train",
        ),
        gpu_node(
            "gpu-a100-02",
            A100,
            ip="10.20.1.12",
            config="all-3g.40gb",
            state="success",
            resources={"nvidia.com/mig-3g.40gb": 16},
            pool="train",
        ),
        # The incident node: re-sliced for team-b's tests and never put back.
        gpu_node(
            "gpu-a100-03",
            A100,
            ip="10.20.1.13",
            config="all-balanced",
            state="failed",
            resources={"nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16},
            pool="train",
        ),
        gpu_node(
            "gpu-h100-01",
            H100,
            ip="10.20.0.11",
            config="all-disabled",
            state="success",
            resources={"nvidia.com/gpu": 8},
            taints=[GPU_TAINT],
            pool="h100",
        ),
        gpu_node(
            "gpu-h100-02",
            H100,
            ip="10.20.0.12",
            config="all-disabled",
            state="success",
            resources={"nvidia.com/gpu": 8},
            taints=[GPU_TAINT],
            pool="h100",
        ),
    ]
    for created in register_nodes(cluster, controllers, nodes):
        if created["metadata"]["name"] == "gpu-a100-03":
            _set_by_hand(created, "nvidia.com/mig.config", "kubectl-label", hours_ago=3)
    # One H100 fell off the bus: the DCGM exporter on gpu-h100-02 reports Xid 79 for GPU 5.
    controllers.gpu_xids["gpu-h100-02"] = {5: 79}
    run_operator_pods(cluster, nodes)
    for i, node_name in enumerate(["gpu-a100-01", "gpu-a100-01", "gpu-a100-02", "gpu-a100-02"]):
        seed_running(
            cluster,
            pod(
                f"filler-3g-{i}",
                "team-b",
                limits={"nvidia.com/mig-3g.40gb": "8"},
                node=node_name,
                labels={"app": "filler"},
            ),
        )
    seed_running(
        cluster,
        pod(
            "dev-test-1g",
            "team-b",
            limits={"nvidia.com/mig-1g.10gb": "4"},
            node="gpu-a100-03",
            labels={"app": "dev-test"},
        ),
    )
    cluster.create(
        PODS,
        "team-a",
        pod(
            "train-3g", "team-a", limits={"nvidia.com/mig-3g.40gb": "1"}, labels={"app": "trainer"}
        ),
        manager="kubectl",
    )
    # A plain Job of team-a too big for its namespace quota, submitted once the portal has
    # applied that quota: the first 12-GPU pod is created (and waits: no node has 12 GPUs),
    # the second is refused with "exceeded quota" (a FailedCreate event on the Job).
    controllers.after_quota.setdefault("team-a", []).append(
        {
            "metadata": {"name": "eval-sweep", "namespace": "team-a"},
            "spec": {
                "parallelism": 2,
                "completions": 2,
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": {"app": "eval-sweep"}},
                    "spec": pod(
                        "x",
                        "team-a",
                        limits={"nvidia.com/gpu": "12"},
                        tolerations=[GPU_TOLERATION],
                    )["spec"],
                },
            },
        }
    )
    # A Volcano gang job of team-b, half started: two of its four 4-GPU pods run on
    # gpu-h100-01 and hold all its GPUs; the other two wait, so the gang never works.
    load_gang(cluster)
    submit_workloads(cluster, SEED_WORKLOADS)
    if idle_notebook:
        submit_idle_notebook(cluster, controllers)


def submit_idle_notebook(cluster: Cluster, controllers: Controllers) -> None:
    """The run command's demo only (``--idle-notebook``; the tests' seed stays as it was): a
    notebook of team-dev through Kueue (dev-test, cq-dev's own 2g.20gb quota on the balanced
    A100) that holds a 2g.20gb slice and leaves it idle, submitted once team-dev has its
    quota; and one of team-a, a pod left holding an H100 of gpu-h100-02, so team-a's lead
    (the README's first login, who sees only team-a) finds an idle GPU too. Their DCGM
    exporter reports 0 % for both."""
    controllers.idle_apps.add("notebook")
    seed_running(
        cluster,
        pod(
            "notebook-a",
            "team-a",
            limits={"nvidia.com/gpu": "1"},
            node="gpu-h100-02",
            labels={"app": "notebook"},
            tolerations=[GPU_TOLERATION],
        ),
    )
    controllers.after_quota.setdefault("team-dev", []).append(
        {
            "metadata": {
                "name": "notebook-idle",
                "namespace": "team-dev",
                "labels": {"kueue.x-k8s.io/queue-name": "dev-test"},
            },
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": {"app": "notebook"}},
                    "spec": pod("x", "team-dev", limits={"nvidia.com/mig-2g.20gb": "1"})["spec"],
                },
            },
        }
    )


GANG = "gang-eval"
GANG_GROUP = "gang-eval-6f1c9e2a-5b7d-4c1e-9a3f-2d8e4b6c0a17"


def load_gang(cluster: Cluster) -> None:
    """A vcjob's PodGroup (as Volcano's controller writes it, status included) and its pods."""
    cluster.create(
        PODGROUPS,
        "team-b",
        {
            "metadata": {
                "name": GANG_GROUP,
                "namespace": "team-b",
                "labels": {"volcano.sh/job-name": GANG},
                "ownerReferences": [
                    {
                        "apiVersion": "batch.volcano.sh/v1alpha1",
                        "kind": "Job",
                        "name": GANG,
                        "uid": "6f1c9e2a-5b7d-4c1e-9a3f-2d8e4b6c0a17",
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "minMember": 4,
                "minResources": {"nvidia.com/gpu": "16"},
                "queue": "team-b",
                "priorityClassName": "",
            },
            "status": {
                "phase": "Unknown",
                "running": 2,
                "conditions": [
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "reason": "NotEnoughResources",
                        "message": "2/4 tasks in gang unschedulable: pod group is not ready, "
                        "2 Pending, 4 minAvailable; Pending: 2 Unschedulable",
                        "transitionID": "5c3f0d8e-0f7a-4b8e-8d2c-3a1e6b9f4c21",
                        "lastTransitionTime": now(),
                    }
                ],
            },
        },
        manager="vc-controller-manager",
    )
    for index in range(4):
        obj = pod(
            f"{GANG}-worker-{index}",
            "team-b",
            limits={"nvidia.com/gpu": "4"},
            node="gpu-h100-01" if index < 2 else "",
            labels={"volcano.sh/job-name": GANG},
            tolerations=[GPU_TOLERATION],
            annotations={
                "scheduling.k8s.io/group-name": GANG_GROUP,
                "scheduling.volcano.sh/queue-name": "team-b",
            },
        )
        obj["spec"]["schedulerName"] = "volcano"
        if index < 2:
            seed_running(cluster, obj)
        else:
            cluster.create(PODS, "team-b", obj, manager="vc-controller-manager")


SEED_WORKLOADS = (
    ("team-a", "job-llm-pretrain", "team-a-train", 2, {"nvidia.com/gpu": "4"}),
    ("team-a", "job-vision-3g", "team-a-train", 4, {"nvidia.com/mig-3g.40gb": "1"}),
    ("team-b", "job-big-train", "team-b-train", 3, {"nvidia.com/gpu": "4"}),
)


def workload(name: str, namespace: str, queue: str, count: int, requests: dict[str, str]) -> Obj:
    """A Kueue Workload as Kueue creates it for a Job (one pod set, ``main``)."""
    container = {
        "name": "main",
        "image": "trainer:latest",
        "resources": {"requests": dict(requests)},
    }
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": queue},
        },
        "spec": {
            "queueName": queue,
            "active": True,
            "priority": 0,
            "podSets": [
                {"name": "main", "count": count, "template": {"spec": {"containers": [container]}}}
            ],
        },
    }


def generate_fleet(
    cluster: Cluster, controllers: Controllers, *, nodes: int, pods: int, claims: int = 0
) -> None:
    """A large fleet, written straight into the store (no admission) so it loads fast; with
    ``claims``, its GPUs published through DRA too, a ResourceSlice per node, and that many
    ResourceClaims (``dra.generate``)."""
    for index in range(20):
        name = f"bench-{index:02d}"
        if cluster.get(NAMESPACES, "", name) is None:
            cluster.create(NAMESPACES, "", {"metadata": {"name": name}}, manager="devcluster")
    node_table, pod_table = cluster.table(NODES), cluster.table(PODS)
    stamp = now()
    shapes = [
        (A100, "all-3g.40gb", {"nvidia.com/mig-3g.40gb": 16}, "nvidia.com/mig-3g.40gb", 16, None),
        (
            A100,
            "all-balanced",
            {
                "nvidia.com/mig-1g.10gb": 16,
                "nvidia.com/mig-2g.20gb": 8,
                "nvidia.com/mig-3g.40gb": 8,
            },
            "nvidia.com/mig-1g.10gb",
            16,
            None,
        ),
        (H100, "all-disabled", {"nvidia.com/gpu": 8}, "nvidia.com/gpu", 8, [GPU_TAINT]),
        (H100, "all-1g.10gb", {"nvidia.com/mig-1g.10gb": 56}, "nvidia.com/mig-1g.10gb", 56, None),
    ]
    templates = [
        gpu_node(
            "template",
            model,
            ip="10.0.0.1",
            config=config,
            state="success",
            resources=res,
            taints=taints,
        )
        for model, config, res, _, _, taints in shapes
    ]
    node_names = []
    for index in range(nodes):
        shape = index % len(shapes)
        name = f"gpu-node-{index:05d}"
        node = copy.deepcopy(templates[shape])
        node["metadata"].update(
            {
                "name": name,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": stamp,
                "resourceVersion": cluster.next_rv(),
            }
        )
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        node["metadata"]["labels"]["quartermaster.io/pool"] = f"pool-{shape}"
        node["status"]["addresses"] = [
            {
                "type": "InternalIP",
                "address": f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}",
            },
            {"type": "Hostname", "address": name},
        ]
        node_table.put(("", name), node)
        node_names.append((name, shape))
    per_node = max(1, pods // max(1, nodes))
    created = 0
    for name, shape in node_names:
        _, _, _, resource, capacity, taints = shapes[shape]
        for slot in range(per_node):
            if created >= pods:
                break
            namespace = f"bench-{created % 20:02d}"
            pod_name = f"job-{created:06d}"
            amount = "1" if slot < capacity else "0"
            obj = pod(
                pod_name,
                namespace,
                limits={resource: amount} if amount != "0" else {},
                node=name,
                tolerations=[GPU_TOLERATION] if taints else None,
                labels={"app": "bench", "kueue.x-k8s.io/queue-name": "bench"},
            )
            container = obj["spec"]["containers"][0]
            if amount != "0":
                container["resources"]["requests"] = {resource: amount}
            obj["metadata"].update(
                {
                    "uid": str(uuid.uuid4()),
                    "creationTimestamp": stamp,
                    "resourceVersion": cluster.next_rv(),
                }
            )
            obj["spec"].update(
                {
                    "schedulerName": "default-scheduler",
                    "priority": 0,
                    "serviceAccountName": "default",
                }
            )
            obj["status"] = {
                "phase": "Running",
                "qosClass": "BestEffort",
                "startTime": stamp,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastProbeTime": None,
                        "lastTransitionTime": stamp,
                    }
                ],
            }
            pod_table.put((namespace, pod_name), obj)
            created += 1
    if claims:
        dra.generate(cluster, [name for name, _ in node_names], claims)
