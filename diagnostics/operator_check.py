"""The GPU Operator post-install checklist (the seed chapter's section 8.2) as checks.

Each item passes or fails with the fix to try. ``evaluate`` is pure (nodes and pods in,
items out); ``check_gpu_operator`` reads the cluster live through the gateway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from cluster.decode import gpu_offer
from gpus import dcgm
from gpus.labels import DEVICE_PLUGIN_APP, GPU_PRODUCT, MIG_CONFIG_STATE
from health.collect import PrometheusError, read_from_prometheus, running_exporters, scrape_exporter
from kube import Gateway, KubeError

OPERATOR_PODS = {
    DEVICE_PLUGIN_APP: ("device plugin", "nvidia.com/gpu.deploy.device-plugin"),
    "gpu-feature-discovery": (
        "GPU Feature Discovery",
        "nvidia.com/gpu.deploy.gpu-feature-discovery",
    ),
    "nvidia-dcgm-exporter": ("DCGM exporter", "nvidia.com/gpu.deploy.dcgm-exporter"),
    "nvidia-mig-manager": ("MIG Manager", "nvidia.com/gpu.deploy.mig-manager"),
}


@dataclass(frozen=True)
class CheckItem:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    topic: str = ""  # the fault table's entry (gpus.knowledge)


def _is_gpu_node(node: dict[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels.get("nvidia.com/gpu.present") == "true" or GPU_PRODUCT in labels


def evaluate(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], *, namespace: str
) -> list[CheckItem]:
    """The checklist over the nodes and the GPU Operator's pods (pure)."""
    gpu_nodes = [n for n in nodes if _is_gpu_node(n)]
    if not gpu_nodes:
        return [
            CheckItem(
                "GPU nodes",
                False,
                "No node carries GPU Feature Discovery's labels.",
                "Check that the GPU Operator is installed (helm list -n gpu-operator) and that "
                "Node Feature Discovery labelled the nodes.",
            )
        ]
    return [
        _resources_reported(gpu_nodes),
        *_operator_pods_run(gpu_nodes, pods, namespace=namespace),
        _mig_manager_not_failed(gpu_nodes),
    ]


def _resources_reported(gpu_nodes: list[dict[str, Any]]) -> CheckItem:
    silent = []
    for node in gpu_nodes:
        labels = node["metadata"].get("labels") or {}
        offers = gpu_offer((node.get("status") or {}).get("allocatable") or {})
        if not offers and labels.get(MIG_CONFIG_STATE) != "pending":
            silent.append(node["metadata"]["name"])
    return CheckItem(
        "Nodes report GPU resources",
        not silent,
        f"{len(gpu_nodes) - len(silent)} of {len(gpu_nodes)} GPU nodes report nvidia.com/gpu or MIG resources."
        + (f" Silent: {', '.join(silent)}." if silent else ""),
        ""
        if not silent
        else "kubectl describe node <node> | grep nvidia.com; check the device plugin pod "
        "on it and the driver (nvidia-smi on the node).",
        "" if not silent else "no-gpu-node",
    )


def _operator_pods_run(
    gpu_nodes: list[dict[str, Any]], pods: list[dict[str, Any]], *, namespace: str
) -> list[CheckItem]:
    """Each operand's pod runs on every GPU node its deploy label does not exclude."""
    running: dict[tuple[str, str], bool] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("namespace") != namespace:
            continue
        app = (meta.get("labels") or {}).get("app", "")
        node_name = (pod.get("spec") or {}).get("nodeName", "")
        if app in OPERATOR_PODS and node_name:
            phase = (pod.get("status") or {}).get("phase")
            ok = phase == "Running" and "deletionTimestamp" not in meta
            running[(app, node_name)] = running.get((app, node_name), False) or ok
    items = []
    for app, (title, deploy_label) in OPERATOR_PODS.items():
        wanted = [
            n
            for n in gpu_nodes
            if (n["metadata"].get("labels") or {}).get(deploy_label, "true") == "true"
        ]
        missing = [
            n["metadata"]["name"] for n in wanted if not running.get((app, n["metadata"]["name"]))
        ]
        items.append(
            CheckItem(
                f"{title} runs on every GPU node",
                not missing,
                f"Running on {len(wanted) - len(missing)} of {len(wanted)} nodes."
                + (f" Missing on: {', '.join(missing)}." if missing else ""),
                ""
                if not missing
                else f"kubectl get pods -n {namespace} -l app={app} -o wide; check the "
                f"DaemonSet {app} and the node label {deploy_label}=true; kubectl describe the pod for its events.",
                "" if not missing else "operator-crashloop",
            )
        )
    return items


def _mig_manager_not_failed(gpu_nodes: list[dict[str, Any]]) -> CheckItem:
    failed = [
        n["metadata"]["name"]
        for n in gpu_nodes
        if (n["metadata"].get("labels") or {}).get(MIG_CONFIG_STATE) == "failed"
    ]
    return CheckItem(
        "MIG Manager states are not failed",
        not failed,
        "No node reports nvidia.com/mig.config.state=failed."
        if not failed
        else f"failed on: {', '.join(failed)}.",
        ""
        if not failed
        else "A GPU in use, or a config the GPUs cannot take: read the nvidia-mig-manager "
        "pod's log on the node, then ask for a MIG change to a config valid for the model (it evicts GPU "
        "pods first).",
        "" if not failed else "operator-crashloop",
    )


def dcgm_reachable(gateway: Gateway, pods: list[dict[str, Any]], *, namespace: str) -> CheckItem:
    """Reads one exporter now (the configured way: pod proxy or Prometheus)."""
    title = "DCGM metrics are reachable"
    fix_proxy = (
        f"kubectl get --raw /api/v1/namespaces/{namespace}/pods/<exporter pod>:"
        f"{settings.QM_DCGM_PORT}/proxy/metrics | grep DCGM_FI_DEV_GPU_TEMP; check that the "
        "portal's ClusterRole allows get on pods/proxy and that the exporter listens on "
        f"{settings.QM_DCGM_PORT} (DCGM_EXPORTER_LISTEN)."
    )
    if settings.QM_DCGM_SOURCE == "off":
        return CheckItem(
            title,
            False,
            "Not read: QM_DCGM_SOURCE=off.",
            "Set QM_DCGM_SOURCE to proxy or prometheus.",
        )
    if settings.QM_DCGM_SOURCE == "prometheus":
        try:
            found = read_from_prometheus(settings.QM_PROMETHEUS_URL)
        except PrometheusError as exc:
            return CheckItem(
                title,
                False,
                str(exc),
                "Check QM_PROMETHEUS_URL and that Prometheus answers /api/v1/query.",
            )
        if not found.gpus:
            return CheckItem(
                title,
                False,
                f"Prometheus at {settings.QM_PROMETHEUS_URL} has no DCGM series.",
                f"Make Prometheus scrape the nvidia-dcgm-exporter Service in {namespace} (its "
                "ServiceMonitor, or the prometheus.io/scrape annotation).",
            )
        return CheckItem(title, True, f"Prometheus has DCGM series for {len(found.gpus)} nodes.")
    exporters = running_exporters(pods)
    if not exporters:
        return CheckItem(title, False, "No running DCGM exporter pod to read.", fix_proxy)
    pod = exporters[0][0]
    try:
        text = scrape_exporter(gateway, namespace, pod)
    except KubeError as exc:
        return CheckItem(title, False, f"{pod}: {exc.message}", fix_proxy)
    gpus = sum(len(g) for g in dcgm.gpus_by_node(dcgm.parse_exposition(text)).values())
    if not gpus:
        return CheckItem(title, False, f"{pod} answers without DCGM GPU series.", fix_proxy)
    return CheckItem(title, True, f"{pod} reports {gpus} GPUs through the API server's pod proxy.")


def check_gpu_operator(gateway: Gateway, *, namespace: str) -> list[CheckItem]:
    nodes = gateway.list("v1", "Node")
    pods = gateway.list("v1", "Pod", namespace=namespace)
    items = evaluate(nodes, pods, namespace=namespace)
    items.append(dcgm_reachable(gateway, pods, namespace=namespace))
    return items
