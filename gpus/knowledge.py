"""The fault table of the source chapter (section 8.5) as data: symptom, root causes, how to
check, and what the portal does about it. Pages show an entry next to the symptom wherever
the portal detects it (the waiting explanations, GPU health findings, the operator check)."""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULING, CONTAINER, RUNTIME, HARDWARE = (
    "Pod scheduling",
    "Container start",
    "Training runtime",
    "Node and hardware",
)
LAYERS = (SCHEDULING, CONTAINER, RUNTIME, HARDWARE)


@dataclass(frozen=True)
class Fault:
    key: str
    layer: str
    symptom: str
    causes: str
    check: str
    portal: str  # where the portal detects it, and what it offers


FAULTS = (
    Fault(
        "pod-pending",
        SCHEDULING,
        "A pod stays Pending",
        "No node has a free GPU, the MIG profile it asks for does not match what nodes offer, "
        "or node taints it does not tolerate.",
        "kubectl describe pod <pod>; kubectl describe node <node>",
        "The home page and GET /api/v1/waiting/ read the scheduler's message and name the cause.",
    ),
    Fault(
        "insufficient-gpu",
        SCHEDULING,
        "0/N nodes are available: N Insufficient nvidia.com/gpu",
        "Not enough of the resource is free, or the labels the pod selects do not match.",
        "Compare the request with nvidia.com/gpu in the nodes' allocatable "
        "(kubectl get nodes -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable)",
        "The explanation says whether the fleet has the resource at all, free now, or on one "
        "node large enough; the Fleet page shows allocated against allocatable.",
    ),
    Fault(
        "mig-mismatch",
        SCHEDULING,
        "Insufficient nvidia.com/mig-<profile> while nodes offer other MIG profiles",
        "A node's MIG layout was changed (by hand or by a request) and no longer offers the "
        "profile; or the pool's layout never offered it.",
        "kubectl get node <node> -o json | jq '.status.allocatable | with_entries(select(.key "
        '| contains("mig")))\'',
        "Drift on the Fleet page names the node and since when; the explanation offers the MIG "
        "change request that puts it back, with its impact assessment.",
    ),
    Fault(
        "dra-claim",
        SCHEDULING,
        "0/N nodes are available: N cannot allocate all claims",
        "A DRA claim asks for a device class the cluster lacks, for devices no ResourceSlice "
        "publishes, or for devices all allocated (on a partitionable GPU, MIG devices "
        "allocated on it hold the shared counters a whole GPU or a larger profile needs).",
        "kubectl get resourceclaim -n <ns> <claim> -o yaml; kubectl get resourceslices "
        "-o yaml; kubectl get deviceclasses",
        "The explanation names which of these holds for the claim; the node page shows each "
        "GPU's DRA devices, what is allocated and the counters left.",
    ),
    Fault(
        "no-gpu-node",
        SCHEDULING,
        "A GPU pod lands on a node without GPUs, or GPU nodes offer no GPU resource",
        "The device plugin does not report the resource, or the node's labels are wrong.",
        "kubectl get node <node> -o yaml (labels nvidia.com/gpu.*, allocatable nvidia.com/*)",
        "The GPU Operator check lists GPU nodes that report no GPU resources.",
    ),
    Fault(
        "gang-deadlock",
        SCHEDULING,
        "Gang scheduling stalls: some pods of a job run, the others stay Pending",
        "The queue cannot give the whole gang at once; the scheduled part holds its GPUs.",
        "The PodGroup's status and the queue's resources (kubectl get podgroup, vcctl queue get)",
        "Queue usage and borrowing are on the home page; ask for queue quota or shrink the job.",
    ),
    Fault(
        "queue-quota",
        SCHEDULING,
        "A Kueue workload is not admitted: no unused quota in a flavor",
        "The ClusterQueue's nominal quota (and what it may borrow from its cohort) is in use.",
        "kubectl get workload -n <ns> <name> -o yaml (status.conditions QuotaReserved)",
        "The explanation names the queue, flavor and shortfall, and offers a quota request.",
    ),
    Fault(
        "quota-exceeded",
        SCHEDULING,
        "Pods are never created: exceeded quota (a FailedCreate event on the Job)",
        "The namespace's ResourceQuota has no room left for requests.nvidia.com/gpu (pending "
        "pods count too); only requests.<resource> keys are enforced.",
        "kubectl describe resourcequota -n <ns>; kubectl get events -n <ns> "
        "--field-selector reason=FailedCreate",
        "The home page and GET /api/v1/waiting/ show the refused Job with the quota, what is "
        "used and what a pod asks for, and offer a quota request.",
    ),
    Fault(
        "create-container-config-error",
        CONTAINER,
        "CreateContainerConfigError",
        "The device path the device plugin allocated is not visible inside the container.",
        "The container runtime and the NVIDIA Container Toolkit on the node (its logs).",
        "The GPU Operator check verifies that the operator's pods run on every GPU node.",
    ),
    Fault(
        "no-gpu-in-container",
        CONTAINER,
        "nvidia-smi in the container finds no GPU",
        "The driver is not loaded, or the libraries were not mounted.",
        "nvidia-smi on the node; the toolkit's logs.",
        "The GPU Operator check shows the driver-side DaemonSets per node.",
    ),
    Fault(
        "oomkilled",
        CONTAINER,
        "OOMKilled",
        "GPU memory over the limit, or a peak above what the container can see.",
        "DCGM framebuffer metrics (DCGM_FI_DEV_FB_USED); whether the job needs a larger MIG "
        "profile.",
        "The node page shows memory used per GPU and per MIG instance.",
    ),
    Fault(
        "nccl-timeout",
        RUNTIME,
        "NCCL timeout or hang",
        "Network unreachable, MTU mismatch, PFC/ECN not configured, an InfiniBand port down.",
        "ib_write_bw between the nodes; run with NCCL_DEBUG=INFO.",
        "Outside what the portal sees: check the fabric.",
    ),
    Fault(
        "loss-nan",
        RUNTIME,
        "Training loss goes wrong or NaN",
        "GPU memory ECC errors; Xid 48, 74 or 79.",
        "DCGM Xid alerts; rerun on another GPU.",
        "GPU health shows the last Xid per GPU and suggests draining a node whose GPU needs a "
        "reset or a reboot.",
    ),
    Fault(
        "slow-multinode",
        RUNTIME,
        "Multi-node training much slower than expected",
        "GPU-NIC topology not aligned, crossing NUMA nodes, a PCIe bottleneck.",
        "nvidia-smi topo -m on the nodes.",
        "Outside what the portal sees: check the placement and topology.",
    ),
    Fault(
        "gpu-lost",
        HARDWARE,
        "A GPU disappears from nvidia-smi (Xid 79, fallen off the bus)",
        "A hardware fault, a PCIe link problem, a driver crash.",
        "The node's kernel log (dmesg, NVRM: Xid) and the GPU's BMC log.",
        "GPU health marks the GPU as not reporting and suggests a cordon-and-drain request for "
        "an approver; reboot, and replace the GPU if it recurs.",
    ),
    Fault(
        "xid-hardware",
        HARDWARE,
        "Xid 95, 48 or 74",
        "Usually hardware that needs a GPU reset or a replacement.",
        "Mark the node unschedulable, isolate it, then swap the card.",
        "GPU health suggests the cordon-and-drain request; after the repair an admin returns the "
        "node to service from the request's page.",
    ),
    Fault(
        "thermal",
        HARDWARE,
        "Temperature or power alarms",
        "Insufficient cooling, a failed fan.",
        "DCGM temperature metrics; a look at the rack.",
        "GPU health flags GPUs at or above QM_GPU_HOT_CELSIUS.",
    ),
    Fault(
        "operator-crashloop",
        HARDWARE,
        "GPU Operator pods in CrashLoopBackOff",
        "The driver does not match the kernel; a wrong MIG ConfigMap.",
        "The operator validator's logs (kubectl logs -n gpu-operator -l app=nvidia-operator-"
        "validator).",
        "The GPU Operator check lists missing operator pods per node and MIG Manager failures.",
    ),
)
BY_KEY = {f.key: f for f in FAULTS}


def for_xid(code: int) -> str:
    """The entry for an Xid finding."""
    if code == 79:
        return "gpu-lost"
    if code in (48, 74, 95):
        return "xid-hardware"
    return "loss-nan" if code else ""


def by_layer() -> list[tuple[str, list[Fault]]]:
    return [(layer, [f for f in FAULTS if f.layer == layer]) for layer in LAYERS]
