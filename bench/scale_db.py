"""The scale scenario (``bench/scale.py``) written into a fresh database as a poll and the
platform team would leave it: the fleet's observed nodes (each with what its pods hold) and
their node pools, the teams with their namespaces and quota, one ResourceFlavor per pool, the
cohort tree, ClusterQueues (with the status Kueue reports: usage, borrowing, counts) and
LocalQueues, the workloads (waiting ones with their places in line) and the pods.
``bench/pages.py --scale`` serves the pages over it.

Rows are bulk-written, as the other benches' fills are: the scenario is one the services
would refuse nothing of, and going through them would measure the fill, not the pages."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from scale import GPU, Scenario

POOL_LABEL = "quartermaster.io/pool"
PRODUCTS = {"H100-80GB": "NVIDIA-H100-80GB-HBM3", "A100-80GB": "NVIDIA-A100-SXM4-80GB"}
BATCH = 5000


def write(s: Scenario) -> None:
    """The scenario's rows, on the settings' cluster (the database is flushed first)."""
    from django.core.management import call_command
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    now = timezone.now()
    _fleet(s, now)
    _teams(s)
    _queues(s, now)
    _workloads(s, now)


def _fleet(s: Scenario, now: dt.datetime) -> None:
    """Nodes (allocated: what the admitted workloads' pods hold on each) and pools; the pods."""
    from cluster.models import ObservedNode, ObservedPod
    from fleet.models import NodePool

    pools = {p.name: p for p in s.pools}
    held: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    pods: list[ObservedPod] = []
    for pod in s.pods():
        if len(pods) == BATCH:  # written as they come: 150,000 rows are not held at once
            ObservedPod.objects.bulk_create(pods)
            pods = []
        if pod.resource:
            held[pod.node][pod.resource] += pod.amount
        pods.append(
            ObservedPod(
                namespace=pod.namespace,
                name=pod.name,
                node_name=pod.node,
                phase="Running",
                gpu_requests={pod.resource: pod.amount} if pod.resource else {},
                workload_name=pod.name.rsplit("-", 1)[0] if pod.resource else "",
                created_at=now,
                started_at=now,
                last_changed=now,
            )
        )
    nodes = []
    for node in s.nodes:
        pool = pools[node.pool]
        offer = {pool.resource: pool.per_node}
        allocatable = {"cpu": "126", "memory": "1031689Mi", "pods": "110", **offer}
        labels = {
            "kubernetes.io/hostname": node.name,
            "nvidia.com/gpu.product": PRODUCTS[node.model],
            "nvidia.com/mig.config": node.config,
            POOL_LABEL: node.pool,
        }
        nodes.append(
            ObservedNode(
                name=node.name,
                uid=f"uid-{node.name}",
                gpu_product=PRODUCTS[node.model],
                gpu_count=8,
                mig_capable=True,
                mig_strategy="mixed",
                mig_config=node.config,
                mig_config_state="success",
                pool_label=node.pool,
                capacity=allocatable,
                allocatable=allocatable,
                allocated={pool.resource: held[node.name].get(pool.resource, 0)},
                labels=labels,
                taints=[{"key": GPU, "effect": "NoSchedule"}],
                ready=True,
                first_seen=now,
                last_changed=now,
            )
        )
    ObservedNode.objects.bulk_create(nodes, batch_size=BATCH)
    ObservedPod.objects.bulk_create(pods, batch_size=BATCH)
    NodePool.objects.bulk_create(
        NodePool(name=p.name, node_selector={POOL_LABEL: p.name}, mig_config=p.config)
        for p in s.pools
    )


def _teams(s: Scenario) -> None:
    """Teams (every priority class allowed) and their namespaces, each with GPU quota."""
    from tenants.models import Namespace, PriorityClass, QuotaItem, Team

    classes = [
        PriorityClass.objects.create(name=name, value=value)
        for name, value in (("train-low", 100), ("train", 1000), ("inference", 10000))
    ]
    teams = {t.slug: t for t in Team.objects.bulk_create(Team(slug=t, name=t) for t in s.teams)}
    through = Team.allowed_priority_classes.through
    through.objects.bulk_create(
        through(team_id=team.pk, priorityclass_id=pc.pk)
        for team in teams.values()
        for pc in classes
    )
    namespaces = Namespace.objects.bulk_create(
        Namespace(name=name, team=teams[team]) for name, team in s.namespaces.items()
    )
    QuotaItem.objects.bulk_create(
        QuotaItem(namespace=ns, resource=resource, hard=hard)
        for ns in namespaces
        for resource, hard in (("requests.nvidia.com/gpu", "64"), ("pods", "200"))
    )


def _queues(s: Scenario, now: dt.datetime) -> None:
    """A ResourceFlavor per pool, the cohort tree, the ClusterQueues with Kueue's status of
    them, and the LocalQueues."""
    from cluster.models import ObservedObject
    from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
    from tenants.models import Namespace

    ResourceFlavor.objects.bulk_create(
        ResourceFlavor(name=p.name, node_labels={POOL_LABEL: p.name}) for p in s.pools
    )
    cohorts: dict[str, Cohort] = {}
    for name, parent in sorted(s.cohorts.items(), key=lambda item: bool(item[1])):  # roots first
        cohorts[name] = Cohort.objects.create(name=name, parent=cohorts.get(parent))
    queues = ClusterQueue.objects.bulk_create(
        ClusterQueue(
            name=q.name,
            cohort=cohorts[q.cohort],
            fair_sharing_weight=str(q.weight),
            resource_groups=[
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
            preemption_within_cluster_queue="LowerPriority" if q.preempts else "Never",
            preemption_reclaim_within_cohort="Any" if q.preempts else "Never",
        )
        for q in s.cluster_queues
    )
    by_name = {q.name: q for q in queues}
    namespaces = {ns.name: ns for ns in Namespace.objects.all()}
    LocalQueue.objects.bulk_create(
        LocalQueue(
            name=lq.split("/")[1], namespace=namespaces[lq.split("/")[0]], cluster_queue=by_name[cq]
        )
        for lq, cq in s.local_queues.items()
    )
    ObservedObject.objects.bulk_create(
        (
            ObservedObject(
                api_version="kueue.x-k8s.io/v1beta2",
                kind="ClusterQueue",
                name=q.name,
                status=cluster_queue_status(s, q),
                last_seen=now,
            )
            for q in s.cluster_queues
        ),
        batch_size=BATCH,
    )


def cluster_queue_status(s: Scenario, q: Any) -> dict[str, Any]:
    """Kueue's status of a ClusterQueue: per flavor what its admitted workloads use and what
    of it is borrowed (above its nominal quota), its pending and admitted counts."""
    used: dict[str, int] = defaultdict(int)
    pending = admitted = 0
    for w in s.by_queue[q.name]:
        if w.flavor:
            used[w.flavor] += w.amount
            admitted += 1
        else:
            pending += 1
    usage = [
        {
            "name": f,
            "resources": [
                {
                    "name": q.resource,
                    "total": str(used[f]),
                    "borrowed": str(max(0, used[f] - q.nominal)),
                }
            ],
        }
        for f in q.flavors
    ]
    return {
        "flavorsUsage": usage,
        "flavorsReservation": usage,
        "pendingWorkloads": pending,
        "reservingWorkloads": admitted,
        "admittedWorkloads": admitted,
    }


def _workloads(s: Scenario, now: dt.datetime) -> None:
    """The workloads: admitted ones on their flavor, waiting ones in line (their place in
    their ClusterQueue: priority first, then age, as Kueue orders a queue)."""
    from cluster.models import ObservedWorkload

    place: dict[str, int] = defaultdict(int)
    line = sorted(s.waiting, key=lambda w: (w.cluster_queue, -w.priority, -w.created))
    position = {}
    for w in line:
        position[w.key] = place[w.cluster_queue]
        place[w.cluster_queue] += 1
    rows = []
    for w in s.workloads:
        namespace, name = w.key.split("/")
        created = now - dt.timedelta(seconds=w.created)
        rows.append(
            ObservedWorkload(
                namespace=namespace,
                name=name,
                queue_name=w.local_queue.split("/")[1],
                cluster_queue=w.cluster_queue if w.flavor else "",
                admitted=bool(w.flavor),
                requests={w.resource: w.amount},
                flavors={w.resource: w.flavor} if w.flavor else {},
                priority=w.priority,
                created_at=created,
                queued_at=created,
                admitted_at=created + dt.timedelta(seconds=30) if w.flavor else None,
                position=position.get(w.key),
                reason="" if w.flavor else "Pending",
                last_changed=now,
            )
        )
    ObservedWorkload.objects.bulk_create(rows, batch_size=BATCH)
