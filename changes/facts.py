"""The facts an impact assessment reads, gathered from the observed tables (nodes, pods),
the desired quotas (ClusterQueues, namespace quotas), the fleet's pools and custom MIG
configs, and the nodes that open requests already hold: a fixed number of queries.

What decides each eviction's outcome (the pods' owners, their Jobs, the namespaces'
PodDisruptionBudgets) is asked of the cluster for the changed nodes only, when the facts
are gathered (a few LIST and GET calls through the gateway): it moves by the second and no
poll keeps it. Without a configured cluster it is not read (and not mentioned).

Every fact is one cluster's (the caller names it): its nodes, pods, namespaces,
quotas, queues, flavors, pools and the nodes its open requests hold. A node of the same
name on another cluster is another node."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from changes.impact import (
    Disruption,
    Fleet,
    NamespaceQuota,
    NodeFacts,
    PodFacts,
    PoolFacts,
    QueueQuota,
    Shortfall,
    shortfalls_of,
)
from changes.models import OPEN_STATES, MigChangeRequest
from cluster import disruption
from cluster.connection import cluster_configured, gateway_for
from cluster.credentials import CredentialKeyError
from cluster.decode import pod_gpu_requests
from cluster.models import Cluster, ObservedNode, ObservedPod
from cluster.scope import cluster_id_of, settings_cluster_id
from cluster.selectors import amount_sql
from fleet.capacity import CapacityRead, FleetCapacity
from fleet.models import MigConfig, NodePool
from gpus import labels as gpu_labels
from gpus.catalog import CustomConfigs, model_for_product, most_per_gpu
from kube import Gateway, KubeError, NotFound, ObjectRef
from portal.infra.process_cache import ProcessCache
from portal.infra.round_trips import Read, read_together
from portal.vocabulary.quantity import parse_quantity
from queues.models import ClusterQueue, LocalQueue, ResourceFlavor
from queues.selectors import gpu_quota_entries_read
from tenants.models import Namespace, QuotaItem, Team

log = logging.getLogger(__name__)


def fleet_facts(
    *,
    cluster: Cluster,
    exclude_request: int | None = None,
    nodes: Iterable[str] | None = None,
) -> Fleet:
    """``cluster``'s observed fleet and desired quotas as plain facts (a fixed number of
    queries); with ``nodes``, what decides the outcome of
    evicting their pods, from that cluster."""
    cid = cluster_id_of(cluster)
    team_of = dict(Namespace.objects.filter(cluster_id=cid).values_list("name", "team__slug"))
    observed = node_facts(cid)
    pods = [
        PodFacts(
            p.namespace, p.name, p.node_name, p.phase, p.gpu_requests, team_of.get(p.namespace, "")
        )
        for p in ObservedPod.objects.on(cid).filter()
    ]
    queues = queue_quotas(cid)
    quotas = namespace_quotas(cid)
    busy = {}
    open_requests = MigChangeRequest.objects.filter(cluster_id=cid, state__in=OPEN_STATES)
    if exclude_request is not None:
        open_requests = open_requests.exclude(pk=exclude_request)
    for pk, held in open_requests.values_list("pk", "nodes"):
        for node in held:
            busy[node] = pk
    return Fleet(
        nodes=observed,
        pods=pods,
        queues=queues,
        flavors=_flavors(cid),
        quotas=quotas,
        pools=[
            PoolFacts(p.name, p.node_selector, p.mig_config)
            for p in NodePool.objects.filter(cluster_id=cid)
        ],
        busy=busy,
        custom_configs=custom_configs(),
        disruption=None if nodes is None else disruption_facts(nodes, cluster=cluster),
    )


def quota_facts(*, cluster: Cluster) -> Fleet:
    """What a quota's assessment and ceiling read of ``cluster``: its nodes, its queues' and
    namespaces' GPU quotas and its flavors (a fixed number of queries). Not its pods, pools
    or open MIG changes: a quota request never pays for every pod of the fleet."""
    cid = cluster_id_of(cluster)
    return Fleet(
        nodes=node_facts(cid),
        queues=queue_quotas(cid),
        flavors=_flavors(cid),
        quotas=namespace_quotas(cid),
    )


def namespace_quotas(cluster_id: int) -> list[NamespaceQuota]:
    """The cluster's namespace quotas of GPU resources that are whole numbers."""
    return [
        NamespaceQuota(
            item.namespace.name,
            item.namespace.team.slug,
            item.resource.removeprefix("requests."),
            int(item.hard),
        )
        for item in QuotaItem.objects.filter(
            namespace__cluster_id=cluster_id, resource__startswith="requests.nvidia.com/"
        ).select_related("namespace__team")
        if item.hard.isdigit()
    ]


def _interactive_gateway(cluster: Cluster | None) -> Gateway | None:
    """The gateway to ``cluster`` for a read a person waits on (ten seconds at most); None
    when the settings name no cluster and that one is meant."""
    if (cluster is None or cluster.connection == "settings") and not cluster_configured():
        return None
    if cluster is None:
        cluster = Cluster.objects.get(pk=settings_cluster_id())
    return gateway_for(cluster).bounded(connect=3.0, read=10.0)


def disruption_facts(
    nodes: Iterable[str], gateway: Gateway | None = None, *, cluster: Cluster | None = None
) -> Disruption | None:
    """The labels and owners of the GPU pods on ``nodes``, their Jobs, and the budgets of
    their namespaces, from ``cluster`` (by default the settings' one) or through ``gateway``
    (None when no cluster is configured; what could not be read is said in ``unread``)."""
    if gateway is None:
        try:
            gateway = _interactive_gateway(cluster)
        except CredentialKeyError as exc:
            return Disruption(unread=str(exc))
        if gateway is None:
            return None
    pods: list[dict[str, Any]] = []
    try:
        for node in dict.fromkeys(nodes):
            pods += [
                p
                for p in gateway.list("v1", "Pod", field_selector=f"spec.nodeName={node}")
                if pod_gpu_requests(p)
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]
        budgets = [
            disruption.budget_of(b)
            for namespace in sorted({p["metadata"]["namespace"] for p in pods})
            for b in gateway.list("policy/v1", "PodDisruptionBudget", namespace=namespace)
        ]
    except KubeError as exc:
        log.info("eviction facts not read: %s", exc.message)
        return Disruption(unread=exc.message)
    jobs: dict[tuple[str, str], disruption.Owner] = {}
    work = {}
    for pod in pods:
        meta = pod["metadata"]
        kind, name = disruption.controller_of(pod)
        owner = disruption.Owner(kind, name)
        if kind == "Job":
            key = (meta["namespace"], name)
            if key not in jobs:
                jobs[key] = _job(gateway, *key, kueue_pod=disruption.is_kueue_pod(pod))
            owner = jobs[key]
        work[(meta["namespace"], meta["name"])] = disruption.PodWork(
            dict(meta.get("labels") or {}), owner
        )
    return Disruption(pods=work, budgets=budgets)


def _job(gateway: Gateway, namespace: str, name: str, *, kueue_pod: bool) -> disruption.Owner:
    try:
        job = gateway.get(ObjectRef("batch/v1", "Job", name, namespace))
    except NotFound:
        return disruption.Owner("Job", name, unread="it is gone")
    except KubeError as exc:
        return disruption.Owner("Job", name, unread=exc.message)
    return disruption.job_owner(job, kueue_pod=kueue_pod)


def queue_quotas_reads(cluster_id: int) -> list[Read]:
    """What ``queue_quotas`` reads: each LocalQueue's ClusterQueue and team, and the
    ClusterQueues' GPU quota entries (for a page that reads them with others in one round
    trip). The entries are walked in the database: a thousand queues read as models, their
    resource groups decoded and walked in Python, were a third of the Fleet page."""
    lq, cq = LocalQueue._meta.db_table, ClusterQueue._meta.db_table
    ns, team = Namespace._meta.db_table, Team._meta.db_table
    return [
        Read(
            f"SELECT c.name, t.slug FROM {lq} l JOIN {cq} c ON c.id = l.cluster_queue_id "
            f"JOIN {ns} n ON n.id = l.namespace_id JOIN {team} t ON t.id = n.team_id "
            "WHERE n.cluster_id = %s",
            [cluster_id],
        ),
        gpu_quota_entries_read(cluster_id),
    ]


def queue_quotas(
    cluster: Cluster | int, read: Sequence[list[Any]] | None = None
) -> list[QueueQuota]:
    """The cluster's ClusterQueues' nominal quotas of GPU resources, with the teams
    submitting to each (two queries; none when the page read them: ``read``, the rows of
    ``queue_quotas_reads``)."""
    cid = cluster_id_of(cluster)
    submitting, entries = read_together(*queue_quotas_reads(cid)) if read is None else read
    teams_of: dict[str, set[str]] = {}
    for queue, team in submitting:
        teams_of.setdefault(queue, set()).add(team)
    return [
        QueueQuota(name, flavor, resource, amount, tuple(sorted(teams_of.get(name, ()))))
        for name, flavor, resource, amount in _whole_quotas(entries)
    ]


def _whole_quotas(entries: Iterable[Sequence[Any]]) -> list[tuple[str, str, str, int]]:
    """The rows of ``gpu_quota_entries_read`` with a nominal quota of a whole number, as
    (queue, flavor, resource, amount): each distinct amount parsed once (a thousand queues
    repeat a few)."""
    whole: dict[Any, int | None] = {}
    out = []
    for name, flavor, resource, text in entries:
        if text is None:  # no nominal quota written: nothing promised
            continue
        if text not in whole:
            amount = parse_quantity(text)
            whole[text] = int(amount) if amount.denominator == 1 else None
        if (amount_of := whole[text]) is not None:
            out.append((name, flavor, resource, amount_of))
    return out


def shortfalls_reads(cluster_id: int) -> list[Read]:
    """What ``shortfalls_now`` reads before it sums the capacity: the queues' GPU quotas and
    the flavors (for a page that reads them with others in one round trip)."""
    return [gpu_quota_entries_read(cluster_id), _flavors_read(cluster_id)]


# this process's capacity behind each flavor, under the cluster, what its nodes were last
# stamped with and the flavors' labels (``shortfalls_now``)
_BEHIND: ProcessCache[tuple[Any, ...], dict[tuple[str, str], int]] = ProcessCache(
    "capacity behind flavors", 64
)


def shortfalls_now(
    cluster: Cluster | int,
    read: Sequence[list[Any]] | None = None,
    *,
    stamps: tuple[Any, ...] | None = None,
) -> list[Shortfall]:
    """The (flavor, resource) pairs whose queues promise more than the nodes behind the
    flavor offer now on ``cluster``, with the capacity summed
    in the database (one query for the whole fleet: no node and no pod is loaded; ``read``:
    the rows of ``shortfalls_reads``, when the page read them with its own). ``stamps``:
    what the cluster's nodes were last stamped with (a row of
    ``overview.selectors.stamps_read``, which every poll that changes a node moves): the
    capacity is then kept in the process under it and the flavors' labels, and summed
    again only when either moved."""
    cid = cluster_id_of(cluster)
    entries, flavor_rows = read_together(*shortfalls_reads(cid)) if read is None else read
    flavors = _flavor_labels(flavor_rows)
    if not entries:
        return []  # no queue promises any GPU

    def behind() -> dict[tuple[str, str], int]:
        return {
            (flavor, resource): int(total)
            for flavor, resource, total in read_together(_flavor_capacity_read(cid, None))[0]
        }

    if stamps is None:
        capacity = behind()
    else:
        labels = tuple((name, json.dumps(of, sort_keys=True)) for name, of in flavors.items())
        capacity = _BEHIND.get((cid, stamps, labels), behind)
    return shortfalls_of(_whole_quotas(entries), capacity)


def node_facts(cluster_id: int) -> list[NodeFacts]:
    """The cluster's observed nodes that are not gone."""
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
        for n in ObservedNode.objects.on(cluster_id).filter(gone_since__isnull=True)
    ]


def _flavors_read(cluster_id: int) -> Read:
    return Read(
        f"SELECT * FROM {ResourceFlavor._meta.db_table} WHERE cluster_id = %s ORDER BY name",
        [cluster_id],
        ResourceFlavor,
    )


def _flavor_labels(rows: Iterable[ResourceFlavor]) -> dict[str, dict[str, str]]:
    """Each flavor's node labels, by its name."""
    return {f.name: f.node_labels for f in rows}


def _flavors(cluster_id: int) -> dict[str, dict[str, str]]:
    return _flavor_labels(read_together(_flavors_read(cluster_id))[0])


def custom_configs() -> CustomConfigs:
    """The custom MIG configs: name -> (GPU model, devices per GPU)."""
    return {c.name: (c.gpu_model, c.devices) for c in MigConfig.objects.all()}


def capacity_for(
    resources: Iterable[str],
    cluster_id: int | None = None,
    *,
    flavors: Iterable[str] | None = None,
    whole: bool = True,
) -> FleetCapacity:
    """``capacity_read``'s answer, its reads sent alone (one round trip)."""
    asked = capacity_read(resources, cluster_id, flavors=flavors, whole=whole)
    return asked.answer(read_together(*asked.reads))


def capacity_read(
    resources: Iterable[str],
    cluster_id: int | None = None,
    *,
    flavors: Iterable[str] | None = None,
    whole: bool = True,
) -> CapacityRead:
    """What the observed fleet offers behind each flavor now, and the most it could ever
    offer of each of ``resources`` (the fleet's capacity hook, fleet/capacity.py), on the
    cluster (by default the settings' one), as reads a page may send with its own in one
    round trip, and the answer from their rows. ``flavors``: only these flavors' rows (a
    queue's editor asks for its own; ``()`` for none: a namespace quota needs only the
    whole fleet's ceilings); every flavor by default. ``whole=False``: not the whole fleet's
    ceiling (``ceiling`` left empty: a queue's editor shows its flavors' alone).

    Summed in the database (four statements whatever the number of nodes and flavors, the
    flavors' labels joined there: no node is loaded), with the same answers as
    ``flavor_capacity``, ``ceiling`` and ``flavor_ceiling`` give over ``node_facts``
    (tests/unit/changes/test_capacity.py holds them side by side)."""
    cid = settings_cluster_id() if cluster_id is None else cluster_id  # the hook's None
    names = None if flavors is None else sorted(set(flavors))
    resources = sorted(set(resources))
    flavor_table = ResourceFlavor._meta.db_table
    asked = "" if names is None else " AND name = ANY(%s::text[])"
    asked_params: list[Any] = [] if names is None else [names]
    reads = (
        Read(
            f"SELECT EXISTS (SELECT 1 FROM {ObservedNode._meta.db_table} "
            "WHERE cluster_id = %s AND gone_since IS NULL)",
            [cid],
        ),
        Read(f"SELECT name FROM {flavor_table} WHERE cluster_id = %s{asked}", [cid, *asked_params]),
        _most_read(resources, cid, names, whole),
        _flavor_capacity_read(cid, names),
    )

    def answer(rows: Sequence[list[Any]]) -> FleetCapacity:
        [(live,)], named, most_rows, behind_rows = rows
        if not live:  # no node observed yet: nothing is known of the fleet
            return FleetCapacity(known=False)
        most = _most_from(most_rows)
        return FleetCapacity(
            behind={(flavor, resource): int(total) for flavor, resource, total in behind_rows},
            ceiling={r: most.get((None, r), 0) for r in resources} if whole else {},
            flavor_ceiling={(f, r): most.get((f, r), 0) for (f,) in named for r in resources},
            known=True,
        )

    return CapacityRead(reads, answer)


def _most_read(
    resources: Sequence[str], cluster_id: int, flavors: Sequence[str] | None, whole: bool
) -> Read:
    """(flavor, resource) -> the most of the resource the live nodes the flavor's labels
    select could ever offer, each in its best layout for it, as ``changes.impact``'s
    ``_most`` counts a node; (None, resource): the whole fleet's (with ``whole``). A
    flavor's labels leave its MIG layout label aside: a change can bring any node in. The
    database groups the nodes by what decides that (GPU product, GPU count, what they offer
    of it now), so that Python sees a handful of rows whatever the number of nodes
    (``_most_from``)."""
    asked = "" if flavors is None else " AND name = ANY(%s::text[])"
    amount = amount_sql("(n.allocatable -> r.resource)")
    sql = f"""
        SELECT f.flavor, r.resource, n.gpu_product, n.gpu_count, {amount}, count(*)
        FROM {ObservedNode._meta.db_table} n
        JOIN (
            SELECT NULL::text AS flavor, '{{}}'::jsonb AS labels WHERE %s
            UNION ALL SELECT name, node_labels - %s FROM {ResourceFlavor._meta.db_table}
            WHERE cluster_id = %s{asked}
        ) AS f ON n.labels @> f.labels
        CROSS JOIN unnest(%s::text[]) AS r(resource)
        WHERE n.cluster_id = %s AND n.gone_since IS NULL
        GROUP BY 1, 2, 3, 4, 5
    """
    params: list[Any] = [whole, gpu_labels.MIG_CONFIG, cluster_id]
    params += [] if flavors is None else [list(flavors)]
    return Read(sql, [*params, list(resources), cluster_id])


def _most_from(rows: Iterable[tuple[Any, ...]]) -> dict[tuple[str | None, str], int]:
    """``_most_read``'s rows summed: each group of nodes counted in its best layout."""
    models: dict[str, str | None] = {}
    out: dict[tuple[str | None, str], int] = {}
    for flavor, resource, product, gpus, now, nodes in rows:
        if product not in models:
            models[product] = model_for_product(product) if product else None
        if not resource.startswith(gpu_labels.GPU_RESOURCE_PREFIX):
            now = 0  # a node's offer is its GPU resources alone (``gpu_offer``)
        one = max(gpus * most_per_gpu(models[product], resource), now)
        out[(flavor, resource)] = out.get((flavor, resource), 0) + one * nodes
    return out


def _flavor_capacity_read(cluster_id: int, flavors: Sequence[str] | None) -> Read:
    """(flavor, resource, total): the GPU resources the live nodes a flavor's labels select
    offer, as ``flavor_capacity`` counts them (a value that is not a whole number counts
    0)."""
    asked = "" if flavors is None else " AND f.name = ANY(%s::text[])"
    amount = amount_sql("e.value")
    sql = f"""
        SELECT f.name, e.key, sum({amount})
        FROM {ObservedNode._meta.db_table} n
        JOIN {ResourceFlavor._meta.db_table} f
            ON f.cluster_id = n.cluster_id AND n.labels @> f.node_labels
        CROSS JOIN LATERAL jsonb_each(n.allocatable) AS e
        WHERE n.cluster_id = %s AND n.gone_since IS NULL AND starts_with(e.key, 'nvidia.com/')
            {asked}
        GROUP BY 1, 2
        HAVING sum({amount}) > 0
    """
    return Read(sql, [cluster_id, *([] if flavors is None else [list(flavors)])])
