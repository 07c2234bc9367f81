"""The facts an impact assessment reads, gathered from the observed tables (nodes, pods),
the desired quotas (ClusterQueues, namespace quotas), the fleet's pools and custom MIG
configs, and the nodes that open requests already hold: a fixed number of queries."""

from __future__ import annotations

from collections.abc import Iterable

from changes.impact import (
    Fleet,
    NamespaceQuota,
    NodeFacts,
    PodFacts,
    PoolFacts,
    QueueQuota,
    ceiling,
    flavor_capacity,
    flavor_ceiling,
)
from changes.models import OPEN_STATES, MigChangeRequest
from cluster.models import ObservedNode, ObservedPod
from fleet.models import MigConfig, NodePool
from gpus.catalog import CustomConfigs, model_for_product
from portal.capacity import FleetCapacity
from queues.models import ClusterQueue, LocalQueue, ResourceFlavor
from tenants.models import Namespace, QuotaItem


def fleet_facts(*, exclude_request: int | None = None) -> Fleet:
    """The observed fleet and desired quotas as plain facts (a fixed number of queries)."""
    team_of = dict(Namespace.objects.values_list("name", "team__slug"))
    nodes = _node_facts()
    pods = [
        PodFacts(
            p.namespace, p.name, p.node_name, p.phase, p.gpu_requests, team_of.get(p.namespace, "")
        )
        for p in ObservedPod.objects.all()
    ]
    teams_of: dict[str, set[str]] = {}
    for queue, team in LocalQueue.objects.values_list(
        "cluster_queue__name", "namespace__team__slug"
    ):
        teams_of.setdefault(queue, set()).add(team)
    queues = []
    for cq in ClusterQueue.objects.all():
        teams = tuple(sorted(teams_of.get(cq.name, ())))
        for (flavor, resource), amount in cq.quota().items():
            if resource.startswith("nvidia.com/") and amount.denominator == 1:
                queues.append(QueueQuota(cq.name, flavor, resource, int(amount), teams))
    quotas = []
    for item in QuotaItem.objects.filter(
        resource__startswith="requests.nvidia.com/"
    ).select_related("namespace__team"):
        if item.hard.isdigit():
            quotas.append(
                NamespaceQuota(
                    item.namespace.name,
                    item.namespace.team.slug,
                    item.resource.removeprefix("requests."),
                    int(item.hard),
                )
            )
    busy = {}
    open_requests = MigChangeRequest.objects.filter(state__in=OPEN_STATES)
    if exclude_request is not None:
        open_requests = open_requests.exclude(pk=exclude_request)
    for pk, held in open_requests.values_list("pk", "nodes"):
        for node in held:
            busy[node] = pk
    return Fleet(
        nodes=nodes,
        pods=pods,
        queues=queues,
        flavors=_flavors(),
        quotas=quotas,
        pools=[PoolFacts(p.name, p.node_selector, p.mig_config) for p in NodePool.objects.all()],
        busy=busy,
        custom_configs=custom_configs(),
    )


def _node_facts() -> list[NodeFacts]:
    """The observed nodes that are not gone."""
    return [
        NodeFacts(
            name=n.name,
            model=model_for_product(n.gpu_product) if n.gpu_product else None,
            gpu_count=n.gpu_count,
            mig_config=n.mig_config,
            mig_state=n.mig_config_state,
            labels=n.labels,
            allocatable=n.gpu_offer(),
        )
        for n in ObservedNode.objects.filter(gone_since__isnull=True)
    ]


def _flavors() -> dict[str, dict[str, str]]:
    return {f.name: f.node_labels for f in ResourceFlavor.objects.all()}


def custom_configs() -> CustomConfigs:
    """The custom MIG configs: name -> (GPU model, devices per GPU)."""
    return {c.name: (c.gpu_model, c.devices) for c in MigConfig.objects.all()}


def capacity_for(resources: Iterable[str]) -> FleetCapacity:
    """What the observed fleet offers behind each flavor now, and the most it could ever
    offer of each of ``resources`` (the portal's capacity hook)."""
    # Nodes and flavors only: a page asking this never pays for every pod of the fleet.
    fleet = Fleet(nodes=_node_facts(), flavors=_flavors())
    live = list(fleet.nodes)
    resources = set(resources)
    return FleetCapacity(
        behind=dict(flavor_capacity(fleet.flavors, live)),
        ceiling={r: ceiling(fleet, r) for r in resources},
        flavor_ceiling={
            (flavor, r): flavor_ceiling(fleet, labels, r)
            for flavor, labels in fleet.flavors.items()
            for r in resources
        },
        known=bool(live),  # no node observed yet: nothing is known of the fleet
    )
