"""The scale scenario (``bench/scale.py``) served by the demo cluster: the same platform the
benchmarks' databases hold, as Kubernetes and Kueue would list it, so that a poll reads the
scenario's own objects.

    python bench/scale_cluster.py [--small] [--port 6443]

It serves the scenario's GPU nodes (their pools' labels, GPU Feature Discovery's labels and
the capacity of their MIG layout), the teams' namespaces, one ResourceFlavor per pool, the
cohort tree, the ClusterQueues (with the status Kueue reports) and LocalQueues (these as the
portal renders them, carrying its managed-by label), the workloads (half admitted with their
flavor, half waiting in line, as Kueue leaves them) and the pods (each admitted workload's on
its flavor's nodes, the rest CPU pods). Everything is written straight into the store, and
nothing moves afterwards: the demo cluster's controllers are not started (the scenario is
already as Kueue and the scheduler would leave it; writes through the API are still served).
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale
import scale_db

from devcluster import DemoCluster, Served
from devcluster.cluster import Cluster
from devcluster.controllers import Controllers, Options
from devcluster.kueue import CQS, FLAVORS, LQS, WORKLOADS, find
from devcluster.scenario import A100, H100, NAMESPACES, NODES, PODS, gpu_node, pod
from devcluster.server import API, serve
from gpus.catalog import promised_resources

POOL_LABEL = "quartermaster.io/pool"
MANAGED = {"app.kubernetes.io/managed-by": "quartermaster"}
KUEUE = "kueue.x-k8s.io/v1beta2"
COHORTS = find("kueue.x-k8s.io", "v1beta2", "cohorts")
MODELS = {"A100-80GB": A100, "H100-80GB": H100}


def load(cluster: Cluster, s: scale.Scenario) -> None:
    """The scenario's objects, straight into ``cluster``'s store."""
    now = dt.datetime.now(dt.UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    _nodes(cluster, s, stamp)
    for name, team in s.namespaces.items():
        labels = {**MANAGED, "quartermaster.io/team": team}
        _put(cluster, NAMESPACES, "", {"metadata": {"name": name, "labels": labels}}, stamp)
    _queues(cluster, s, stamp)
    _workloads(cluster, s, now)
    _pods(cluster, s, stamp)


def _put(cluster: Cluster, resource: Any, namespace: str, obj: dict[str, Any], stamp: str) -> None:
    meta = obj["metadata"]
    meta.setdefault("creationTimestamp", stamp)
    meta.update({"uid": str(uuid.uuid4()), "resourceVersion": cluster.next_rv()})
    if namespace:
        meta["namespace"] = namespace
    cluster.table(resource).put((namespace, meta["name"]), obj)


def _nodes(cluster: Cluster, s: scale.Scenario, stamp: str) -> None:
    """Each pool's nodes from one template (a node as a kubelet and GPU Feature Discovery
    register it, on its pool's MIG layout and its capacity)."""
    templates = {}
    for p in s.pools:
        offer, _ = promised_resources(
            p.config, node="n", model=p.model, gpu_count=scale.GPUS_PER_NODE, custom={}
        )
        templates[p.name] = gpu_node(
            "template",
            MODELS[p.model],
            ip="10.0.0.1",
            config=p.config,
            state="success",
            resources=dict(offer or {}),
            pool=p.name,
        )
    for index, n in enumerate(s.nodes):
        node = copy.deepcopy(templates[n.pool])
        node["metadata"]["name"] = n.name
        node["metadata"]["labels"].update({"kubernetes.io/hostname": n.name, POOL_LABEL: n.pool})
        node["status"]["addresses"] = [
            {
                "type": "InternalIP",
                "address": f"10.{index // 65536}.{index // 256 % 256}.{index % 256}",
            },
            {"type": "Hostname", "address": n.name},
        ]
        _put(cluster, NODES, "", node, stamp)


def _queues(cluster: Cluster, s: scale.Scenario, stamp: str) -> None:
    """Flavors, the cohort tree, ClusterQueues with Kueue's status, LocalQueues."""
    for p in s.pools:
        flavor = {"metadata": {"name": p.name, "labels": dict(MANAGED)}}
        flavor["spec"] = {"nodeLabels": {POOL_LABEL: p.name}}
        _put(cluster, FLAVORS, "", flavor, stamp)
    for name, parent in s.cohorts.items():
        cohort = {"metadata": {"name": name, "labels": dict(MANAGED)}, "spec": {}}
        if parent:
            cohort["spec"]["parentName"] = parent
        _put(cluster, COHORTS, "", cohort, stamp)
    for q in s.cluster_queues:
        _put(cluster, CQS, "", _cluster_queue(s, q), stamp)
    for key, cq in s.local_queues.items():
        namespace, name = key.split("/")
        lq = {"metadata": {"name": name, "labels": dict(MANAGED)}, "spec": {"clusterQueue": cq}}
        _put(cluster, LQS, namespace, lq, stamp)


def _cluster_queue(s: scale.Scenario, q: scale.ClusterQueue) -> dict[str, Any]:
    """A ClusterQueue as the portal renders it, with the status Kueue reports of it (the
    same the bench databases hold: ``scale_db.cluster_queue_status``)."""
    never = "Never"
    return {
        "metadata": {"name": q.name, "labels": dict(MANAGED)},
        "spec": {
            "cohortName": q.cohort,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "fairSharing": {"weight": str(q.weight)},
            "preemption": {
                "withinClusterQueue": "LowerPriority" if q.preempts else never,
                "reclaimWithinCohort": "Any" if q.preempts else never,
                "borrowWithinCohort": {"policy": never},
            },
            "resourceGroups": [
                {
                    "coveredResources": [q.resource],
                    "flavors": [
                        {
                            "name": f,
                            "resources": [{"name": q.resource, "nominalQuota": str(q.nominal)}],
                        }
                        for f in q.flavors
                    ],
                }
            ],
        },
        "status": {
            **scale_db.cluster_queue_status(s, q),
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Ready",
                    "message": "Can admit new workloads",
                    "lastTransitionTime": "2026-11-01T00:00:00Z",
                }
            ],
        },
    }


def _condition(kind: str, status: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
        "observedGeneration": 1,
    }


def _workloads(cluster: Cluster, s: scale.Scenario, now: dt.datetime) -> None:
    """Admitted workloads with their admission (flavor, usage) and Kueue's two conditions;
    waiting ones with QuotaReserved false, in Kueue's words."""
    for w in s.workloads:
        namespace, name = w.key.split("/")
        created = (now - dt.timedelta(seconds=w.created)).strftime("%Y-%m-%dT%H:%M:%SZ")
        share = -(-w.amount // w.pods)
        container = {"name": "main", "image": "trainer:latest"}
        container["resources"] = {"requests": {w.resource: str(share)}}
        item: dict[str, Any] = {
            "metadata": {
                "name": name,
                "creationTimestamp": created,
                "generation": 1,
                "labels": {"kueue.x-k8s.io/queue-name": w.local_queue.split("/")[1]},
            },
            "spec": {
                "queueName": w.local_queue.split("/")[1],
                "active": True,
                "priority": w.priority,
                "podSets": [
                    {
                        "name": "main",
                        "count": w.pods,
                        "template": {"spec": {"containers": [container]}},
                    }
                ],
            },
        }
        if w.flavor:
            item["status"] = {
                "admission": {
                    "clusterQueue": w.cluster_queue,
                    "podSetAssignments": [
                        {
                            "name": "main",
                            "count": w.pods,
                            "flavors": {w.resource: w.flavor},
                            "resourceUsage": {w.resource: str(w.amount)},
                        }
                    ],
                },
                "conditions": [
                    _condition(
                        "QuotaReserved",
                        "True",
                        "QuotaReserved",
                        f"Quota reserved in ClusterQueue {w.cluster_queue}",
                        created,
                    ),
                    _condition("Admitted", "True", "Admitted", "The workload is admitted", created),
                ],
            }
        else:
            message = (
                f"couldn't assign flavors to pod set main: insufficient unused quota for "
                f"{w.resource} in flavor {s.cluster_queues[0].flavors[0]}, {w.amount} more needed"
            )
            item["status"] = {
                "conditions": [_condition("QuotaReserved", "False", "Pending", message, created)]
            }
        _put(cluster, WORKLOADS, namespace, item, created)


def _pods(cluster: Cluster, s: scale.Scenario, stamp: str) -> None:
    """Running pods on their nodes (an admitted workload's with its GPUs), as a kubelet
    reports them."""
    table = cluster.table(PODS)
    for p in s.pods():
        limits = {p.resource: str(p.amount)} if p.resource and p.amount else {}
        item = pod(p.name, p.namespace, limits=limits, node=p.node)
        if limits:
            item["spec"]["containers"][0]["resources"]["requests"] = dict(limits)
        item["metadata"].update(
            {
                "uid": str(uuid.uuid4()),
                "creationTimestamp": stamp,
                "resourceVersion": cluster.next_rv(),
            }
        )
        item["spec"].update({"schedulerName": "default-scheduler", "priority": 0})
        item["status"] = {
            "phase": "Running",
            "qosClass": "BestEffort",
            "startTime": stamp,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": stamp}],
        }
        table.put((p.namespace, p.name), item)


def start(size: scale.Size = scale.FULL, *, host: str = "127.0.0.1", port: int = 0) -> DemoCluster:
    """The demo cluster serving the scenario of ``size``, its controllers held."""
    cluster = Cluster()
    controllers = Controllers(cluster, Options())
    controllers.install()
    load(cluster, scale.build(size))
    api = API(cluster, controllers, served=Served())
    return DemoCluster(cluster, controllers, serve(api, host, port))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--small", action="store_true", help="the scenario at its smoke size")
    args = parser.parse_args()
    started = time.perf_counter()
    demo = start(scale.SMOKE if args.small else scale.FULL, host=args.host, port=args.port)
    print(f"loaded in {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)
    print(f"devcluster listening on {demo.url}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    demo.stop()


if __name__ == "__main__":
    main()
