"""Reads of the overview's pages. The Fleet page: each pool summed up in the database
(capacity and allocation per GPU resource, the MIG layouts in use, the nodes needing
attention, drift and GPU health), a fixed number of queries whatever the fleet's size; and
the nodes of one pool (or of the whole fleet) a page at a time, those needing attention
first, found by name or label. The home: the user's last visit (recorded as it is read) and
the namespaces' observed rows, in one round trip."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import BooleanField, IntegerField, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone

from changes.models import OPEN_STATES, MigChangeRequest, MigPolicyChange, QuotaChangeRequest
from cluster import dra
from cluster.models import (
    Cluster,
    ObservedNode,
    ObservedObject,
    ObservedPod,
    ObservedResourceClaim,
    ObservedResourceSlice,
)
from cluster.selectors import ApiStatus, amount_sql
from diagnostics.selectors import WaitingRead, waiting_reads
from fleet.membership import case_sql, holds, holds_none
from fleet.models import NodePool
from health.models import NodeHealth
from overview.models import HomeVisit
from portal.infra.round_trips import PAIRS, Read, pairs_params, read_together
from portal.models import PlatformRole
from queues.models import ClusterQueue, Cohort
from queues.selectors import quota_entries_sql, rows_version_sql
from tenants.models import Team

# The home's reads of the namespaces as last polled. The namespaces' Pending pods and running
# GPU pods (asking GPU resources or DRA claims). Written out: the ORM took longer to build
# these few reads than the database to answer them.
# Only the columns the home shows or sorts its pods and workloads by: turning each row's
# other timestamps and JSON into Python was a fifth of the page at the scale scenario.
PODS_SHOWN = (
    "id, cluster_id, namespace, name, phase, node_name, gpu_requests, resource_claims, "
    "queue_name, workload_name, owner_kind, owner_name, created_at, started_at, explained"
)
WORKLOADS_SHOWN = (
    "id, cluster_id, namespace, name, queue_name, cluster_queue, admitted, evictions, "
    "requests, admitted_at, explained"
)
PODS_SQL = (
    f"SELECT {PODS_SHOWN} FROM {ObservedPod._meta.db_table} "
    f"WHERE (cluster_id, namespace) IN {PAIRS} "
    "AND (phase = 'Pending' OR (phase = 'Running' AND (gpu_requests <> '{}'::jsonb "
    "OR resource_claims <> '[]'::jsonb))) "
    "ORDER BY namespace, name"
)
# The status of namespaces' ResourceQuotas and LocalQueues, and of ClusterQueues, each of
# (cluster id, name) pairs.
STATUSES_SQL = (
    f"SELECT cluster_id, kind, namespace, name, status FROM {ObservedObject._meta.db_table} "
    f"WHERE (kind IN ('ResourceQuota', 'LocalQueue') AND (cluster_id, namespace) IN {PAIRS}) "
    f"OR (kind = 'ClusterQueue' AND (cluster_id, name) IN {PAIRS})"
)
_CQ, _COHORT = ClusterQueue._meta.db_table, Cohort._meta.db_table
# What each ClusterQueue of (cluster id, name) pairs could borrow: the resource groups of
# every other queue of its cohort tree (the cohorts under the root of its own) and of those
# cohorts themselves. Rows (cluster id, queue name, resource groups); none for a queue in no
# cohort.
LENDERS_SQL = (
    f"WITH RECURSIVE tree(id, root) AS (SELECT id, id FROM {_COHORT} WHERE parent_id IS NULL "
    f"UNION ALL SELECT c.id, t.root FROM {_COHORT} c JOIN tree t ON c.parent_id = t.id), "
    f"mine AS (SELECT me.id, me.cluster_id, me.name, t.root FROM {_CQ} me "
    f"JOIN tree t ON t.id = me.cohort_id WHERE (me.cluster_id, me.name) IN {PAIRS}), "
    f"lending AS (SELECT m.cluster_id, m.name, o.resource_groups AS groups FROM mine m "
    f"JOIN tree t ON t.root = m.root JOIN {_CQ} o ON o.cohort_id = t.id AND o.id <> m.id "
    f"UNION ALL SELECT m.cluster_id, m.name, c.resource_groups FROM mine m "
    f"JOIN tree t ON t.root = m.root JOIN {_COHORT} c ON c.id = t.id) "
    # Each quota of the lenders' resource groups (quota_entries' walk), the same amounts
    # written alike counted once: a tree of 500 queues repeats a few amounts.
    "SELECT l.cluster_id, l.name, f ->> 'name', r ->> 'name', r ->> 'nominalQuota', "
    f"r ->> 'lendingLimit', count(*) FROM lending l {quota_entries_sql('l.groups')}"
    "GROUP BY 1, 2, 3, 4, 5, 6"
)
# What the cohort trees are as stored: every ClusterQueue and cohort row's version
# (``rows_version_sql``). What a queue's tree lends (LENDERS_SQL) is kept in the process
# under it.
TREES_SQL = rows_version_sql(("q", ClusterQueue), ("c", Cohort))
# (cluster id, queue name) -> what it could borrow from: (flavor, resource, nominal quota,
# lending limit, how many quotas say so) of every other queue and cohort of its tree
Lenders = dict[tuple[int, str], list[tuple[str, str, str | None, str | None, int]]]
HIT_RECENTLY = dt.timedelta(days=3)  # a change that ran is told this long after
# (cluster id, kind, namespace, name) -> status
Statuses = dict[tuple[int, str, str, str], dict[str, Any]]


NO_POOL = "(no pool)"  # the nodes no pool selects (a pool name is a DNS label: never this)
NODES = ObservedNode._meta.db_table
HEALTH = NodeHealth._meta.db_table
SLICES = ObservedResourceSlice._meta.db_table
CLAIMS = ObservedResourceClaim._meta.db_table


@dataclass(frozen=True)
class Pools:
    """The node pools of one cluster (``cluster_id``; None: of every cluster) in the order
    that decides membership: a node belongs to the first pool (by name) of its cluster whose
    labels it carries; a pool without labels selects no node."""

    rows: Sequence[NodePool]
    cluster_id: int | None = None

    @classmethod
    def load(cls, cluster_id: int | None = None) -> Pools:
        pools = NodePool.objects.select_related("cluster").order_by("cluster__name", "name")
        if cluster_id is not None:
            pools = pools.filter(cluster_id=cluster_id)
        return cls(list(pools), cluster_id)

    @staticmethod
    def read_every() -> Read:
        """Every cluster's pools in ``load``'s order, for a page that reads them with others
        (``Pools.among`` takes a cluster's, or every cluster's, from its rows)."""
        table, clusters = NodePool._meta.db_table, Cluster._meta.db_table
        return Read(
            f"SELECT p.* FROM {table} p JOIN {clusters} c ON c.id = p.cluster_id "
            "ORDER BY c.name, p.name",
            [],
            NodePool,
        )

    @classmethod
    def among(
        cls, rows: Sequence[NodePool], clusters: Sequence[Any], cluster_id: int | None
    ) -> Pools:
        """The pools of ``cluster_id`` (None: of every cluster in ``clusters``) from the rows
        of ``read_every``, each with its cluster (``clusters``: those the user may see; the
        pools of another are left out)."""
        by_pk = {cluster.pk: cluster for cluster in clusters}
        mine = [
            p
            for p in rows
            if p.cluster_id in by_pk and (cluster_id is None or p.cluster_id == cluster_id)
        ]
        for pool in mine:
            pool.cluster = by_pk[pool.cluster_id]
        return cls(mine, cluster_id)

    def nodes_sql(self, table: str) -> tuple[str, list[Any]]:
        """SQL: the condition that a node row of ``table`` is of these pools' cluster."""
        if self.cluster_id is None:
            return "TRUE", []
        return f"{table}.cluster_id = %s", [self.cluster_id]

    def index(self, name: str) -> int | None:
        """The pool's place in ``rows`` (-1 for the nodes of no pool; None: no such pool or
        one whose name pools of two clusters share): ``name``, or ``cluster/name``."""
        if name == NO_POOL:
            return -1
        cluster, _, pool = name.rpartition("/")
        found = [
            i
            for i, p in enumerate(self.rows)
            if p.name == pool and (not cluster or p.cluster.name == cluster)
        ]
        return found[0] if len(found) == 1 else None

    def clusters_of(self, name: str) -> list[str]:
        """The clusters with a pool named ``name`` (a bare name)."""
        return [p.cluster.name for p in self.rows if p.name == name]

    def name_of(self, index: int) -> str:
        return self.rows[index].name if 0 <= index < len(self.rows) else NO_POOL

    def choices(self) -> list[tuple[str, str]]:
        """(value, label) of each pool: its name, with its cluster where pools of several
        clusters are listed."""
        several = len({p.cluster_id for p in self.rows}) > 1
        return [
            (f"{p.cluster.name}/{p.name}", f"{p.name} ({p.cluster.name})")
            if several
            else (p.name, p.name)
            for p in self.rows
        ]

    def case(self, values: Sequence[Any], default: Any, table: str) -> tuple[str, list[Any]]:
        """SQL giving, for a node row of ``table``, ``values[i]`` of its pool ``i``
        (``default`` when no pool holds it), and its parameters (``fleet.membership``)."""
        return case_sql(self.rows, values, default, table, per_cluster=self.cluster_id is None)

    def of_node(self, table: str) -> tuple[str, list[Any]]:
        """SQL: the index of the node's pool (-1 for none)."""
        return self.case(range(len(self.rows)), -1, table)

    def intended(self, table: str) -> tuple[str, list[Any]]:
        """SQL: the MIG config the node's pool intends ('' for none)."""
        return self.case([p.mig_config for p in self.rows], "", table)


@dataclass
class ResourceUse:
    """One GPU resource of a pool: what its nodes offer and what pods hold of it."""

    resource: str
    allocatable: int
    allocated: int

    @property
    def free(self) -> int:
        return max(0, self.allocatable - self.allocated)

    @property
    def fill(self) -> int:
        """The bar's share in percent (at most 100)."""
        return min(100, round(100 * self.allocated / self.allocatable)) if self.allocatable else 0


@dataclass
class Layout:
    """A MIG config in use in a pool, on one GPU product and count, and on how many nodes."""

    mig_config: str
    gpu_product: str
    gpu_count: int
    nodes: int
    failed: int
    pending: int
    drift: bool  # the pool intends another config


@dataclass
class PoolSummary:
    """A pool summed up: its nodes and GPUs, capacity and allocation per GPU resource, the
    MIG layouts in use, the nodes needing attention (and why) and their GPU health."""

    name: str
    pk: int | None = None  # None: the nodes no pool selects
    mig_config: str = ""
    purpose: str = ""
    nodes: int = 0
    gpus: int = 0
    not_ready: int = 0
    cordoned: int = 0
    mig_failed: int = 0
    reconfiguring: int = 0
    drifted: int = 0  # on another MIG config than the pool intends
    unhealthy: int = 0  # GPU health at warning or worse
    attention: int = 0  # nodes with any of the above
    health: dict[str, int] = field(default_factory=dict)  # worst -> nodes ("none": no data)
    exporter_errors: int = 0
    resources: list[ResourceUse] = field(default_factory=list)
    layouts: list[Layout] = field(default_factory=list)
    dra: list[dra.Offer] = field(default_factory=list)  # devices by DRA, per product and kind
    dra_gpus: int = 0  # physical GPUs published through DRA
    dra_tainted: int = 0  # of them, those with a device tainted against scheduling

    @property
    def key(self) -> str:
        """The pool's part of element ids (``pool-<key>-nodes``)."""
        return str(self.pk) if self.pk is not None else "none"


def live_nodes_read(cluster_id: int) -> Read:
    """Whether the cluster has a node that is not gone (one row, one boolean)."""
    return Read(
        f"SELECT EXISTS (SELECT 1 FROM {NODES} WHERE cluster_id = %s AND gone_since IS NULL)",
        [cluster_id],
    )


def stamps_read(cluster_id: int | None) -> Read:
    """The stamps ``summed_from`` reads of the pools of ``cluster_id`` (None: of every
    cluster), for a page that reads them with others."""
    mine, params = Pools(rows=(), cluster_id=cluster_id).nodes_sql("x")
    return Read(
        f"""SELECT * FROM (SELECT count(*), max(last_changed), max(gone_since)
                           FROM {NODES} x WHERE {mine}) n,
                          (SELECT count(*), max(observed_at) FROM {HEALTH} x WHERE {mine}) h,
                          (SELECT count(*), max(last_changed) FROM {SLICES} x WHERE {mine}) s,
                          (SELECT count(*), max(last_changed) FROM {CLAIMS} x WHERE {mine}) c""",
        [*params, *params, *params, *params],
    )


def summed_from(pools: Pools, read: Sequence[Any] | None = None) -> tuple[Any, ...]:
    """What the summaries are summed from, in one small query (none when the page read it
    already: ``read``, the rows of ``stamps_read``): the poll stamps every node row it
    changes (and every node it finds gone), the health collection every node's health it
    reads; with the pools, what the summaries were made of is what they still are when
    this has not changed."""
    (stamps,) = read_together(stamps_read(pools.cluster_id))[0] if read is None else read
    return (
        pools.cluster_id,
        stamps,
        tuple((p.pk, p.name, str(p.node_selector), p.mig_config, p.purpose) for p in pools.rows),
    )


def sum_pools(pools: Pools) -> list[PoolSummary]:
    """Every pool summed up (and the nodes of no pool, when there are any): four queries
    for the whole fleet, never a node loaded into Python (a fifth where DRA publishes
    devices: their slices are counted per GPU in Python, ``cluster.dra``)."""
    summaries = {
        i: PoolSummary(p.name, p.pk, p.mig_config, p.get_purpose_display())
        for i, p in enumerate(pools.rows)
    }
    summaries[-1] = PoolSummary(NO_POOL)
    _count_nodes(pools, summaries)
    _sum_resources(pools, summaries)
    _layouts(pools, summaries)
    _dra(pools, summaries)
    return [s for i, s in sorted(summaries.items(), key=lambda i: i[0] < 0) if i >= 0 or s.nodes]


def _rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _count_nodes(pools: Pools, summaries: dict[int, PoolSummary]) -> None:
    """Nodes, GPUs, the reasons for attention and the GPU health, per pool (one query)."""
    pool_sql, pool_params = pools.of_node("n")
    intended_sql, intended_params = pools.intended("n")
    mine, mine_params = pools.nodes_sql("n")
    sql = f"""
        SELECT pool, count(*), coalesce(sum(gpu_count), 0),
               count(*) FILTER (WHERE NOT ready), count(*) FILTER (WHERE unschedulable),
               count(*) FILTER (WHERE mig_config_state = 'failed'),
               count(*) FILTER (WHERE mig_config_state = 'pending'),
               count(*) FILTER (WHERE drifted), count(*) FILTER (WHERE unhealthy),
               count(*) FILTER (WHERE NOT ready OR unschedulable OR drifted OR unhealthy
                                OR mig_config_state IN ('failed', 'pending')),
               count(*) FILTER (WHERE worst = 'critical'),
               count(*) FILTER (WHERE worst = 'warning'),
               count(*) FILTER (WHERE worst = 'info'), count(*) FILTER (WHERE worst = 'ok'),
               count(*) FILTER (WHERE worst IS NULL), count(*) FILTER (WHERE exporter_error)
        FROM (
            SELECT {pool_sql} AS pool, n.gpu_count, n.ready, n.unschedulable,
                   n.mig_config_state, h.worst,
                   coalesce(h.error, '') <> '' AS exporter_error,
                   coalesce(h.worst IN ('warning', 'critical'), false) AS unhealthy,
                   ({intended_sql} <> '' AND n.mig_config <> {intended_sql}) AS drifted
            FROM {NODES} n LEFT JOIN {HEALTH} h ON h.cluster_id = n.cluster_id AND h.node = n.name
            WHERE n.gone_since IS NULL AND {mine}
        ) AS node
        GROUP BY pool
    """
    for row in _rows(sql, [*pool_params, *intended_params, *intended_params, *mine_params]):
        summary = summaries.get(int(row[0]))
        if summary is None:
            continue
        counts = [int(value) for value in row[1:]]
        (
            summary.nodes,
            summary.gpus,
            summary.not_ready,
            summary.cordoned,
            summary.mig_failed,
            summary.reconfiguring,
            summary.drifted,
            summary.unhealthy,
            summary.attention,
        ) = counts[:9]
        summary.health = dict(
            zip(("critical", "warning", "info", "ok", "none"), counts[9:14], strict=True)
        )
        summary.exporter_errors = counts[14]


def _sum_resources(pools: Pools, summaries: dict[int, PoolSummary]) -> None:
    """Allocatable and allocated per pool and GPU resource (one query). A resource a node
    offers 0 of is absent (old MIG names linger at 0), as on the node rows."""
    pool_sql, pool_params = pools.of_node("n")
    mine, mine_params = pools.nodes_sql("n")
    offered = amount_sql("e.value")
    held = amount_sql("(n.allocated -> e.key)")
    sql = f"""
        SELECT {pool_sql} AS pool, e.key, sum({offered}), sum({held})
        FROM {NODES} n CROSS JOIN LATERAL jsonb_each(n.allocatable) AS e
        WHERE n.gone_since IS NULL AND {mine}
          AND starts_with(e.key, 'nvidia.com/') AND {offered} > 0
        GROUP BY 1, 2 ORDER BY 1, 2
    """
    for pool, resource, allocatable, allocated in _rows(sql, [*pool_params, *mine_params]):
        summary = summaries.get(int(pool))
        if summary is not None:
            summary.resources.append(ResourceUse(str(resource), int(allocatable), int(allocated)))


def _layouts(pools: Pools, summaries: dict[int, PoolSummary]) -> None:
    """The MIG configs in use per pool, by GPU product and count, most nodes first (one
    query)."""
    pool_sql, pool_params = pools.of_node("n")
    mine, mine_params = pools.nodes_sql("n")
    sql = f"""
        SELECT {pool_sql} AS pool, n.mig_config, n.gpu_product, n.gpu_count, count(*),
               count(*) FILTER (WHERE n.mig_config_state = 'failed'),
               count(*) FILTER (WHERE n.mig_config_state = 'pending')
        FROM {NODES} n WHERE n.gone_since IS NULL AND {mine}
        GROUP BY 1, 2, 3, 4 ORDER BY 1, 5 DESC, 2, 3, 4
    """
    rows = _rows(sql, [*pool_params, *mine_params])
    for pool, config, product, gpus, nodes, failed, pending in rows:
        summary = summaries.get(int(pool))
        if summary is None:
            continue
        summary.layouts.append(
            Layout(
                str(config),
                str(product),
                int(gpus),
                int(nodes),
                int(failed),
                int(pending),
                bool(summary.mig_config and config != summary.mig_config),
            )
        )


def _dra(pools: Pools, summaries: dict[int, PoolSummary]) -> None:
    """The devices published through DRA per pool (by the node each slice is for), with
    what the allocated claims hold of them (two queries; none of it when no slice is
    published)."""
    pool_sql, pool_params = pools.of_node("n")
    mine, mine_params = pools.nodes_sql("s")
    sql = f"""
        SELECT {pool_sql} AS pool, s.node_name, s.driver, s.pool, s.devices, s.shared_counters
        FROM {SLICES} s JOIN {NODES} n ON n.cluster_id = s.cluster_id AND n.name = s.node_name
        WHERE n.gone_since IS NULL AND {mine}
    """
    per_pool: dict[int, list[dict[str, Any]]] = {}
    loads = json.loads
    for pool, node, driver, name, devices, counters in _rows(sql, [*pool_params, *mine_params]):
        per_pool.setdefault(int(pool), []).append(
            {
                "node_name": node,
                "driver": driver,
                "pool": name,
                "devices": loads(devices) if isinstance(devices, str) else devices,
                "shared_counters": loads(counters) if isinstance(counters, str) else counters,
            }
        )
    if not per_pool:
        return
    held, held_params = pools.nodes_sql("c")
    taken = dra.taken_devices(
        loads(a) if isinstance(a, str) else a
        for (a,) in _rows(
            f"SELECT c.allocated FROM {CLAIMS} c WHERE c.state = 'allocated' AND {held}",
            held_params,
        )
    )
    for pool, rows in per_pool.items():
        summary = summaries.get(pool)
        if summary is not None:
            gpus = dra.gpus_of(rows, taken)
            summary.dra, summary.dra_gpus = dra.offers(gpus), len(gpus)
            summary.dra_tainted = sum(1 for g in gpus if any(d.blocking() for d in g.devices))


def fleet_nodes(
    pools: Pools,
    *,
    pool: int | None,
    names: Sequence[str] = (),
    labels: dict[str, str] | None = None,
) -> QuerySet[ObservedNode]:
    """The nodes of pool ``pool`` (its index in ``pools.rows``, -1 for those of no pool,
    None for the whole fleet) whose name contains each of ``names`` and that carry every
    label of ``labels``; those needing attention (not ready, cordoned, MIG failed or
    reconfiguring, not on their pool's config, GPU health at warning or worse) first, then
    by name. Each row carries ``pool_index`` and ``attention``. One pool's nodes are found
    by its labels (the labels' index), not by reading every node's."""
    table = f'"{NODES}"'
    # The rows show no labels, capacity or taints: their JSON stays in the database.
    nodes: QuerySet[Any] = (
        ObservedNode.objects.on_every_cluster()
        if pools.cluster_id is None
        else ObservedNode.objects.on(pools.cluster_id)
    ).defer("labels", "capacity", "taints", "row_hash", "resource_version")
    nodes = nodes.filter(gone_since__isnull=True)
    if pool is None:
        pool_sql, pool_params = pools.of_node(table)
        intended_sql, intended_params = pools.intended(table)
    else:
        nodes = _in_pool(nodes, pools, pool)
        pool_sql, pool_params = "%s", [pool]
        intended_sql, intended_params = "%s", [pools.rows[pool].mig_config if pool >= 0 else ""]
    attention = f"""(NOT "{NODES}"."ready" OR "{NODES}"."unschedulable"
        OR "{NODES}"."mig_config_state" IN ('failed', 'pending')
        OR ({intended_sql} <> '' AND "{NODES}"."mig_config" <> {intended_sql})
        OR ("{NODES}"."cluster_id", "{NODES}"."name") IN (
            SELECT cluster_id, node FROM {HEALTH} WHERE worst IN ('warning', 'critical')))"""
    nodes = nodes.annotate(
        pool_index=RawSQL(pool_sql, pool_params, output_field=IntegerField()),
        attention=RawSQL(
            attention, [*intended_params, *intended_params], output_field=BooleanField()
        ),
    )
    for name in names:
        nodes = nodes.filter(name__icontains=name)
    if labels:
        nodes = nodes.filter(labels__contains=labels)
    return nodes.order_by("-attention", "name")


def _in_pool(nodes: QuerySet[ObservedNode], pools: Pools, index: int) -> QuerySet[ObservedNode]:
    """The nodes of pool ``index`` (-1: of no pool), as ``fleet.membership`` holds them."""
    if index < 0:
        return holds_none(nodes, pools.rows, per_cluster=True)
    own = pools.rows[index]
    theirs = [p for p in pools.rows if p.cluster_id == own.cluster_id]
    return holds(nodes.filter(cluster=own.cluster), own, theirs)


def home_visit_read(user_pk: int, api: ApiStatus, teams: Sequence[Team]) -> Read:
    """The user's last visit (None on the first), then this one recorded: as of the poll the
    page shows, so work the next poll finds started after it is new next time (safe with two
    tabs at once). With it, in the same statement, whether any of the teams may have a
    time-limited grant, and whether another team's MIG change may hit one of them (a
    superset of what ``_grants`` and ``_changes_hitting`` show, so that on most visits
    neither of theirs runs). One row: (last visit, any grant, any hit)."""
    table = HomeVisit._meta.db_table
    grants, changes = QuotaChangeRequest._meta.db_table, MigChangeRequest._meta.db_table
    hit = MigChangeRequest.teams_hit.through._meta.db_table
    seen, team_pks = api.last_ok or timezone.now(), [team.pk for team in teams]
    # Both parts of the visit see the table as it was: the first reads the last visit, the
    # second records this one (never moving it back). When the page shows the same poll as
    # the last visit did, it proposes no row at all: an upsert whose update is filtered out
    # still locks the row, and so writes and flushes a transaction.
    return Read(
        f"WITH before AS (SELECT seen_at FROM {table} WHERE user_id = %s), "
        f"visit AS (INSERT INTO {table} (user_id, seen_at) SELECT %s, %s "
        "WHERE NOT EXISTS (SELECT 1 FROM before WHERE seen_at >= %s) "
        f"ON CONFLICT (user_id) DO UPDATE SET seen_at = EXCLUDED.seen_at "
        f"WHERE {table}.seen_at < EXCLUDED.seen_at) "
        "SELECT (SELECT seen_at FROM before), "
        f"EXISTS (SELECT 1 FROM {grants} WHERE team_id = ANY(%s) "
        "AND state = %s AND grant_until IS NOT NULL), "
        f"EXISTS (SELECT 1 FROM {hit} h JOIN {changes} c ON c.id = h.migchangerequest_id "
        "WHERE h.team_id = ANY(%s) AND c.team_id IS DISTINCT FROM h.team_id "
        "AND (c.state = ANY(%s) OR c.updated_at >= %s) "
        "AND c.state NOT IN ('rejected', 'cancelled'))",
        [
            *(user_pk, user_pk, seen, seen),
            *(team_pks, QuotaChangeRequest.State.APPROVED),
            *(team_pks, sorted(OPEN_STATES), timezone.now() - HIT_RECENTLY),
        ],
    )


def home_queues(namespaces: list[Any]) -> list[tuple[int, str]]:
    """The (cluster id, name) pairs of the ClusterQueues the namespaces' LocalQueues point
    at, in order."""
    return sorted(
        {
            (ns.cluster_id, lq.cluster_queue.name)
            for ns in namespaces
            for lq in ns.local_queues.all()
        }
    )


def trees_read() -> Read:
    """One row: the version of the cohort trees (``TREES_SQL``), what a page keeps what
    they lend under."""
    return Read(TREES_SQL, [])


def home_observed_reads(
    namespaces: list[Any], lenders_of: Sequence[tuple[int, str]] | None = None
) -> list[Read]:
    """What the page shows of the namespaces as last polled, each on its own cluster, read
    together (so all of its numbers are one poll's): the status of each one's ResourceQuota
    and LocalQueues and of their ClusterQueues; their Pending pods and running GPU pods; what
    the ClusterQueues ``lenders_of`` could borrow (None: every one of the namespaces'; the
    read is sent either way, for none when every one is kept); and what
    ``explain_waiting`` reads of them. Nothing without a namespace."""
    if not namespaces:
        return []
    queues = home_queues(namespaces)
    pairs = [(ns.cluster_id, ns.name) for ns in namespaces]
    return [
        Read(STATUSES_SQL, [*pairs_params(pairs), *pairs_params(queues)]),
        Read(PODS_SQL, pairs_params(pairs), ObservedPod),
        Read(LENDERS_SQL, pairs_params(queues if lenders_of is None else lenders_of)),
        *waiting_reads(pairs, timezone.now(), WORKLOADS_SHOWN),
    ]


def home_observed_from(
    rows: list[list[Any]],
) -> tuple[Statuses, list[ObservedPod], Lenders, WaitingRead]:
    """The rows of ``home_observed_reads``: the statuses by (cluster id, kind, namespace, name),
    the pods, what each ClusterQueue could borrow from, and what waits."""
    if not rows:
        return {}, [], {}, WaitingRead([], [])
    statuses, pods, lending, *waiting = rows
    lenders: Lenders = {}
    for cluster_id, name, flavor, resource, nominal, lending_limit, count in lending:
        lenders.setdefault((cluster_id, name), []).append(
            (flavor, resource, nominal, lending_limit, count)
        )
    # jsonb comes as text to a plain cursor (Django leaves decoding to its JSONField)
    observed = {
        (cluster_id, kind, ns, name): (json.loads(status) if status else None) or {}
        for cluster_id, kind, ns, name, status in statuses
    }
    return observed, pods, lenders, WaitingRead(*waiting)


def pending_counts_read(user_id: int, *, deciders_only: bool = False) -> Read:
    """Per kind of request ("mig", "quota", "policy": a cluster's MIG policy), the pending
    ones of others and the user's own: one statement for every kind (the navigation asks it
    on every page a decider opens). ``deciders_only``: counted only when the user holds a
    platform role (approver or admin: both decide), all 0 otherwise, for a read sent before
    the user's roles are known."""
    kinds = {"mig": MigChangeRequest, "quota": QuotaChangeRequest, "policy": MigPolicyChange}
    decides = (
        f" AND EXISTS (SELECT 1 FROM {PlatformRole._meta.db_table} "
        "WHERE user_id = %s AND role = ANY(%s))"
        if deciders_only
        else ""
    )
    roles = [PlatformRole.Role.APPROVER.value, PlatformRole.Role.ADMIN.value]
    sql = " UNION ALL ".join(
        "SELECT %s, count(*) FILTER (WHERE requested_by_id IS DISTINCT FROM %s), "
        f'count(*) FILTER (WHERE requested_by_id = %s) FROM "{model._meta.db_table}" '
        f"WHERE state = 'pending'{decides}"
        for model in kinds.values()
    )
    also = [user_id, roles] if deciders_only else []
    return Read(sql, [value for kind in kinds for value in (kind, user_id, user_id, *also)])


def pending_counts_from(rows: list[Any]) -> dict[str, dict[str, int]]:
    """The counts of ``pending_counts_read``'s rows."""
    return {kind: {"others": others, "own": own} for kind, others, own in rows}


def pending_counts(user_id: int) -> dict[str, dict[str, int]]:
    """``pending_counts_read``, asked on its own."""
    return pending_counts_from(read_together(pending_counts_read(user_id))[0])
