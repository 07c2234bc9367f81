"""The inference fleet (``python -m devcluster --scenario inference``) as the portal reads it
over the API: nodes and pools, the GPU Operator's labels, allocatable GPUs and MIG devices
checked against the reference data (reference/mig-profiles.yaml, mig-parted-config.yaml),
running pods that fit their nodes, and its MIG Manager re-slicing an H100."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

import devcluster
from devcluster import dra
from devcluster.dra import allocated_node
from kube import Gateway, ObjectRef, PermanentKubeError, connect
from tests.support import wait_for

REFERENCE = Path(__file__).resolve().parents[2] / "reference"
TOKEN = "inference-demo-token"
MIG_STATE = "nvidia.com/mig.config.state"
# What GPU Feature Discovery always sets (gpu-operator-facts.md, "GFD label catalogue").
GFD_ALWAYS = (
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.family",
    "nvidia.com/gpu.compute.major",
    "nvidia.com/gpu.compute.minor",
    "nvidia.com/gpu.machine",
    "nvidia.com/gpu.mode",
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/cuda.driver-version.full",
    "nvidia.com/cuda.runtime-version.full",
    "nvidia.com/mig.capable",
    "nvidia.com/mps.capable",
)
pytestmark = pytest.mark.demo_cluster(scenario="inference", token=TOKEN)


@pytest.fixture
def api(demo_cluster: devcluster.DemoCluster) -> Gateway:
    return connect(url=demo_cluster.url, token=TOKEN)


def reference_model(product: str) -> dict[str, Any]:
    models = yaml.safe_load((REFERENCE / "mig-profiles.yaml").read_text())["gpus"]
    return next(
        model
        for model in models.values()
        if product in [label["value"] for label in model.get("gfd_product_labels", [])]
    )


def per_gpu_devices(config: str, model: dict[str, Any]) -> dict[str, int]:
    """The MIG devices one GPU of ``model`` gets from the GPU Operator's ``config``."""
    configs = yaml.safe_load((REFERENCE / "mig-parted-config.yaml").read_text())["mig-configs"]
    ids = {i.upper() for i in model["pci_device_ids"]}
    for entry in configs[config]:
        filters = entry.get("device-filter")
        filters = [filters] if isinstance(filters, str) else filters
        if filters is None or ids & {f.upper() for f in filters}:
            return dict(entry.get("mig-devices") or {})
    raise AssertionError(f"{config} has no entry for {model['pci_device_ids']}")


def nodes_by_name(api: Gateway) -> dict[str, dict[str, Any]]:
    return {node["metadata"]["name"]: node for node in api.list("v1", "Node")}


def gpus(node: dict[str, Any], section: str = "allocatable") -> dict[str, int]:
    values = node["status"][section].items()
    return {k: int(v) for k, v in values if k.startswith("nvidia.com/") and int(v)}


def test_the_fleet_is_two_h100_pools_and_two_l40s_pools_behind_a_token(
    demo_cluster: devcluster.DemoCluster, api: Gateway
) -> None:
    pools = {
        name: node["metadata"]["labels"]["quartermaster.io/pool"]
        for name, node in nodes_by_name(api).items()
    }
    assert pools == {
        "infer-h100-01": "h100-mig",
        "infer-h100-02": "h100-mig",
        "infer-h100-03": "h100",
        "infer-l40s-01": "l40s",
        "infer-l40s-02": "l40s",
        "infer-l40s-03": "l40s-shared",
        "infer-a100-01": "a100-dra",
        "infer-a100-02": "a100-dra",
    }
    with pytest.raises(PermanentKubeError):
        connect(url=demo_cluster.url, token="wrong").list("v1", "Node")
    served = {g["name"] for g in api.api_groups()["groups"]}
    assert "kueue.x-k8s.io" in served  # Kueue installed, as on the training cluster
    waiting = {
        w["metadata"]["name"]: w["spec"]["queueName"]
        for w in api.list("kueue.x-k8s.io/v1beta2", "Workload", namespace="team-infer")
    }
    assert waiting == {"job-batch-embed": "offline-batch", "job-canary-8b": "online-infer"}


def test_h100_nodes_advertise_what_their_mig_config_makes_per_the_reference(
    api: Gateway,
) -> None:
    nodes = nodes_by_name(api)
    h100 = reference_model("NVIDIA-H100-80GB-HBM3")
    profiles = {p["name"]: p for p in h100["profiles"]}
    for name in ("infer-h100-01", "infer-h100-02"):
        labels = nodes[name]["metadata"]["labels"]
        assert labels["nvidia.com/mig.config"] == "all-1g.10gb"
        assert labels["nvidia.com/mig.config.state"] == "success"
        assert labels["nvidia.com/gpu.deploy.mig-manager"] == "true"
        assert labels["nvidia.com/gpu.replicas"] == "0"  # MIG on every GPU
        count = int(labels["nvidia.com/gpu.count"])
        devices = per_gpu_devices("all-1g.10gb", h100)
        assert devices == {"1g.10gb": 7}
        expected = {profiles[p]["resource_name"]: n * count for p, n in devices.items()}
        assert (
            gpus(nodes[name])
            == gpus(nodes[name], "capacity")
            == expected
            == {"nvidia.com/mig-1g.10gb": 56}
        )
        assert labels["nvidia.com/mig-1g.10gb.count"] == "56"
        memory = int(profiles["1g.10gb"]["memory_gib_reported"] * 1024)
        assert labels["nvidia.com/mig-1g.10gb.memory"] == str(memory)
        assert labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    whole = nodes["infer-h100-03"]
    assert whole["metadata"]["labels"]["nvidia.com/mig.config"] == "all-disabled"
    assert gpus(whole) == {"nvidia.com/gpu": 8}
    assert whole["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]


def test_l40s_nodes_have_no_mig_and_one_is_time_sliced(api: Gateway) -> None:
    nodes = nodes_by_name(api)
    catalog = yaml.safe_load((REFERENCE / "mig-profiles.yaml").read_text())["gpus"]
    products = {label["value"] for m in catalog.values() for label in m["gfd_product_labels"]}
    for name in ("infer-l40s-01", "infer-l40s-02", "infer-l40s-03"):
        labels = nodes[name]["metadata"]["labels"]
        assert [key for key in GFD_ALWAYS if key not in labels] == []
        assert labels["nvidia.com/gpu.product"].removesuffix("-SHARED") == "NVIDIA-L40S"
        assert "NVIDIA-L40S" not in products  # no MIG profiles: not a MIG GPU
        assert labels["nvidia.com/mig.capable"] == "false"
        assert labels["nvidia.com/gpu.count"] == "4"
        for key in ("nvidia.com/mig.config", "nvidia.com/gpu.deploy.mig-manager"):
            assert key not in labels
        assert not [k for k in gpus(nodes[name]) if k.startswith("nvidia.com/mig-")]
    for name in ("infer-l40s-01", "infer-l40s-02"):
        labels = nodes[name]["metadata"]["labels"]
        assert (labels["nvidia.com/gpu.sharing-strategy"], labels["nvidia.com/gpu.replicas"]) == (
            "none",
            "1",
        )
        assert gpus(nodes[name]) == {"nvidia.com/gpu": 4}
    # Time-sliced, not renamed: each GPU advertised replicas times, the product -SHARED.
    shared = nodes["infer-l40s-03"]["metadata"]["labels"]
    assert shared["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert shared["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    replicas = int(shared["nvidia.com/gpu.replicas"])
    assert gpus(nodes["infer-l40s-03"]) == {"nvidia.com/gpu": 4 * replicas} != {"nvidia.com/gpu": 4}


def test_every_gpu_node_carries_the_gpu_operators_labels_and_its_daemonsets(
    api: Gateway,
) -> None:
    nodes = nodes_by_name(api)
    operator = Counter(
        p["spec"]["nodeName"] for p in api.list("v1", "Pod", namespace="gpu-operator")
    )
    for name, node in nodes.items():
        labels = node["metadata"]["labels"]
        if labels["quartermaster.io/pool"] == "a100-dra":
            continue  # the DRA driver serves these GPUs (test_the_dra_pool_...)
        assert [key for key in GFD_ALWAYS if key not in labels] == [], name
        assert labels["nvidia.com/mig.strategy"] == "mixed"
        mig_capable = labels["nvidia.com/mig.capable"] == "true"
        # device plugin, GFD, DCGM exporter; the MIG Manager on MIG-capable nodes only
        assert operator[name] == (4 if mig_capable else 3), name


def test_the_serving_pods_run_within_their_nodes_allocatable(api: Gateway) -> None:
    nodes = nodes_by_name(api)
    used: dict[str, Counter[str]] = {name: Counter() for name in nodes}
    serving = [
        p
        for namespace in ("team-infer", "team-a-serve")
        for p in api.list("v1", "Pod", namespace=namespace)
        if not p["spec"].get("resourceClaims")  # the DRA pool's (test_the_dra_pool_...)
    ]
    for pod in serving:
        assert pod["status"]["phase"] == "Running"
        node = nodes[pod["spec"]["nodeName"]]
        for container in pod["spec"]["containers"]:
            used[node["metadata"]["name"]].update(
                {k: int(v) for k, v in container["resources"]["limits"].items()}
            )
        if node["spec"].get("taints"):
            assert pod["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"
    for name, counts in used.items():
        free = gpus(nodes[name])
        assert all(count <= free.get(resource, 0) for resource, count in counts.items()), name
    assert {p["metadata"]["namespace"] for p in serving} == {"team-infer", "team-a-serve"}
    assert sum(used["infer-h100-03"].values()) == 4  # half the whole H100s in use
    assert used["infer-l40s-03"]["nvidia.com/gpu"] > 4  # more pods than GPUs: time-slicing


def test_the_mig_manager_reslices_an_inference_h100_as_the_reference_says(
    api: Gateway,
) -> None:
    api.patch_node_labels("infer-h100-02", {"nvidia.com/mig.config": "all-3g.40gb"})

    # embed-small-1/3/5 hold 1g.10gb devices there: the MIG Manager refuses a busy GPU
    def state() -> str:
        return str(nodes_by_name(api)["infer-h100-02"]["metadata"]["labels"][MIG_STATE])

    wait_for(lambda: state() == "failed", what="the MIG Manager refusing a busy node")
    assert gpus(nodes_by_name(api)["infer-h100-02"]) == {"nvidia.com/mig-1g.10gb": 56}
    for name in ("embed-small-1", "embed-small-3", "embed-small-5"):
        api.delete(ObjectRef("v1", "Pod", name, "team-infer"))
    wait_for(
        lambda: (
            not [
                p
                for p in api.list("v1", "Pod", namespace="team-infer")
                if p["spec"].get("nodeName") == "infer-h100-02"
            ]
        ),
        what="the pods on infer-h100-02 gone",
    )
    api.patch_node_labels("infer-h100-02", {"nvidia.com/mig.config": "all-1g.10gb"})
    api.patch_node_labels("infer-h100-02", {"nvidia.com/mig.config": "all-3g.40gb"})
    devices = per_gpu_devices("all-3g.40gb", reference_model("NVIDIA-H100-80GB-HBM3"))
    wanted = {f"nvidia.com/mig-{p}": n * 8 for p, n in devices.items()}
    assert wanted == {"nvidia.com/mig-3g.40gb": 16}
    wait_for(
        lambda: gpus(nodes_by_name(api)["infer-h100-02"]) == wanted,
        what="infer-h100-02 re-sliced to 3g.40gb",
    )


def test_the_dra_pool_allocates_claims_as_the_real_scheduler_and_one_waits_in_its_words(
    api: Gateway,
) -> None:
    """The A100 pool's GPUs are published through DRA (whole GPUs and MIG devices sharing
    each GPU's counters); the scheduler allocates team-infer's claims on one node each,
    never two devices on overlapping memory slices, and a claim for a profile the driver
    does not publish waits with the words a real scheduler says (tests/data/dra)."""
    slices = api.list("resource.k8s.io/v1", "ResourceSlice")
    assert {s["spec"]["nodeName"] for s in slices} == {"infer-a100-01", "infer-a100-02"}
    consumes = {
        (s["spec"]["nodeName"], d["name"]): d["consumesCounters"][0]
        for s in slices
        for d in s["spec"].get("devices") or ()
    }
    claims = wait_for(
        lambda: (
            [
                c
                for c in api.list("resource.k8s.io/v1", "ResourceClaim", namespace="team-infer")
                if (c.get("status") or {}).get("allocation")
            ]
            if len(api.list("resource.k8s.io/v1", "ResourceClaim", namespace="team-infer")) == 8
            and sum(
                1
                for c in api.list("resource.k8s.io/v1", "ResourceClaim", namespace="team-infer")
                if (c.get("status") or {}).get("allocation")
            )
            == 6
            else None
        ),
        what="six claims allocated",
    )
    held: dict[tuple[str, str], Counter[str]] = {}
    for claim in claims:
        allocation = claim["status"]["allocation"]
        node = allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
        (result,) = allocation["devices"]["results"]
        use = consumes[(node, result["device"])]
        counted = held.setdefault((node, use["counterSet"]), Counter())
        counted.update({k: 1 for k in use["counters"] if k.startswith("memory-slice-")})
        assert claim["status"]["reservedFor"][0]["resource"] == "pods"
    assert all(count == 1 for counted in held.values() for count in counted.values())
    # The GPU the driver's health check tainted (XID 79, NoSchedule) serves no claim.
    taints = {
        (s["spec"]["nodeName"], d["name"]): d.get("taints") or []
        for s in slices
        for d in s["spec"].get("devices") or ()
    }
    tainted = {key for key, found in taints.items() if found}
    assert len(tainted) == 1 + 7 + 2  # infer-a100-02's gpu-1: itself, its 1g and 3g devices
    assert all(t["timeAdded"] for found in taints.values() for t in found)
    given = {
        (allocated_node(c), result["device"])
        for c in claims
        for result in c["status"]["allocation"]["devices"]["results"]
    }
    assert given and not given & tainted, given
    pods = {p["metadata"]["name"]: p for p in api.list("v1", "Pod", namespace="team-infer")}
    assert pods["embed-dra-0"]["status"]["resourceClaimStatuses"][0]["name"] == "gpu"
    waiting = pods["summarize-4g-0"]
    (scheduled,) = [c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert (
        "7 cannot allocate all claims. still not schedulable, preemption:" in scheduled["message"]
    )
    # The second whole A100 waits: the one GPU left whole is tainted (the same words).
    (scheduled,) = [
        c for c in pods["llm-34b-0"]["status"]["conditions"] if c["type"] == "PodScheduled"
    ]
    assert "7 cannot allocate all claims." in scheduled["message"], scheduled


def test_the_demo_scheduler_keeps_claims_off_a_tainted_device_as_the_real_one_did() -> None:
    """tests/data/dra/tainted.json, from a real 1.36 scheduler: gpu-0 tainted
    ``gpu.nvidia.com/xid=79:NoSchedule`` and gpu-1 ``…=13:None``; the first H100 claim got
    gpu-1, the second waited, and a claim tolerating the XID taint got gpu-0."""
    recorded = Path(__file__).resolve().parents[1] / "data" / "dra"
    tainted = json.loads((recorded / "tainted.json").read_text())
    classes = json.loads((recorded / "deviceclasses.json").read_text())
    claims = {c["metadata"]["name"]: c for c in tainted["claims"]}
    node = tainted["slice"]["spec"]["nodeName"]
    view = dra.Allocator([tainted["slice"]], classes, [])
    first = view.on_node(claims["rc-taint-first"], node)
    assert first == claims["rc-taint-first"]["status"]["allocation"]["devices"]["results"]
    assert first is not None
    view.allocate(first)
    assert view.on_node(claims["rc-taint-wait"], node) is None
    tolerant = json.loads(json.dumps(claims["rc-taint-wait"]))
    tolerant["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": "gpu.nvidia.com/xid", "operator": "Exists"}
    ]
    assert [r["device"] for r in view.on_node(tolerant, node) or []] == ["gpu-0"]
