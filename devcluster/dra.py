"""Dynamic Resource Allocation in the demo cluster (``resource.k8s.io/v1``): what the NVIDIA
DRA driver publishes for a node of partitionable GPUs, and the scheduler's allocation of a
pod's claims against it, as a real 1.36 control plane does (tests/data/dra, recorded from one).

The driver's names (``docs/reference/dra.md``): driver ``gpu.nvidia.com``, whole GPUs
``gpu-<minor>``, MIG devices ``gpu-<minor>-mig-<profile without dots>-<GI profile id>-<start>``,
one counter set ``gpu-<minor>-counter-set`` per GPU whose counters every device consumes (the
whole GPU all of them, a MIG device its multiprocessors, memory and memory slices). Counter
sets and devices go in two slices of one pool. A device can be allocated while no other
claim holds it and the counters it consumes are left on its set; a claim's devices are on
one node. Selectors are evaluated for the forms the driver's classes and its users' claims
write (``device.driver == '…'`` and ``device.attributes['<driver>'].<name> == <value>``,
joined by ``&&``); any other expression matches nothing here.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from devcluster import gpu
from devcluster.cluster import Cluster, now
from devcluster.resources import Resource, find
from devcluster.selectors import tolerates_taint

Obj = dict[str, Any]
API = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
DRIVER_VERSION = "580.105.8"
MIB = 1024 * 1024
# The profiles published per GPU (each at every placement the reference gives).
PUBLISHED = ("1g.10gb", "3g.40gb")


def typed(**values: Any) -> Obj:
    out: Obj = {}
    for name, value in values.items():
        if isinstance(value, tuple):
            out[name] = {value[0]: value[1]}
        elif isinstance(value, bool):
            out[name] = {"bool": value}
        elif isinstance(value, int):
            out[name] = {"int": value}
        else:
            out[name] = {"string": value}
    return out


def amounts(values: dict[str, Any]) -> Obj:
    return {name: {"value": str(value)} for name, value in values.items()}


def device_classes() -> list[Obj]:
    """The driver's classes: whole GPUs and MIG devices."""
    return [
        {
            "apiVersion": API,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f"device.driver == '{DRIVER}' && "
                            f"device.attributes['{DRIVER}'].type == '{kind}'"
                        }
                    }
                ]
            },
        }
        for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))
    ]


def _mib(gib: float) -> str:
    return f"{round(gib * 1024)}Mi"


def node_slices(node: str, product: str, gpu_count: int) -> list[Obj]:
    """A node's partitionable GPUs as the driver publishes them: a slice of counter sets
    and a slice of devices (whole GPUs and MIG devices), one pool named for the node."""
    found = gpu.model_for_product(product.replace(" ", "-"))
    assert found is not None, product
    _, model = found
    total_sm = max(int(p.get("sm_count") or 0) for p in model["profiles"])
    memory = f"{model['gpu_memory_label_mib_observed']}Mi"
    slices = int(model["memory_slices_total"])
    counter_sets, devices = [], []
    for minor in range(gpu_count):
        uuid = f"GPU-{node}-{minor}"
        everything = {
            "multiprocessors": total_sm,
            "memory": memory,
            **{f"memory-slice-{i}": 1 for i in range(slices)},
        }
        name = f"gpu-{minor}-counter-set"
        counter_sets.append({"name": name, "counters": amounts(everything)})
        common = {
            "productName": product,
            "brand": "Nvidia",
            "architecture": "Ampere",
            "cudaComputeCapability": ("version", "8.0.0"),
            "driverVersion": ("version", DRIVER_VERSION),
            "cudaDriverVersion": ("version", "13.0.0"),
        }
        devices.append(
            {
                "name": f"gpu-{minor}",
                "attributes": typed(type="gpu", uuid=uuid, **common),
                "capacity": amounts({"multiprocessors": total_sm, "memory": memory}),
                "consumesCounters": [{"counterSet": name, "counters": amounts(everything)}],
            }
        )
        for profile in model["profiles"]:
            if profile["name"] not in PUBLISHED:
                continue
            size = int(profile["placements"]["size"])
            for start in profile["placements"]["starts"]:
                used = {
                    "multiprocessors": profile["sm_count"],
                    "memory": _mib(profile["memory_gib_reported"]),
                    **{f"memory-slice-{i}": 1 for i in range(start, start + size)},
                }
                devices.append(
                    {
                        "name": f"gpu-{minor}-mig-{profile['name'].replace('.', '')}-"
                        f"{profile['gi_profile_id']}-{start}",
                        "attributes": typed(
                            type="mig", parentUUID=uuid, profile=profile["name"], **common
                        ),
                        "capacity": amounts(
                            {"multiprocessors": used["multiprocessors"], "memory": used["memory"]}
                        ),
                        "consumesCounters": [{"counterSet": name, "counters": amounts(used)}],
                    }
                )
    pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
    spec = {"driver": DRIVER, "nodeName": node, "pool": pool}
    return [
        {
            "apiVersion": API,
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}-counters"},
            "spec": {**spec, "sharedCounters": counter_sets},
        },
        {
            "apiVersion": API,
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}-devices"},
            "spec": {**spec, "devices": devices},
        },
    ]


# ---------------------------------------------------------------- selectors (a CEL subset)
_DRIVER = re.compile(r"""^\(?\s*device\.driver\s*==\s*(?:'([^']*)'|"([^"]*)")\s*\)?$""")
_ATTRIBUTE = re.compile(
    r"""^\(?\s*device\.attributes\[(['"])([^'"]+)\1\]\.(\w+)\s*==\s*"""
    r"""(?:'([^']*)'|"([^"]*)"|(-?\d+)|(true|false))\s*\)?$"""
)


def _value(typed_value: Any) -> Any:
    if isinstance(typed_value, dict):
        for kind in ("string", "int", "bool", "version"):
            if kind in typed_value:
                return typed_value[kind]
    return None


def matches(driver: str, device: Obj, expression: str) -> bool:
    attributes = device.get("attributes") or {}
    for term in expression.split("&&"):
        text = term.strip()
        found = _DRIVER.match(text)
        if found:
            if driver != (found.group(1) if found.group(1) is not None else found.group(2)):
                return False
            continue
        found = _ATTRIBUTE.match(text)
        if not found or found.group(2) != driver:
            return False
        if found.group(4) is not None or found.group(5) is not None:
            wanted: Any = found.group(4) if found.group(4) is not None else found.group(5)
        elif found.group(6) is not None:
            wanted = int(found.group(6))
        else:
            wanted = found.group(7) == "true"
        if _value(attributes.get(found.group(3))) != wanted:
            return False
    return True


# ---------------------------------------------------------------- allocation
def _amount(text: Any) -> int:
    """A counter's quantity as an integer (the units the driver publishes: plain, Mi, Gi)."""
    value = str(text)
    for suffix, factor in (("Ki", 1024), ("Mi", MIB), ("Gi", 1024 * MIB), ("Ti", 1024**4)):
        if value.endswith(suffix):
            return int(float(value[: -len(suffix)]) * factor)
    return int(float(value)) if value else 0


class Allocator:
    """One scheduling pass's view: the published devices per node, the classes, and what
    allocated claims hold (devices and counters), updated as claims are allocated."""

    def __init__(self, slices: Iterable[Obj], classes: Iterable[Obj], claims: Iterable[Obj]):
        self.classes = {
            c["metadata"]["name"]: [
                (s.get("cel") or {}).get("expression", "") for s in c["spec"].get("selectors") or ()
            ]
            for c in classes
        }
        self.devices: dict[str, list[tuple[str, str, Obj]]] = {}  # node -> (driver, pool, device)
        self.totals: dict[tuple[str, str, str], Counter[str]] = {}
        for item in slices:
            spec = item["spec"]
            driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
            for counter_set in spec.get("sharedCounters") or ():
                self.totals[(driver, pool, counter_set["name"])] = Counter(
                    {n: _amount(v.get("value")) for n, v in counter_set["counters"].items()}
                )
            for device in spec.get("devices") or ():
                self.devices.setdefault(spec.get("nodeName", ""), []).append((driver, pool, device))
        self.taken: set[tuple[str, str, str]] = set()
        self.used: dict[tuple[str, str, str], Counter[str]] = {}
        for claim in claims:
            for result in _results(claim):
                self._take(result["driver"], result["pool"], result["device"])

    def _device(self, driver: str, pool: str, name: str) -> Obj | None:
        for devices in self.devices.values():
            for d, p, device in devices:
                if (d, p, device["name"]) == (driver, pool, name):
                    return device
        return None

    def _take(self, driver: str, pool: str, name: str) -> None:
        self.taken.add((driver, pool, name))
        device = self._device(driver, pool, name)
        for use in (device or {}).get("consumesCounters") or ():
            used = self.used.setdefault((driver, pool, use["counterSet"]), Counter())
            for counter, value in use["counters"].items():
                used[counter] += _amount(value.get("value"))

    def _fits(self, driver: str, pool: str, device: Obj, extra: Counter[Any]) -> bool:
        if (driver, pool, device["name"]) in self.taken:
            return False
        for use in device.get("consumesCounters") or ():
            key = (driver, pool, use["counterSet"])
            total = self.totals.get(key, Counter())
            used = self.used.get(key, Counter())
            for counter, value in use["counters"].items():
                wanted = _amount(value.get("value"))
                if used[counter] + extra[(key, counter)] + wanted > total[counter]:
                    return False
        return True

    def unknown_class(self, claim: Obj) -> tuple[str, str] | None:
        """(request, class) of the first request whose class does not exist."""
        for request in _requests(claim):
            if request["deviceClassName"] not in self.classes:
                return request["name"], request["deviceClassName"]
        return None

    def on_node(self, claim: Obj, node: str) -> list[Obj] | None:
        """The results allocating ``claim`` on ``node`` (None: it cannot be)."""
        chosen: list[Obj] = []
        picked: set[tuple[str, str, str]] = set()
        extra: Counter[Any] = Counter()
        for request in _requests(claim):
            selectors = [*self.classes.get(request["deviceClassName"], ["false"])]
            selectors += [
                (s.get("cel") or {}).get("expression", "") for s in request.get("selectors") or ()
            ]
            count = int(request.get("count") or 1)
            for driver, pool, device in self.devices.get(node, []):
                if count == 0:
                    break
                key = (driver, pool, device["name"])
                if key in picked or not all(matches(driver, device, s) for s in selectors):
                    continue
                if kept_off(device, request.get("tolerations") or ()):
                    continue
                if not self._fits(driver, pool, device, extra):
                    continue
                picked.add(key)
                for use in device.get("consumesCounters") or ():
                    set_key = (driver, pool, use["counterSet"])
                    for counter, value in use["counters"].items():
                        extra[(set_key, counter)] += _amount(value.get("value"))
                chosen.append(
                    {
                        "request": request["name"],
                        "driver": driver,
                        "pool": pool,
                        "device": device["name"],
                    }
                )
                count -= 1
            if count:
                return None
        return chosen

    def allocate(self, results: list[Obj]) -> None:
        for result in results:
            self._take(result["driver"], result["pool"], result["device"])


def kept_off(device: Obj, tolerations: Iterable[Obj]) -> bool:
    """Whether a taint the request does not tolerate keeps it off ``device`` (KEP-5055: the
    scheduler ignores such devices; ``None`` and unknown effects only inform)."""
    tolerations = list(tolerations)
    return any(
        taint.get("effect") in ("NoSchedule", "NoExecute")
        and not any(tolerates_taint(t, taint) for t in tolerations)
        for taint in device.get("taints") or ()
    )


def _requests(claim: Obj) -> list[Obj]:
    out = []
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
        if request.get("firstAvailable"):
            out.append({"name": request["name"], **request["firstAvailable"][0]})
        else:
            out.append({"name": request["name"], **(request.get("exactly") or {})})
    return out


def _results(claim: Obj) -> list[Obj]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or ())


def allocation(results: list[Obj], node: str) -> Obj:
    """A claim's ``status.allocation`` as the scheduler writes it."""
    return {
        "devices": {"results": results},
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }


def allocated_node(claim: Obj) -> str:
    selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}
    for term in selector.get("nodeSelectorTerms") or ():
        for match in term.get("matchFields") or ():
            if match.get("key") == "metadata.name" and match.get("values"):
                return str(match["values"][0])
    return ""


# ---------------------------------------------------------------- claims of pods
def _found(group: str, plural: str) -> Resource:
    resource = find(group, "v1", plural)
    assert resource is not None, plural
    return resource


CLAIMS = _found("resource.k8s.io", "resourceclaims")
TEMPLATES = _found("resource.k8s.io", "resourceclaimtemplates")
SLICES = _found("resource.k8s.io", "resourceslices")
CLASSES = _found("resource.k8s.io", "deviceclasses")
PODS = _found("", "pods")


def allocator(cluster: Cluster) -> Allocator:
    return Allocator(cluster.all(SLICES), cluster.all(CLASSES), cluster.all(CLAIMS))


def pod_claims(cluster: Cluster, pod: Obj) -> list[Obj] | None:
    """The pod's claims: those it names, and those made from its templates (made here as the
    resourceclaim controller makes them, owned by the pod, named in its
    ``status.resourceClaimStatuses``). None while a claim it names does not exist."""
    namespace = pod["metadata"]["namespace"]
    made = {
        s["name"]: s.get("resourceClaimName")
        for s in pod["status"].get("resourceClaimStatuses") or ()
    }
    out = []
    for asked in pod["spec"].get("resourceClaims") or ():
        name = asked.get("resourceClaimName") or made.get(asked["name"])
        if not name and asked.get("resourceClaimTemplateName"):
            name = _make_claim(cluster, pod, asked)
        claim = cluster.get(CLAIMS, namespace, name) if name else None
        if claim is None:
            return None
        out.append(claim)
    return out


def _make_claim(cluster: Cluster, pod: Obj, asked: Obj) -> str | None:
    meta = pod["metadata"]
    template = cluster.get(TEMPLATES, meta["namespace"], asked["resourceClaimTemplateName"])
    if template is None:
        return None
    name = f"{meta['name']}-{asked['name']}-{meta.get('uid', 'x')[:5]}"
    claim = {
        "apiVersion": API,
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "uid": f"claim-{meta.get('uid', name)}",
            "creationTimestamp": now(),
            "annotations": {"resource.kubernetes.io/pod-claim-name": asked["name"]},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": copy.deepcopy(template["spec"]["spec"]),
        "status": {},
    }
    cluster._store(CLAIMS, claim, None)
    new = copy.deepcopy(pod)
    statuses = new["status"].setdefault("resourceClaimStatuses", [])
    statuses.append({"name": asked["name"], "resourceClaimName": name})
    cluster._store(PODS, new, pod)
    pod["status"] = new["status"]  # the scheduler's copy sees it too
    return name


Placed = list[tuple[Obj, list[Obj]]]  # each claim with the results allocating it (none: held)


def place(view: Allocator, claims: list[Obj], node: str) -> Placed | None:
    """The pod's claims on ``node``: each allocated one must be bound there, each other one
    must be allocatable there (None: the node cannot take the pod)."""
    placed: Placed = []
    for claim in claims:
        if (claim.get("status") or {}).get("allocation"):
            if allocated_node(claim) != node:
                return None
            placed.append((claim, []))
            continue
        results = view.on_node(claim, node)
        if results is None:
            return None
        placed.append((claim, results))
    return placed


def reserve(cluster: Cluster, view: Allocator, pod: Obj, placed: Placed, node: str) -> None:
    """Write each claim's allocation (where it had none) and reserve it for the pod."""
    meta = pod["metadata"]
    for claim, results in placed:
        new = copy.deepcopy(claim)
        status = new.setdefault("status", {})
        if results:
            status["allocation"] = allocation(results, node)
            view.allocate(results)
        reserved = status.setdefault("reservedFor", [])
        if not any(r.get("uid") == meta.get("uid") for r in reserved):
            reserved.append({"resource": "pods", "name": meta["name"], "uid": meta.get("uid", "")})
        cluster._store(CLAIMS, new, claim)


def release(cluster: Cluster) -> None:
    """The resourceclaim controller: a claim is no longer reserved for pods gone or finished,
    an unreserved claim is deallocated, and a claim made for a pod goes with it."""
    live = {
        p["metadata"].get("uid")
        for p in cluster.all(PODS)
        if p["status"].get("phase") not in ("Succeeded", "Failed")
    }
    for claim in cluster.all(CLAIMS):
        owners = [
            o for o in claim["metadata"].get("ownerReferences") or () if o.get("kind") == "Pod"
        ]
        if owners and owners[0].get("uid") not in live:
            cluster._remove(CLAIMS, claim)
            continue
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        kept = [r for r in reserved if r.get("uid") in live]
        if kept == reserved:
            continue
        new = copy.deepcopy(claim)
        new["status"]["reservedFor"] = kept
        if not kept:
            new["status"].pop("reservedFor", None)
            new["status"].pop("allocation", None)
        cluster._store(CLAIMS, new, claim)


# ---------------------------------------------------------------- a generated fleet's DRA
def generate(cluster: Cluster, nodes: list[str], claims: int) -> None:
    """For a generated fleet (``--nodes``): the driver's classes, one ResourceSlice per node
    (even nodes: eight whole H100s; odd nodes: eight A100s with MIG set up beforehand, two
    3g.40gb devices each, ``parentUUID``) and ``claims`` claims in the bench namespaces, one
    device each, ten to a node: allocated while the node has a device left, pending after.
    Written straight into the store, as the generated nodes are."""
    stamp = now()
    for item in device_classes():
        item["metadata"].update({"uid": f"class-{item['metadata']['name']}"})
        _put(cluster, CLASSES, "", item, stamp)
    published: list[list[str]] = []
    for index, node in enumerate(nodes):
        item = _generated_slice(node, index)
        published.append([d["name"] for d in item["spec"]["devices"]])
        _put(cluster, SLICES, "", item, stamp)
    per_node = max(1, -(-claims // max(1, len(nodes))))
    for number in range(claims):
        node_index, slot = divmod(number, per_node)
        node_index %= max(1, len(nodes))
        devices = published[node_index] if nodes else []
        mig = node_index % 2 == 1
        namespace, name = f"bench-{number % 20:02d}", f"claim-{number:06d}"
        item = {
            "apiVersion": API,
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": f"claim-{number}"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "mig.nvidia.com" if mig else "gpu.nvidia.com",
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ]
                }
            },
            "status": {},
        }
        if slot < len(devices):
            node = nodes[node_index]
            result = {"request": "gpu", "driver": DRIVER, "pool": node, "device": devices[slot]}
            item["status"] = {
                "allocation": allocation([result], node),
                "reservedFor": [{"resource": "pods", "name": f"job-{number:06d}", "uid": ""}],
            }
        _put(cluster, CLAIMS, namespace, item, stamp)


def _put(cluster: Cluster, resource: Resource, namespace: str, item: Obj, stamp: str) -> None:
    item["metadata"].update({"creationTimestamp": stamp, "resourceVersion": cluster.next_rv()})
    cluster.table(resource).put((namespace, item["metadata"]["name"]), item)


def _generated_slice(node: str, index: int) -> Obj:
    mig = index % 2 == 1
    product = "NVIDIA A100-SXM4-80GB" if mig else "NVIDIA H100 80GB HBM3"
    common = {
        "productName": product,
        "brand": "Nvidia",
        "architecture": "Ampere" if mig else "Hopper",
        "cudaComputeCapability": ("version", "8.0.0" if mig else "9.0.0"),
        "driverVersion": ("version", DRIVER_VERSION),
        "cudaDriverVersion": ("version", "13.0.0"),
    }
    devices = []
    for minor in range(8):
        uuid = f"GPU-{node}-{minor}"
        if not mig:
            devices.append(
                {
                    "name": f"gpu-{minor}",
                    "attributes": typed(type="gpu", uuid=uuid, **common),
                    "capacity": amounts({"memory": "81559Mi"}),
                }
            )
            continue
        for start in (0, 4):
            devices.append(
                {
                    "name": f"gpu-{minor}-mig-3g40gb-9-{start}",
                    "attributes": typed(
                        type="mig",
                        uuid=f"MIG-{uuid}-{start}",
                        parentUUID=uuid,
                        profile="3g.40gb",
                        **common,
                    ),
                    "capacity": amounts({"multiprocessors": 42, "memory": "40192Mi"}),
                }
            )
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}", "uid": f"slice-{node}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
