"""What runs beside the demo API server: admission plugins, kube-scheduler, kubelets,
the quota and disruption controllers, the GPU Operator's MIG Manager and Kueue admission.

Each behaves like the real component as far as the portal can see it, with the messages
recorded from a real cluster (``tests/data/k8s-api-samples``).
"""

from __future__ import annotations

import copy
import datetime as dt
import random
import string
import threading
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from devcluster import dcgm, dra, gpu, jobs, kueue, kueuejob, limitranger, quantity, recorder
from devcluster.cluster import Cluster, Obj, now, now_micro
from devcluster.errors import APIError
from devcluster.resources import Resource, find
from devcluster.selectors import selector_matches, tolerates_taint

PODS = find("", "v1", "pods")
NODES = find("", "v1", "nodes")
EVENTS = find("", "v1", "events")
QUOTAS = find("", "v1", "resourcequotas")
LIMITS = find("", "v1", "limitranges")
PDBS = find("policy", "v1", "poddisruptionbudgets")
PRIORITY = find("scheduling.k8s.io", "v1", "priorityclasses")
WORKLOADS = find("kueue.x-k8s.io", "v1beta2", "workloads")
CQS = find("kueue.x-k8s.io", "v1beta2", "clusterqueues")
LQS = find("kueue.x-k8s.io", "v1beta2", "localqueues")

MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
FAIL_LABEL = "devcluster.quartermaster.io/fail-mig"
TERMINAL = ("Succeeded", "Failed")


def pod_ip(namespace: str, name: str) -> str:
    """A stable address in the pod network for a pod."""
    digest = zlib.crc32(f"{namespace}/{name}".encode())
    return f"10.244.{(digest >> 8) % 250}.{digest % 250 + 2}"


def pod_requests(pod: Obj) -> Counter[str]:
    """Effective requests: sum of app containers, at least the largest init container."""
    total: Counter[str] = Counter()
    for container in pod["spec"].get("containers", []):
        for name, value in (container.get("resources", {}).get("requests") or {}).items():
            total[name] += quantity.parse(value)
    for container in pod["spec"].get("initContainers", []) or []:
        for name, value in (container.get("resources", {}).get("requests") or {}).items():
            total[name] = max(total[name], quantity.parse(value))
    return total


def is_active(pod: Obj) -> bool:
    return pod["status"].get("phase") not in TERMINAL


def tolerates(pod: Obj, taint: dict[str, Any]) -> bool:
    if taint.get("effect") == "PreferNoSchedule":
        return True
    return any(tolerates_taint(t, taint) for t in pod["spec"].get("tolerations") or [])


def node_matches(pod: Obj, node: Obj) -> bool:
    labels = node["metadata"].get("labels", {})
    for key, value in (pod["spec"].get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        terms = required.get("nodeSelectorTerms", [])
        if not any(
            selector_matches({"matchExpressions": t.get("matchExpressions", [])}, labels)
            for t in terms
        ):
            return False
    return True


@dataclass
class MigChange:
    node: str
    config: str
    due: float


@dataclass
class Options:
    scheduler_interval: float = 1.0
    retry_seconds: float = 10.0  # how often an unschedulable pod is tried again
    kubelet_start_seconds: float = 0.3
    kubelet_stop_seconds: float = 1.0
    mig_delay_seconds: float = 3.0
    tick: float = 0.2
    write_delay_seconds: float = 0.0  # slow every write down (tests of crashes mid-apply)
    # Kueue's waitForPodsReady: an admitted workload whose pods are not all ready by then is
    # evicted and requeued (30 min as on the recorded cluster; Kueue's config default is 5).
    pods_ready_timeout_seconds: float = 1800.0
    requeue_backoff_seconds: float = 10.0  # the first requeue's backoff, doubling after
    fair_sharing: bool = False  # Kueue's Configuration ``fairSharing: {enable: true}``


@dataclass
class Controllers:
    cluster: Cluster
    options: Options = field(default_factory=Options)
    pending_mig: dict[str, MigChange] = field(default_factory=dict)
    node_layouts: dict[str, list[dict[str, int]]] = field(default_factory=dict)
    # namespace -> Jobs a user submits once the namespace has its ResourceQuota (the demo's
    # story: the portal applies the quota, then someone submits too much).
    after_quota: dict[str, list[Obj]] = field(default_factory=dict)
    # node -> GPU index -> the last Xid that GPU reported (the DCGM exporter shows it).
    gpu_xids: dict[str, dict[int, int]] = field(default_factory=dict)
    # The ``app`` labels of pods that hold their GPUs without using them (DCGM reports 0 %).
    idle_apps: set[str] = field(default_factory=set)
    last_attempt: dict[tuple[str, str], float] = field(default_factory=dict)
    last_message: dict[tuple[str, str], tuple[str, str, int]] = field(default_factory=dict)
    bound_at: dict[tuple[str, str], float] = field(default_factory=dict)
    stop_at: dict[tuple[str, str], float] = field(default_factory=dict)
    dirty: bool = True
    kueue_dirty: bool = True
    ticks: int = 0  # passes run so far
    quiet_tick: int = -1  # the last pass that found nothing written since the one before
    last_schedule: float = 0.0
    last_kueue: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _submit_after_quota(self) -> None:
        for namespace in list(self.after_quota):
            if any(q["metadata"]["namespace"] == namespace for q in self.cluster.all(QUOTAS)):
                for job in self.after_quota.pop(namespace):
                    self.cluster.create(jobs.JOBS, namespace, job, manager="kubectl")  # type: ignore[arg-type]

    def dcgm_metrics(self, node_name: str) -> str:
        """What the DCGM exporter on this node answers on /metrics."""
        node = self.cluster.require(NODES, "", node_name)
        labels = node["metadata"].get("labels") or {}
        layout = self.node_layouts.get(node_name) or [
            {} for _ in range(int(labels.get("nvidia.com/gpu.count", "0") or 0))
        ]
        pods, idle = [], set()
        for pod in self.cluster.all(PODS):
            if pod["spec"].get("nodeName") != node_name:
                continue
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            wants = {k: int(v) for k, v in pod_requests(pod).items() if k.startswith("nvidia.com/")}
            if wants:
                container = pod["spec"]["containers"][0]["name"]
                meta = pod["metadata"]
                pods.append((meta["namespace"], meta["name"], container, wants))
                if (meta.get("labels") or {}).get("app") in self.idle_apps:
                    idle.add((meta["namespace"], meta["name"]))
        return dcgm.exposition(
            node=node_name,
            product=labels.get("nvidia.com/gpu.product", ""),
            memory_mib=int(labels.get("nvidia.com/gpu.memory", "81920") or 81920),
            layout=layout,
            pods=sorted(pods),
            xids=self.gpu_xids.get(node_name, {}),
            minute=int(time.time() // 60),
            idle=frozenset(idle),
        )

    def install(self) -> None:
        self.cluster.admission.append(jobs.default_job)
        self.cluster.admission.append(kueuejob.webhook_create)
        self.cluster.admission.append(kueue.webhook_create)
        self.cluster.update_admission.append(kueuejob.webhook_update)
        self.cluster.admission.append(self.admit_pod)
        self.cluster.watchers.append(self.watch_nodes)
        self.cluster.watchers.append(self._mark_dirty)

    def _mark_dirty(self, resource: Resource, old: Obj | None, new: Obj | None) -> None:
        if resource.kind in (
            "Pod",
            "Node",
            "ResourceQuota",
            "PodDisruptionBudget",
            "LimitRange",
            "Job",
        ):
            self.dirty = True
        if resource.kind in (
            "Workload",
            "ClusterQueue",
            "LocalQueue",
            "Cohort",
            "ResourceFlavor",
            "Namespace",
            "LimitRange",
            "Job",
            "Pod",
        ):
            self.kueue_dirty = True

    # ------------------------------------------------------------ admission (pod create)

    def admit_pod(self, resource: Resource, pod: Obj) -> None:
        if resource.kind != "Pod":
            return
        spec = pod.setdefault("spec", {})
        namespace = pod["metadata"]["namespace"]
        # API defaulting (before any admission plugin): unset requests take the limits, so a
        # LimitRange's defaultRequest only fills resources the pod did not set at all.
        for container in spec.get("containers", []):
            resources = container.get("resources") or {}
            if resources.get("limits"):
                requests = resources.setdefault("requests", {})
                for name, value in resources["limits"].items():
                    requests.setdefault(name, value)
        self._apply_limit_ranges(namespace, pod)
        for container in spec.get("containers", []):
            resources = container.setdefault("resources", {})
            limits = resources.get("limits") or {}
            requests = resources.setdefault("requests", {}) if limits else resources.get("requests")
            if limits:
                for name, value in limits.items():
                    requests.setdefault(name, value)
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("imagePullPolicy", "IfNotPresent")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("securityContext", {})
        spec.setdefault("schedulerName", "default-scheduler")
        tolerations = spec.setdefault("tolerations", [])
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if not any(t.get("key") == key for t in tolerations):
                tolerations.append(
                    {
                        "key": key,
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    }
                )
        priority, policy = 0, "PreemptLowerPriority"
        name = spec.get("priorityClassName")
        classes = {pc["metadata"]["name"]: pc for pc in self.cluster.all(PRIORITY)}
        if name:
            if name not in classes:
                raise APIError(
                    403,
                    f'pods "{pod["metadata"].get("name", "")}" is forbidden: '
                    f"no PriorityClass with name {name} was found",
                    details={"name": pod["metadata"].get("name", ""), "kind": "pods"},
                )
            priority = classes[name]["value"]
            policy = classes[name].get("preemptionPolicy", policy)
        else:
            default = next((pc for pc in classes.values() if pc.get("globalDefault")), None)
            if default:
                priority, policy = default["value"], default.get("preemptionPolicy", policy)
                spec["priorityClassName"] = default["metadata"]["name"]
        spec["priority"] = priority
        spec.setdefault("enableServiceLinks", True)
        spec["preemptionPolicy"] = policy
        pod["status"] = {"phase": "Pending", "qosClass": self._qos(pod)}
        self._admit_quota(pod)

    def _apply_limit_ranges(self, namespace: str, pod: Obj) -> None:
        limitranger.admit(
            pod,
            [lr for lr in self.cluster.all(LIMITS) if lr["metadata"]["namespace"] == namespace],
        )

    @staticmethod
    def _qos(pod: Obj) -> str:
        containers = pod["spec"].get("containers", [])
        cpu_mem = [
            (
                c.get("resources", {}).get("requests") or {},
                c.get("resources", {}).get("limits") or {},
            )
            for c in containers
        ]
        if not any(k in r or k in lim for r, lim in cpu_mem for k in ("cpu", "memory")):
            return "BestEffort"
        if all(
            all(k in lim and r.get(k, lim[k]) == lim[k] for k in ("cpu", "memory"))
            for r, lim in cpu_mem
        ):
            return "Guaranteed"
        return "Burstable"

    def quota_usage(self, namespace: str) -> Counter[str]:
        used: Counter[str] = Counter()
        for pod in self.cluster.all(PODS):
            if pod["metadata"]["namespace"] == namespace and is_active(pod):
                used += self._quota_items(pod)
        return used

    @staticmethod
    def _quota_items(pod: Obj) -> Counter[str]:
        items: Counter[str] = Counter({"pods": 1, "count/pods": 1})
        for name, value in pod_requests(pod).items():
            items[f"requests.{name}"] += value
            if name in ("cpu", "memory", "ephemeral-storage"):
                items[name] += value
        for container in pod["spec"].get("containers", []):
            for name, value in (container.get("resources", {}).get("limits") or {}).items():
                if name in ("cpu", "memory", "ephemeral-storage"):
                    items[f"limits.{name}"] += quantity.parse(value)
        return items

    def _admit_quota(self, pod: Obj) -> None:
        namespace = pod["metadata"]["namespace"]
        quotas = [q for q in self.cluster.all(QUOTAS) if q["metadata"]["namespace"] == namespace]
        if not quotas:
            return
        requested = self._quota_items(pod)
        used = self.quota_usage(namespace)
        for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
            hard = quota.get("spec", {}).get("hard", {})
            over = sorted(
                k
                for k in hard
                if k in requested
                and requested[k]
                and used[k] + requested[k] > quantity.parse(hard[k])
            )
            if over:
                name = pod["metadata"].get("name", "")
                fmt = quantity.fmt

                def pairs(values: dict[str, Any], keys: list[str] = over) -> str:
                    return ",".join(f"{k}={values[k]}" for k in keys)

                raise APIError(
                    403,
                    f'pods "{name}" is forbidden: exceeded quota: {quota["metadata"]["name"]}, '
                    f"requested: {pairs({k: fmt(requested[k]) for k in over})}, "
                    f"used: {pairs({k: fmt(used[k]) for k in over})}, "
                    f"limited: {pairs({k: hard[k] for k in over})}",
                    details={"name": name, "kind": "pods"},
                )

    # ------------------------------------------------------------ eviction

    def evict(self, namespace: str, name: str) -> None:
        cluster = self.cluster
        with cluster.lock:
            pod = cluster.require(PODS, namespace, name)
            phase = pod["status"].get("phase")
            if phase == "Running" and "deletionTimestamp" not in pod["metadata"]:
                for pdb in cluster.all(PDBS):
                    if pdb["metadata"]["namespace"] != namespace or not selector_matches(
                        pdb["spec"].get("selector"), pod["metadata"].get("labels", {})
                    ):
                        continue
                    status = self._pdb_status(pdb)
                    if status["disruptionsAllowed"] < 1:
                        raise APIError(
                            429,
                            "Cannot evict pod as it would violate the pod's disruption budget.",
                            details={
                                "causes": [
                                    {
                                        "reason": "DisruptionBudget",
                                        "message": f"The disruption budget {pdb['metadata']['name']} needs "
                                        f"{status['desiredHealthy']} healthy pods and has "
                                        f"{status['currentHealthy']} currently",
                                    }
                                ]
                            },
                        )
            cluster.mark_terminating(pod, None, reason="EvictionByEvictionAPI")

    def _pdb_status(self, pdb: Obj) -> dict[str, int]:
        namespace = pdb["metadata"]["namespace"]
        pods = [
            p
            for p in self.cluster.all(PODS)
            if p["metadata"]["namespace"] == namespace
            and selector_matches(pdb["spec"].get("selector"), p["metadata"].get("labels", {}))
            and is_active(p)
        ]
        healthy = sum(
            1
            for p in pods
            if p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"]
        )
        spec = pdb["spec"]
        if "minAvailable" in spec:
            desired = _int_or_percent(spec["minAvailable"], len(pods))
        else:
            desired = len(pods) - _int_or_percent(spec.get("maxUnavailable", 0), len(pods))
        return {
            "disruptionsAllowed": max(0, healthy - desired),
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": len(pods),
        }

    # ------------------------------------------------------------ MIG Manager

    def watch_nodes(self, resource: Resource, old: Obj | None, new: Obj | None) -> None:
        """React to the node label nvidia.com/mig.config like the GPU Operator's MIG Manager."""
        if resource.kind != "Node" or new is None:
            return
        labels = new["metadata"].get("labels", {})
        wanted = labels.get(MIG_CONFIG)
        before = (old or {}).get("metadata", {}).get("labels", {}).get(MIG_CONFIG)
        name = new["metadata"]["name"]
        if old is None or wanted is None or wanted == before:
            return
        # Re-writing the same value does nothing; a new value starts a reconfiguration.
        self.pending_mig[name] = MigChange(
            name, wanted, time.monotonic() + self.options.mig_delay_seconds
        )

    def _run_mig(self) -> None:
        cluster = self.cluster
        for name, change in list(self.pending_mig.items()):
            with cluster.lock:
                node = cluster.get(NODES, "", name)
                if node is None:
                    self.pending_mig.pop(name, None)
                    continue
                labels = node["metadata"].get("labels", {})
                if labels.get(MIG_STATE) != "pending" and change.due > time.monotonic():
                    # The MIG Manager has seen the change: state pending, GPU plugins down.
                    new = copy.deepcopy(node)
                    new["metadata"]["labels"][MIG_STATE] = "pending"
                    for section in ("capacity", "allocatable"):
                        for key in list(new["status"].get(section, {})):
                            if key.startswith("nvidia.com/"):
                                new["status"][section][key] = "0"
                    cluster._store(NODES, new, node)
                    continue
                if change.due > time.monotonic():
                    continue
                self.pending_mig.pop(name)
                self._finish_mig(node, change.config)

    def _finish_mig(self, node: Obj, config: str) -> None:
        cluster = self.cluster
        labels = node["metadata"].get("labels", {})
        name = node["metadata"]["name"]
        product = labels.get("nvidia.com/gpu.product", "")
        count = int(labels.get("nvidia.com/gpu.count", "0") or 0)
        busy = any(
            p["spec"].get("nodeName") == name
            and is_active(p)
            and any(k.startswith("nvidia.com/") for k in pod_requests(p))
            for p in cluster.all(PODS)
        )
        current = self.node_layouts.get(name)
        if labels.get(FAIL_LABEL) == "true" or busy:
            layout = gpu.Layout(
                gpu._count(current or []), False, "GPU in use" if busy else "forced failure"
            )
            if busy and current is not None:
                layout = gpu.Layout(gpu._count(current), False, "GPU in use")
        else:
            layout = gpu.apply_config(product, count, config, current)
        if layout.per_gpu is not None:
            self.node_layouts[name] = layout.per_gpu
        new = copy.deepcopy(node)
        new_labels = {
            k: v
            for k, v in new["metadata"]["labels"].items()
            if not (k.startswith("nvidia.com/mig-") and "." in k.removeprefix("nvidia.com/mig-"))
        }
        new_labels[MIG_STATE] = "success" if layout.success else "failed"
        resources = {k: v for k, v in layout.resources.items() if v}
        new_labels.update(gpu.node_gpu_labels(product, count, resources))
        new["metadata"]["labels"] = new_labels
        for section in ("capacity", "allocatable"):
            values = new["status"].setdefault(section, {})
            for key in list(values):
                if key.startswith("nvidia.com/"):
                    values[key] = "0"  # old MIG resource names linger at 0
            for key, amount in resources.items():
                values[key] = str(amount)
        cluster._store(NODES, new, node)

    # ------------------------------------------------------------ scheduler and kubelet

    def _node_free(self) -> tuple[dict[str, Obj], dict[str, Counter[str]]]:
        nodes = {n["metadata"]["name"]: n for n in self.cluster.all(NODES)}
        used: dict[str, Counter[str]] = defaultdict(Counter)
        for pod in self.cluster.all(PODS):
            node_name = pod["spec"].get("nodeName")
            if node_name and is_active(pod):
                used[node_name] += pod_requests(pod)
        return nodes, used

    def _schedule(self) -> None:
        cluster = self.cluster
        with cluster.lock:
            pending = [
                p
                for p in cluster.all(PODS)
                if not p["spec"].get("nodeName")
                and p["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
                and p["status"].get("phase") == "Pending"
                and "deletionTimestamp" not in p["metadata"]
            ]
            if not pending:
                return
            nodes, used = self._node_free()
            claimed = any(p["spec"].get("resourceClaims") for p in pending)
            view = dra.allocator(cluster) if claimed else None
            pending.sort(
                key=lambda p: (-p["spec"].get("priority", 0), p["metadata"]["creationTimestamp"])
            )
            clock = time.monotonic()
            for pod in pending:
                key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
                if clock - self.last_attempt.get(key, -1e9) < self.options.retry_seconds:
                    continue
                self.last_attempt[key] = clock
                request = pod_requests(pod)
                reasons: Counter[str] = Counter()
                preempt: Counter[str] = Counter()
                chosen = placed = None
                claims = dra.pod_claims(cluster, pod) if view is not None else None
                if pod["spec"].get("resourceClaims") and (view is None or claims is None):
                    continue  # a claim it names is not there yet
                if view is not None and claims and self._unknown_class(pod, view, claims, nodes):
                    continue
                for node_name in sorted(nodes):
                    node = nodes[node_name]
                    reason = self._filter(pod, node, request, used[node_name])
                    if reason is None and view is not None and claims:
                        placed = dra.place(view, claims, node_name)
                        reason = None if placed is not None else ["cannot allocate all claims"]
                    if reason is None:
                        chosen = node_name
                        break
                    for r in reason:
                        reasons[r] += 1
                    preempt[self._preemption_reason(pod, node, request, reason)] += 1
                if chosen is not None:
                    if placed and view is not None:
                        dra.reserve(cluster, view, pod, placed, chosen)
                    self._bind(pod, chosen)
                    used[chosen] += request
                    self.last_attempt.pop(key, None)
                    continue
                self._unschedulable(pod, len(nodes), reasons, preempt)

    def _filter(
        self, pod: Obj, node: Obj, request: Counter[str], used: Counter[str]
    ) -> list[str] | None:
        if node["spec"].get("unschedulable"):
            return ["node(s) were unschedulable"]
        taints = [
            t
            for t in node["spec"].get("taints", []) or []
            if t.get("effect") in ("NoSchedule", "NoExecute")
        ]
        if any(not tolerates(pod, t) for t in taints):
            return ["node(s) had untolerated taint(s)"]
        if not node_matches(pod, node):
            return ["node(s) didn't match Pod's node affinity/selector"]
        allocatable = node["status"].get("allocatable", {})
        short = []
        for name, amount in sorted(request.items()):
            if amount and quantity.parse(allocatable.get(name, "0")) - used[name] < amount:
                short.append(f"Insufficient {name}")
        return short or None

    def _preemption_reason(
        self, pod: Obj, node: Obj, request: Counter[str], reason: list[str]
    ) -> str:
        if not all(r.startswith("Insufficient") for r in reason):
            return "Preemption is not helpful for scheduling"
        allocatable = node["status"].get("allocatable", {})
        if any(quantity.parse(allocatable.get(n, "0")) < a for n, a in request.items() if a):
            return "Preemption is not helpful for scheduling"
        return "No preemption victims found for incoming pod"

    def _bind(self, pod: Obj, node_name: str) -> None:
        new = copy.deepcopy(pod)
        new["spec"]["nodeName"] = node_name
        conditions = [c for c in new["status"].get("conditions", []) if c["type"] != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now(),
            }
        )
        new["status"]["conditions"] = conditions
        self.bound_at[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = time.monotonic()
        self.cluster._store(PODS, new, pod)
        self._event(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {node_name}",
        )

    def _unknown_class(
        self, pod: Obj, view: dra.Allocator, claims: list[Obj], nodes: dict[str, Obj]
    ) -> bool:
        """A claim for a class that does not exist fails the pod before any node is tried,
        in the scheduler's words (tests/data/dra/waiting.json)."""
        unknown = next((u for c in claims if (u := view.unknown_class(c))), None)
        if unknown is None:
            return False
        not_helpful = Counter({"Preemption is not helpful for scheduling": len(nodes)})
        head = f"request {unknown[0]}: device class {unknown[1]} does not exist"
        self._unschedulable(pod, len(nodes), Counter(), not_helpful, head=head)
        return True

    def _unschedulable(
        self,
        pod: Obj,
        total: int,
        reasons: Counter[str],
        preempt: Counter[str],
        *,
        head: str = "",
    ) -> None:
        def join(counter: Counter[str]) -> str:
            return ", ".join(sorted(f"{count} {reason}" for reason, count in counter.items()))

        # the DRA plugin's words when it is the one that could not place the pod
        then = (
            "still not schedulable"
            if "cannot allocate all claims" in reasons
            else ("no new claims to deallocate")
        )
        message = (
            f"0/{total} nodes are available: {head or join(reasons)}. {then}, "
            f"preemption: 0/{total} nodes are available: {join(preempt)}."
        )
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        previous = self.last_message.get(key)
        if previous is not None and previous[0] == message:
            # As kube-scheduler's event recorder: the 2nd failure makes a new Event, later
            # ones add a series to that second Event.
            _, name, attempts = previous
            if attempts == 1:
                name = self._event(pod, "Warning", "FailedScheduling", message)
            else:
                event = self.cluster.get(EVENTS, key[0], name)
                if event is not None:
                    new_event = copy.deepcopy(event)
                    new_event["series"] = {"count": attempts, "lastObservedTime": now_micro()}
                    self.cluster._store(EVENTS, new_event, event)
            self.last_message[key] = (message, name, attempts + 1)
        else:
            first = self._event(pod, "Warning", "FailedScheduling", message)
            self.last_message[key] = (message, first, 1)
        current = next(
            (c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), None
        )
        if current is None or current.get("message") != message:
            new = copy.deepcopy(pod)
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "observedGeneration": pod["metadata"].get("generation", 1),
                "lastProbeTime": None,
                "lastTransitionTime": current["lastTransitionTime"]
                if current and current.get("status") == "False"
                else now(),
                "reason": "Unschedulable",
                "message": message,
            }
            new["status"]["conditions"] = [
                c for c in new["status"].get("conditions", []) if c["type"] != "PodScheduled"
            ] + [condition]
            self.cluster._store(PODS, new, pod)

    def _event(self, obj: Obj, type_: str, reason: str, message: str) -> str:
        """The scheduler's event about a pod (the events.k8s.io recorder's shape)."""
        return recorder.record(
            self.cluster,
            obj,
            kind="Pod",
            api_version="v1",
            type_=type_,
            reason=reason,
            message=message,
            component="default-scheduler",
            action="Scheduling" if reason == "FailedScheduling" else "Binding",
        )

    def _kubelet(self) -> None:
        """Start bound pods (Running, Ready) and finish terminating ones."""
        cluster = self.cluster
        clock = time.monotonic()
        with cluster.lock:
            for pod in cluster.all(PODS):
                meta = pod["metadata"]
                key = (meta["namespace"], meta["name"])
                if "deletionTimestamp" in meta:
                    if meta.get("finalizers") and pod["status"].get("phase") == "Failed":
                        continue  # stopped; the API server keeps it until they are gone
                    stop_at = self.stop_at.setdefault(
                        key, clock + self.options.kubelet_stop_seconds
                    )
                    if clock >= stop_at:
                        self.stop_at.pop(key, None)
                        self.bound_at.pop(key, None)
                        if meta.get("finalizers"):  # stopped: Failed, kept for its owner
                            stopped = copy.deepcopy(pod)
                            stopped["status"]["phase"] = "Failed"
                            cluster._store(PODS, stopped, pod)
                        else:
                            cluster._remove(PODS, pod)
                    continue
                if (
                    pod["spec"].get("nodeName")
                    and pod["status"].get("phase") == "Pending"
                    and clock - self.bound_at.get(key, 0) >= self.options.kubelet_start_seconds
                ):
                    self.bound_at.pop(key, None)
                    new = copy.deepcopy(pod)
                    new["status"]["phase"] = "Running"
                    new["status"]["startTime"] = now()
                    ip = pod_ip(pod["metadata"]["namespace"], pod["metadata"]["name"])
                    new["status"]["podIP"], new["status"]["podIPs"] = ip, [{"ip": ip}]
                    new["status"]["conditions"] = [
                        c
                        for c in new["status"].get("conditions", [])
                        if c["type"] not in ("Ready", "ContainersReady", "Initialized")
                    ] + [
                        {
                            "type": t,
                            "status": "True",
                            "lastProbeTime": None,
                            "lastTransitionTime": now(),
                        }
                        for t in ("Initialized", "Ready", "ContainersReady")
                    ]
                    cluster._store(PODS, new, pod)

    # ------------------------------------------------------------ quota and PDB status

    def _quota_status(self) -> None:
        cluster = self.cluster
        with cluster.lock:
            quotas = cluster.all(QUOTAS)
            if not quotas:
                return
            usage: dict[str, Counter[str]] = defaultdict(Counter)
            namespaces = {q["metadata"]["namespace"] for q in quotas}
            for pod in cluster.all(PODS):
                if pod["metadata"]["namespace"] in namespaces and is_active(pod):
                    usage[pod["metadata"]["namespace"]] += self._quota_items(pod)
            for quota in quotas:
                hard = quota.get("spec", {}).get("hard", {})
                used = usage[quota["metadata"]["namespace"]]
                tracked = {k for k in hard if not _untracked(k)}
                status = {"hard": dict(hard)}
                if tracked:
                    status["used"] = {k: quantity.fmt(Fraction(used[k])) for k in sorted(tracked)}
                if quota.get("status") != status:
                    new = copy.deepcopy(quota)
                    new["status"] = status
                    cluster._store(QUOTAS, new, quota)

    def _pdb_statuses(self) -> None:
        cluster = self.cluster
        with cluster.lock:
            for pdb in cluster.all(PDBS):
                computed = self._pdb_status(pdb)
                status = {
                    "observedGeneration": pdb["metadata"].get("generation", 1),
                    **computed,
                    "conditions": [
                        {
                            "type": "DisruptionAllowed",
                            "status": "True" if computed["disruptionsAllowed"] else "False",
                            "reason": "SufficientPods"
                            if computed["disruptionsAllowed"]
                            else "InsufficientPods",
                            "message": "",
                            "observedGeneration": pdb["metadata"].get("generation", 1),
                            "lastTransitionTime": (pdb.get("status", {}).get("conditions") or [{}])[
                                0
                            ].get("lastTransitionTime", now()),
                        }
                    ],
                }
                if pdb.get("status") != status:
                    new = copy.deepcopy(pdb)
                    new["status"] = status
                    cluster._store(PDBS, new, pdb)

    # ------------------------------------------------------------ loop

    def tick(self) -> None:
        """One pass of every controller; idle passes cost next to nothing."""
        if not (self.pending_mig or self.dirty or self.kueue_dirty):
            self.quiet_tick = self.ticks
        self.ticks += 1
        if self.pending_mig:
            self._run_mig()
        clock = time.monotonic()
        dirty, self.dirty = self.dirty, False
        if dirty or self.bound_at or self.stop_at:
            self._kubelet()
        if dirty or clock - self.last_schedule >= self.options.retry_seconds:
            self.last_schedule = clock
            with self.cluster.lock:
                self._submit_after_quota()
                jobs.reconcile(self.cluster)
            self._schedule()
        if dirty:
            self._quota_status()
            self._pdb_statuses()
            with self.cluster.lock:
                dra.release(self.cluster)
        if self.kueue_dirty or clock - self.last_kueue >= self.options.retry_seconds:
            self.kueue_dirty = False
            self.last_kueue = clock
            with self.cluster.lock:
                self._kueue()

    def _kueue(self) -> None:
        """Kueue: its Job integration (workloads, PodsReady, evictions), then admission."""
        options = self.options
        kueuejob.reconcile(
            self.cluster,
            timeout=options.pods_ready_timeout_seconds,
            backoff=options.requeue_backoff_seconds,
        )
        kueue.reconcile(self.cluster, fair_sharing=options.fair_sharing)

    def start(self) -> threading.Thread:
        def loop() -> None:
            while not self._stop.wait(self.options.tick):
                try:
                    self.tick()
                except Exception:
                    import traceback

                    traceback.print_exc()

        thread = threading.Thread(target=loop, name="devcluster-controllers", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


def _untracked(key: str) -> bool:
    """Quota keys the quota controller never computes (limits.<ext>, bare <ext>)."""
    bare = key.removeprefix("limits.")
    return "/" in bare and not key.startswith("requests.") and not bare.startswith("count/")


def _int_or_percent(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return -(-int(value[:-1]) * total // 100)
    return int(value)


def random_suffix(length: int = 5) -> str:
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=length))


__all__ = ["Controllers", "Options", "dt"]
