"""The inference fleet (``python -m devcluster --scenario inference``): the seed chapter's
inference cluster (§8.1: H100 / L40S, sliced by MIG and time-slicing) beside the training one.

* ``h100-mig``: two H100 80GB nodes on the GPU Operator's ``all-1g.10gb`` (7 x 1g.10gb per
  GPU) for small models;
* ``h100``: one H100 80GB node of whole GPUs, tainted for GPU work like the seed's, for
  large models;
* ``l40s``: two nodes of four whole L40S (no MIG: no MIG Manager, no ``mig.config``);
* ``l40s-shared``: one L40S node time-sliced by the device plugin, four replicas per GPU;
* ``a100-dra``: two A100 80GB nodes whose GPUs are allocated through DRA (the NVIDIA DRA
  driver, partitionable: whole GPUs and MIG devices carved per claim, ``devcluster/dra.py``),
  no device plugin there; team-infer's claims hold a whole GPU and MIG devices, and one
  claim asks for a profile the driver does not publish.

team-infer serves (online) and runs batch inference there, and team-a serves the model it
trains on the other cluster (namespace ``team-a-serve``). Two Kueue workloads of
team-infer wait for the portal's queues (``online-infer``, ``offline-batch``).
"""

from __future__ import annotations

from devcluster import dra, gpu
from devcluster.cluster import Cluster, Obj, now
from devcluster.controllers import Controllers
from devcluster.scenario import (
    A100,
    GPU_TAINT,
    GPU_TOLERATION,
    H100,
    create_namespaces,
    gpu_node,
    pod,
    register_nodes,
    run_operator_pods,
    seed_running,
    submit_workloads,
)

# An H100 whose GPUs all have MIG on reports no whole-GPU replicas (gpu.replicas 0).
H100_MIG = {**H100, "replicas": "0"}
L40S = {
    "product": "NVIDIA-L40S",
    "family": "ada-lovelace",
    "compute_major": "8",
    "compute_minor": "9",
    "machine": "PowerEdge-R760xa",
    "instance_type": "r760xa-l40sx4",
    "memory": "46068",
    "replicas": "1",
    "mig_capable": "false",
}
TIME_SLICES = 4
# Time-sliced without renaming: the same resource, the product marked -SHARED.
L40S_SHARED = {**L40S, "product": "NVIDIA-L40S-SHARED", "replicas": str(TIME_SLICES)}
SERVING_IMAGE = "nvcr.io/nvidia/tritonserver:25.01-py3"
NAMESPACES = ("team-infer", "team-a-serve")

INFERENCE_WORKLOADS = (
    ("team-infer", "job-batch-embed", "offline-batch", 4, {"nvidia.com/gpu": "1"}),
    ("team-infer", "job-canary-8b", "online-infer", 1, {"nvidia.com/mig-1g.10gb": "1"}),
)


def mig_resources(product: str, config: str, gpu_count: int = 8) -> dict[str, int]:
    """What the node advertises after the MIG Manager applied ``config`` (the reference's
    profiles and the GPU Operator's named configs, as the seed's MIG changes use them)."""
    layout = gpu.apply_config(product, gpu_count, config, None)
    assert layout.success, layout.message
    return {name: count for name, count in layout.resources.items() if count}


def inference_nodes() -> list[Obj]:
    one_g = mig_resources(H100["product"], "all-1g.10gb")
    nodes = [
        gpu_node(
            f"infer-h100-0{index}",
            H100_MIG,
            ip=f"10.30.0.1{index}",
            config="all-1g.10gb",
            state="success",
            resources=one_g,
            pool="h100-mig",
        )
        for index in (1, 2)
    ]
    nodes.append(
        gpu_node(
            "infer-h100-03",
            H100,
            ip="10.30.0.13",
            config="all-disabled",
            state="success",
            resources={"nvidia.com/gpu": 8},
            taints=[GPU_TAINT],
            pool="h100",
        )
    )
    nodes += [
        gpu_node(
            f"infer-l40s-0{index}",
            L40S,
            ip=f"10.30.1.1{index}",
            config="",
            state="",
            resources={"nvidia.com/gpu": 4},
            gpu_count=4,
            pool="l40s",
        )
        for index in (1, 2)
    ]
    nodes.append(
        gpu_node(
            "infer-l40s-03",
            L40S_SHARED,
            ip="10.30.1.13",
            config="",
            state="",
            resources={"nvidia.com/gpu": 4 * TIME_SLICES},
            gpu_count=4,
            pool="l40s-shared",
            sharing="time-slicing",
        )
    )
    nodes[-1]["metadata"]["labels"]["nvidia.com/device-plugin.config"] = "time-sliced-4"
    return nodes


def _serving(name: str, namespace: str, node: str, limits: dict[str, str], app: str) -> Obj:
    tainted = node == "infer-h100-03"
    return pod(
        name,
        namespace,
        limits=limits,
        node=node,
        labels={"app": app},
        tolerations=[GPU_TOLERATION] if tainted else None,
        image=SERVING_IMAGE,
    )


def serving_pods() -> list[Obj]:
    """Running model servers: a large model on whole H100s, small ones on 1g.10gb slices,
    rerankers on L40S, a batch OCR on time-sliced L40S, and team-a's own model."""
    pods = [
        _serving(f"chat-70b-{i}", "team-infer", "infer-h100-03", {"nvidia.com/gpu": "2"}, "chat")
        for i in range(2)
    ]
    pods += [
        _serving(
            f"embed-small-{i}",
            "team-infer",
            f"infer-h100-0{1 + i % 2}",
            {"nvidia.com/mig-1g.10gb": "1"},
            "embed",
        )
        for i in range(6)
    ]
    pods += [
        _serving(f"rerank-{i}", "team-infer", "infer-l40s-01", {"nvidia.com/gpu": "1"}, "rerank")
        for i in range(2)
    ]
    pods += [
        _serving(f"ocr-batch-{i}", "team-infer", "infer-l40s-03", {"nvidia.com/gpu": "1"}, "ocr")
        for i in range(6)
    ]
    pods += [
        _serving(
            f"vision-serve-{i}", "team-a-serve", "infer-l40s-02", {"nvidia.com/gpu": "1"}, "vision"
        )
        for i in range(2)
    ]
    return pods


DRA_NODES = ("infer-a100-01", "infer-a100-02")
DRA_GPUS = 2  # per node
# One GPU of the DRA pool reported a fatal XID error: the driver's health check tainted its
# devices (docs/reference/dra.md), so the scheduler allocates none of them to a claim that
# does not tolerate the taint.
XID_TAINTED = ("infer-a100-02", "gpu-1")
A100_PRODUCT = "NVIDIA A100-SXM4-80GB"  # as NVML names it (the driver's productName)
PROFILE = "device.attributes['gpu.nvidia.com'].profile"


def dra_nodes() -> list[Obj]:
    """The DRA pool's nodes: GPU Feature Discovery's labels, no extended GPU resource (the
    device plugin is not deployed where the DRA driver serves the GPUs)."""
    nodes = []
    for index, name in enumerate(DRA_NODES, start=1):
        node = gpu_node(
            name,
            A100,
            ip=f"10.30.2.1{index}",
            config="",
            state="",
            resources={},
            gpu_count=DRA_GPUS,
            pool="a100-dra",
        )
        node["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] = "false"
        node["metadata"]["labels"]["nvidia.com/gpu.deploy.mig-manager"] = "false"
        nodes.append(node)
    return nodes


def _claim_spec(device_class: str, selector: str) -> Obj:
    return {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": device_class,
                        "selectors": [{"cel": {"expression": selector}}],
                    },
                }
            ]
        }
    }


def _claiming(name: str, claim: Obj) -> Obj:
    """A team-infer server whose GPU comes from a DRA claim (``claim``: the pod's entry)."""
    item = pod(name, "team-infer", limits={}, labels={"app": name.rsplit("-", 1)[0]})
    item["spec"]["containers"][0]["image"] = SERVING_IMAGE
    item["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    item["spec"]["resourceClaims"] = [{"name": "gpu", **claim}]
    return item


def _health_taints(item: Obj, gpu_name: str) -> None:
    """The taint the driver's health check puts on a GPU's devices after XID 79 (the GPU
    fell off the bus), stamped as the API server stamps it."""
    taint = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    for device in item["spec"].get("devices") or ():
        if device["name"] == gpu_name or device["name"].startswith(f"{gpu_name}-"):
            device["taints"] = [{**taint, "timeAdded": now()}]


def load_dra(cluster: Cluster) -> None:
    """The DRA driver's classes and slices, team-infer's template and claims, and its pods
    (placed by the scheduler, which allocates their claims)."""
    for item in dra.device_classes():
        cluster.create(dra.CLASSES, "", item, manager="helm")
    for node in DRA_NODES:
        for item in dra.node_slices(node, A100_PRODUCT, DRA_GPUS):
            if node == XID_TAINTED[0]:
                _health_taints(item, XID_TAINTED[1])
            cluster.create(dra.SLICES, "", item, manager="gpu-kubelet-plugin")
    product = f"device.attributes['gpu.nvidia.com'].productName == '{A100_PRODUCT}'"
    for name, device_class, selector in (
        ("mig-3g", "mig.nvidia.com", f"{PROFILE} == '3g.40gb'"),
        ("mig-1g", "mig.nvidia.com", f"{PROFILE} == '1g.10gb'"),
        ("mig-4g", "mig.nvidia.com", f"{PROFILE} == '4g.40gb'"),
    ):
        template = {
            "metadata": {"name": name},
            "spec": {"spec": _claim_spec(device_class, selector)},
        }
        cluster.create(dra.TEMPLATES, "team-infer", template, manager="kubectl")
    for claim in ("llm-13b-gpu", "llm-34b-gpu"):
        cluster.create(
            dra.CLAIMS,
            "team-infer",
            {"metadata": {"name": claim}, "spec": _claim_spec("gpu.nvidia.com", product)},
            manager="kubectl",
        )
    pods = [_claiming("llm-13b-0", {"resourceClaimName": "llm-13b-gpu"})]
    pods += [_claiming(f"embed-dra-{i}", {"resourceClaimTemplateName": "mig-3g"}) for i in range(3)]
    pods += [_claiming(f"tiny-dra-{i}", {"resourceClaimTemplateName": "mig-1g"}) for i in range(2)]
    # 4g.40gb is not among the profiles the driver publishes here: it waits, explained.
    pods.append(_claiming("summarize-4g-0", {"resourceClaimTemplateName": "mig-4g"}))
    # A second whole A100: the only GPU left whole is the one tainted after XID 79, so it
    # waits, explained by the taint.
    pods.append(_claiming("llm-34b-0", {"resourceClaimName": "llm-34b-gpu"}))
    for item in pods:
        cluster.create(dra.PODS, "team-infer", item, manager="kubectl")


def load_inference(cluster: Cluster, controllers: Controllers) -> None:
    create_namespaces(cluster, *NAMESPACES)
    nodes = inference_nodes()
    register_nodes(cluster, controllers, nodes)
    run_operator_pods(cluster, nodes)
    for obj in serving_pods():
        seed_running(cluster, obj)
    submit_workloads(cluster, INFERENCE_WORKLOADS)
    register_nodes(cluster, controllers, dra_nodes())
    load_dra(cluster)
