"""Why is it waiting: the waiting workloads, Pending pods and refused pod creations of some
namespaces, each with its explanation (the home page and the API show the same words)."""

from __future__ import annotations

import datetime as dt
import functools
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from changes.facts import custom_configs
from changes.models import MigChangeRequest
from cluster.models import (
    Cluster,
    ObservedCreateFailure,
    ObservedNode,
    ObservedObject,
    ObservedPod,
    ObservedPodGroup,
    ObservedWorkload,
)
from cluster.selectors import open_drift
from diagnostics.estimate import (
    Estimate,
    Line,
    NodeChange,
    QueueChange,
    Running,
    Runs,
    dated,
    estimate_pod,
    estimate_refused,
    estimate_workload,
)
from diagnostics.explain import (
    FleetView,
    Gang,
    Waiting,
    explain_admitted,
    explain_create_failure,
    explain_gang,
    explain_pod,
    explain_workload,
    fleet_view,
)
from fleet.membership import pool_of
from fleet.models import MigConfig, NodePool
from gpus.catalog import model_for_product, promised_resources
from portal.infra.round_trips import PAIRS, Read, pairs_params, read_together
from portal.vocabulary.quantity import QuantityError, parse_quantity
from queues.models import ClusterQueue, Cohort, LocalQueue
from queues.rules import quota_entries
from usage.runs import run_times

_QUOTA_NAMED = re.compile(r"exceeded quota: ([^,]+),")
CHANGING = ["approved", "running", "scheduled"]  # requests that are reconfiguring nodes
CHANGING_SQL = (  # written out, as the page's other reads of what waits
    f"SELECT * FROM {MigChangeRequest._meta.db_table} WHERE state = ANY(%s) "
    "ORDER BY created_at DESC"
)
REFUSALS_KEPT = dt.timedelta(minutes=15)  # a refused creation older than this is history
_PAIRS = f"(cluster_id, namespace) IN {PAIRS}"
_WORKLOADS_SQL = (
    f"SELECT * FROM {ObservedWorkload._meta.db_table} WHERE {_PAIRS} "
    "AND NOT finished ORDER BY admitted, namespace, created_at"
)
_PENDING_SQL = (
    f"SELECT * FROM {ObservedPod._meta.db_table} WHERE {_PAIRS} AND phase = 'Pending' "
    "ORDER BY namespace, name"
)
_FAILURES_SQL = (
    f"SELECT * FROM {ObservedCreateFailure._meta.db_table} WHERE {_PAIRS} "
    "AND last_seen >= %s ORDER BY namespace, kind, name"
)


@dataclass(frozen=True)
class WaitingRead:
    """What ``explain_waiting`` reads of some namespaces' observed rows, read by a caller with
    its own reads in one round trip (``waiting_reads``): their workloads not finished, their
    refused creations of the last REFUSALS_KEPT, and the MIG changes under way."""

    workloads: list[ObservedWorkload]
    failures: list[ObservedCreateFailure]
    changing: list[MigChangeRequest]
    # the rows of ``explainer_version_read``, when the explainer's view was due a check
    version: list[tuple[Any, ...]] | None = None

    def on(self, cluster_id: int) -> WaitingRead:
        """The rows of one cluster's namespaces and the changes under way there (the
        explainer's version stays whole, as ``explain_waiting`` reads it)."""
        return WaitingRead(
            [w for w in self.workloads if w.cluster_id == cluster_id],
            [f for f in self.failures if f.cluster_id == cluster_id],
            [c for c in self.changing if c.cluster_id == cluster_id],
            self.version,
        )


def waiting_reads(pairs: Sequence[tuple[int, str]], now: dt.datetime) -> list[Read]:
    """The reads of ``WaitingRead`` for these (cluster id, namespace) pairs, in its order:
    with, when the explainer's view of the fleet is due a check, the read of its version
    (so the check costs no round trip of its own)."""
    of = pairs_params(pairs)
    version = explainer_version_read() if _explainer_due() else None
    return [
        Read(_WORKLOADS_SQL, of, ObservedWorkload),
        Read(_FAILURES_SQL, [*of, now - REFUSALS_KEPT], ObservedCreateFailure),
        Read(CHANGING_SQL, [CHANGING], MigChangeRequest),
        *([version] if version is not None else []),
    ]


def read_waiting(pairs: Sequence[tuple[int, str]]) -> tuple[WaitingRead, list[ObservedPod]]:
    """What ``explain_waiting`` reads of these (cluster id, namespace) pairs and their
    Pending pods, every cluster's in one round trip (a caller explains each cluster's with
    ``WaitingRead.on`` and that cluster's pods)."""
    if not pairs:
        return WaitingRead([], [], []), []
    pods, *rows = read_together(
        Read(_PENDING_SQL, pairs_params(pairs), ObservedPod),
        *waiting_reads(pairs, timezone.now()),
    )
    return WaitingRead(*rows), pods


def waiting_in_namespaces(
    namespaces: list[str], cluster_id: int, pods: list[ObservedPod] | None = None
) -> tuple[list[ObservedWorkload], list[ObservedPod]]:
    """Workloads not finished and Pending pods of these namespaces of cluster ``cluster_id``
    (``pods``: the Pending pods, when the caller has read them already)."""
    # Written out, as the failures below: the ORM took longer to build it than to run it.
    workloads = list(
        ObservedWorkload.objects.raw(
            f"SELECT * FROM {ObservedWorkload._meta.db_table} WHERE namespace = ANY(%s) "
            "AND cluster_id = %s AND NOT finished ORDER BY admitted, namespace, created_at",
            [list(namespaces), cluster_id],
        )
    )
    if pods is None:
        pods = list(
            ObservedPod.objects.on(cluster_id)
            .filter(namespace__in=namespaces, phase="Pending")
            .order_by("namespace", "name")
        )
    return workloads, pods


# This process's view of each cluster's fleet: "version", what the views are built from as
# last read, and "checked", when; "built", cluster id -> its view with the version read
# before it was built.
_EXPLAINER: dict[str, Any] = {}


@functools.cache  # the tables and the drift filter are the code's
def _version_sql() -> tuple[str, tuple[Any, ...]]:
    """One statement that sums up what the explainer's view is built from, and its
    parameters: the nodes (how many, the last change, the last one gone), every pool's
    selector and MIG config, every MIG config, the changes reconfiguring nodes (each with
    its last update) and the open drift. When none of it changed, the view built last time
    is still right."""
    node, pool = ObservedNode._meta.db_table, NodePool._meta.db_table
    config, change = MigConfig._meta.db_table, MigChangeRequest._meta.db_table
    drift_sql, drift_params = open_drift().values_list("pk").query.sql_with_params()
    sql = (  # each list as its digest: the same answer to "changed?", a few bytes a check
        "SELECT nodes.*, "
        "(SELECT md5(array_agg(jsonb_build_array(id, node_selector, mig_config) ORDER BY id)"
        f"::text) FROM {pool}), "
        f"(SELECT md5(array_agg(jsonb_build_array(id, name, devices) ORDER BY id)::text) "
        f"FROM {config}), "
        "(SELECT md5(array_agg(jsonb_build_array(id, updated_at) ORDER BY id)::text) "
        f"FROM {change} WHERE state = ANY(%s)), "
        f"(SELECT md5(array_agg(open.id ORDER BY open.id)::text) FROM ({drift_sql}) AS open (id)) "
        f"FROM (SELECT count(id), max(last_changed), max(gone_since) FROM {node}) AS nodes"
    )
    return sql, (CHANGING, *drift_params)


def explainer_version_read() -> Read:
    """The read of what the explainer's view is built from (one row), for a page that sends
    it with its own reads (``WaitingRead.version``)."""
    sql, params = _version_sql()
    return Read(sql, params)


def _explainer_due() -> bool:
    """Whether this process is due a read of the view's version (never read, or read more
    than QM_EXPLAINER_RECHECK_SECONDS ago)."""
    checked = _EXPLAINER.get("checked")
    return checked is None or time.monotonic() - checked >= settings.QM_EXPLAINER_RECHECK_SECONDS


def _take_version(rows: Sequence[tuple[Any, ...]]) -> None:
    """The rows of ``explainer_version_read``, read just now: what the view is built from."""
    _EXPLAINER["version"] = tuple(rows[0])
    _EXPLAINER["checked"] = time.monotonic()


def explainer_view(cluster_id: int, version: Sequence[tuple[Any, ...]] | None = None) -> FleetView:
    """Cluster ``cluster_id``'s fleet as the explainer sees it, rebuilt only when the
    fleet, pools, configs, open changes or drift changed (one small statement otherwise,
    ``explainer_version_read``: ``version`` is its rows when the page read them already;
    it sums up every cluster's, so a change anywhere has each cluster's view built again
    when next asked for), and that checked at most every QM_EXPLAINER_RECHECK_SECONDS per
    process (the fleet itself is polled every QM_POLL_SECONDS: a second or two adds nothing
    to what a page can know). A view is kept with the version read before it was built, so
    it is never taken for newer than it is."""
    if version is not None:
        _take_version(version)
    elif _explainer_due():
        _take_version(read_together(explainer_version_read())[0])
    version_now = _EXPLAINER["version"]
    views: dict[int, tuple[Any, FleetView]] = _EXPLAINER.setdefault("built", {})
    built = views.get(cluster_id)
    if built is None or built[0] != version_now:
        built = (version_now, _build_explainer_view(cluster_id))
        views[cluster_id] = built
    return built[1]


def _build_explainer_view(cluster_id: int) -> FleetView:
    """One cluster's view: its nodes, pools, open drift and changes under way (another
    cluster's node of the same name is another node)."""
    nodes = list(ObservedNode.objects.on(cluster_id).filter(gone_since__isnull=True))
    pools = list(NodePool.objects.on(cluster_id))
    custom = custom_configs()
    cache: dict[tuple[str, str | None, int], dict[str, int] | None] = {}
    promised: dict[str, dict[str, int]] = {}
    for node in nodes:
        pool = pool_of(node.labels, pools)
        if pool is None or not pool.mig_config:
            continue
        model = model_for_product(node.gpu_product) if node.gpu_product else None
        key = (pool.mig_config, model, node.gpu_count)
        if key not in cache:
            cache[key] = promised_resources(
                pool.mig_config,
                node=node.name,
                model=model,
                gpu_count=node.gpu_count,
                custom=custom,
            )[0]
        if cache[key]:
            promised[node.name] = dict(cache[key] or {})
    changing = {}
    for pk, held in (
        MigChangeRequest.objects.on(cluster_id)
        .filter(state__in=CHANGING)
        .values_list("pk", "nodes")
    ):
        for name in held:
            changing[name] = pk
    drift = list(open_drift().filter(cluster_id=cluster_id))
    name = Cluster.objects.filter(pk=cluster_id).values_list("name", flat=True).first() or ""
    return fleet_view(nodes, [], pools, drift, changing, promised, cluster=name)


def gangs_of(pods: list[ObservedPod], cluster_id: int) -> dict[tuple[str, str], Gang]:
    """The gangs these pods of cluster ``cluster_id`` belong to, with where their members
    are (two queries)."""
    keys = {(p.namespace, p.group_name) for p in pods}
    if not keys:
        return {}
    namespaces = {k[0] for k in keys}
    names = {k[1] for k in keys}
    groups = {
        (g.namespace, g.name): g
        for g in ObservedPodGroup.objects.on(cluster_id).filter(
            namespace__in=namespaces, name__in=names
        )
    }
    members: dict[tuple[str, str], list[ObservedPod]] = {}
    for member in ObservedPod.objects.on(cluster_id).filter(
        namespace__in=namespaces, group_name__in=names
    ):
        members.setdefault((member.namespace, member.group_name), []).append(member)
    out = {}
    for key, group in groups.items():
        if key not in keys:
            continue
        running = [m for m in members.get(key, []) if m.phase == "Running"]
        held: dict[str, int] = {}
        for member in running:
            for resource, count in member.gpu_requests.items():
                held[resource] = held.get(resource, 0) + int(count)
        out[key] = Gang(
            name=group.name,
            queue=group.queue,
            min_member=group.min_member,
            running=len(running),
            pending=sum(1 for m in members.get(key, []) if m.phase == "Pending"),
            held=held,
            min_resources=group.min_resources,
            message=group.message,
        )
    return out


def _waiting(workload: ObservedWorkload, now: dt.datetime, pending: dict[str, int]) -> Waiting:
    since = workload.queued_at or workload.created_at
    requeue = workload.requeue_at
    return Waiting(
        waited_s=int((now - since).total_seconds()) if since else None,
        pending=pending.get(workload.cluster_queue),
        evictions=workload.evictions,
        evicted_reason=workload.evicted_reason,
        evicted=workload.evicted_at is not None,
        requeue_in_s=int((requeue - now).total_seconds()) if requeue and requeue > now else None,
    )


def _pending_per_cluster_queue(
    workloads: list[ObservedWorkload], cluster_id: int
) -> dict[str, int]:
    """ClusterQueue of cluster ``cluster_id`` -> its status.pendingWorkloads, read (one
    query) only when a workload waits without a word from Kueue and without a place in line."""
    if not any(not w.admitted and not w.message and w.position is None for w in workloads):
        return {}
    return {
        name: int(status.get("pendingWorkloads") or 0)
        for name, status in ObservedObject.objects.on(cluster_id)
        .filter(kind="ClusterQueue")
        .values_list("name", "status")
    }


def _explain_pods(
    pods: list[ObservedPod], cluster_id: int, version: list[tuple[Any, ...]] | None = None
) -> None:
    gangs = gangs_of([p for p in pods if p.group_name], cluster_id)
    view = explainer_view(cluster_id, version)
    for pod in pods:
        gang = gangs.get((pod.namespace, pod.group_name))
        if gang is not None:
            pod.why = explain_gang(  # type: ignore[attr-defined]
                namespace=pod.namespace, name=pod.name, gang=gang
            )
        else:
            pod.why = explain_pod(  # type: ignore[attr-defined]
                namespace=pod.namespace,
                name=pod.name,
                requests=pod.gpu_requests,
                message=pod.pending_message,
                fleet=view,
                node_name=pod.node_name,
                defaulted=pod.limit_defaulted,
            )
        if pod.workload_name:
            where = f" in queue {pod.queue_name}" if pod.queue_name else ""
            pod.why.belongs_to = f"workload {pod.workload_name}{where}"  # type: ignore[attr-defined]
        elif pod.queue_name:
            pod.why.belongs_to = f"queue {pod.queue_name}"  # type: ignore[attr-defined]


def explain_waiting(
    namespaces: list[str],
    *,
    quotas: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    cluster_id: int,
    pods: list[ObservedPod] | None = None,
    read: WaitingRead | None = None,
) -> tuple[list[ObservedWorkload], list[ObservedPod], list[ObservedCreateFailure]]:
    """What waits in these namespaces, each waiting workload and pod with ``.why`` (an
    ``Explanation``; None for an admitted workload with nothing in its way) and
    ``.estimate`` (an ``Estimate``; None for an admitted workload): the home page and the
    API show the same words. An admitted workload whose pod is stuck gets the
    pod's explanation (Kueue names the workload on its pods). ``quotas``, (namespace,
    ResourceQuota) -> its observed status, is what a page already read (its bars count
    from it); without it, the quotas a refusal names are read here (one query). ``pods``
    are the Pending pods of these namespaces, ordered by namespace and name, when the caller
    read them already (the home, with its running ones). ``cluster_id``: the cluster the
    namespaces are on; everything the explanations and estimates count is read there (a
    page showing several clusters asks once per cluster). ``read``: their workloads, refused
    creations and the cluster's changes under way, when the caller read them already (with
    ``pods``, and ``WaitingRead.on`` the cluster)."""
    if read is None:
        workloads, pods = waiting_in_namespaces(namespaces, cluster_id, pods)
    elif pods is None:
        raise ValueError("a caller that read the namespaces' rows reads their pods too")
    else:
        workloads = read.workloads
    now = timezone.now()
    cq_of: dict[tuple[str, str], str] = {}
    if any(not w.cluster_queue for w in workloads):
        cq_of = {
            (ns, lq): cq
            for ns, lq, cq in LocalQueue.objects.filter(
                namespace__name__in=namespaces, namespace__cluster_id=cluster_id
            ).values_list("namespace__name", "name", "cluster_queue__name")
        }
    version = None if read is None else read.version
    if pods:
        _explain_pods(pods, cluster_id, version)
    elif version is not None:  # the page sent the check: it counts, though no pod needs the view
        _take_version(version)
    stuck = {(p.namespace, p.workload_name): p for p in pods if p.workload_name}
    pending = _pending_per_cluster_queue(workloads, cluster_id)
    for workload in workloads:
        cluster_queue = workload.cluster_queue or cq_of.get(
            (workload.namespace, workload.queue_name), ""
        )
        pod = stuck.get((workload.namespace, workload.name))
        if workload.admitted:
            since = workload.admitted_at
            workload.why = explain_admitted(  # type: ignore[attr-defined]
                cluster_queue=cluster_queue,
                pod=pod.name if pod is not None else "",
                pod_why=getattr(pod, "why", None),
                pods_ready=workload.pods_ready,
                admitted_s=int((now - since).total_seconds()) if since else None,
            )
            continue
        workload.cluster_queue = cluster_queue
        workload.why = explain_workload(  # type: ignore[attr-defined]
            namespace=workload.namespace,
            name=workload.name,
            queue=workload.queue_name,
            reason=workload.reason,
            message=workload.message,
            position=workload.position,
            cluster_queue=cluster_queue,
            waiting=_waiting(workload, now, pending),
        )
    found = None if read is None else read.failures
    failures = _create_failures(namespaces, now, quotas, cluster_id, found)
    changing = None if read is None else read.changing
    attach_estimates(workloads, pods, failures, now, cluster_id, changing)
    return workloads, pods, failures


def observed_quotas(
    namespaces: list[str], cluster_id: int
) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, ResourceQuota) -> its status as last polled on cluster ``cluster_id``
    (``hard``, ``used``)."""
    return {
        (ns, name): status or {}
        for ns, name, status in ObservedObject.objects.on(cluster_id)
        .filter(kind="ResourceQuota", namespace__in=namespaces)
        .values_list("namespace", "name", "status")
    }


def _create_failures(
    namespaces: list[str],
    now: dt.datetime,
    quotas: Mapping[tuple[str, str], Mapping[str, Any]] | None,
    cluster_id: int,
    found: list[ObservedCreateFailure] | None = None,
) -> list[ObservedCreateFailure]:
    """Controllers whose pods the API server refuses, counted against the quotas as last
    polled. The poll drops a failure whose Job is gone; the Job controller retries with
    back-off, so an event older than that is history (a kind the poll cannot check).
    ``found``: the failures, when the caller read them already."""
    failures = found
    if failures is None:
        failures = list(
            ObservedCreateFailure.objects.raw(
                f"SELECT * FROM {ObservedCreateFailure._meta.db_table} "
                "WHERE namespace = ANY(%s) AND last_seen >= %s "
                "AND cluster_id = %s ORDER BY namespace, kind, name",
                [list(namespaces), now - REFUSALS_KEPT, cluster_id],
            )
        )
    if failures and quotas is None:
        quotas = observed_quotas(sorted({f.namespace for f in failures}), cluster_id)
    for failure in failures:
        failure.why = explain_create_failure(  # type: ignore[attr-defined]
            namespace=failure.namespace,
            kind=failure.kind,
            name=failure.name,
            message=failure.message,
            observed=_refusing_quota(failure, quotas or {}),
        )
    return failures


def _refusing_quota(
    failure: ObservedCreateFailure, quotas: Mapping[tuple[str, str], Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The observed status of the ResourceQuota a refusal names, if the poll saw it."""
    named = _QUOTA_NAMED.search(failure.message)
    return quotas.get((failure.namespace, named[1])) if named else None


def _amount(value: Any) -> float:
    try:
        return float(parse_quantity(str(value)))
    except QuantityError:
        return 0.0


def _quotas(cq: ClusterQueue) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Per resource (all flavors together): nominal quota, what it may lend, the most it may
    borrow (no entry: no limit)."""
    nominal: dict[str, float] = {}
    lend: dict[str, float] = {}
    borrow: dict[str, float] = {}
    unlimited: set[str] = set()
    for _, _, quota in quota_entries(cq.resource_groups):
        name = quota["name"]
        amount = _amount(quota.get("nominalQuota", 0))
        nominal[name] = nominal.get(name, 0) + amount
        lent = quota.get("lendingLimit")
        lend[name] = lend.get(name, 0) + (amount if lent is None else _amount(lent))
        if quota.get("borrowingLimit") is None:
            unlimited.add(name)
        else:
            borrow[name] = borrow.get(name, 0) + _amount(quota["borrowingLimit"])
    return nominal, lend, {r: n for r, n in borrow.items() if r not in unlimited}


def _used(held: list[ObservedWorkload]) -> dict[str, float]:
    used: dict[str, float] = {}
    for workload in held:
        for resource, amount in (workload.requests or {}).items():
            used[resource] = used.get(resource, 0) + _amount(amount)
    return used


def _root(cohort_id: int | None, cohorts: dict[int, Cohort]) -> int | None:
    """The top of the cohort tree a cohort is in (a cycle, which Kueue refuses, stops it)."""
    seen: set[int] = set()
    while cohort_id is not None and cohort_id not in seen and cohort_id in cohorts:
        seen.add(cohort_id)
        parent = cohorts[cohort_id].parent_id
        if parent is None:
            return cohort_id
        cohort_id = parent
    return cohort_id


def _capacity(
    cq: ClusterQueue,
    queues: dict[str, ClusterQueue],
    admitted: dict[str, list[ObservedWorkload]],
    cohorts: dict[int, Cohort],
) -> tuple[dict[str, float], dict[str, float]]:
    """What ``cq`` can admit now and at the most: its nominal quota plus what it could
    borrow in its cohort tree (the other queues' lendable quota they do not use now, or all
    of it, and the cohorts' own), up to its borrowing limits (the limits of the cohorts in
    between are not counted)."""
    nominal, _, limits = _quotas(cq)
    root = _root(cq.cohort_id, cohorts)
    if root is None:
        return nominal, nominal
    spare: dict[str, float] = {}
    most: dict[str, float] = {}
    for peer in queues.values():
        if peer.pk == cq.pk or _root(peer.cohort_id, cohorts) != root:
            continue
        own, lend, _ = _quotas(peer)
        used = _used(admitted.get(peer.name, []))
        for resource, amount in lend.items():  # what it does not use, up to its lending limit
            unused = max(0.0, own.get(resource, 0) - used.get(resource, 0))
            spare[resource] = spare.get(resource, 0) + min(amount, unused)
            most[resource] = most.get(resource, 0) + amount
    tree = [c for pk, c in cohorts.items() if _root(pk, cohorts) == root]
    for _, _, quota in (e for c in tree for e in quota_entries(c.resource_groups)):
        name, amount = quota["name"], _amount(quota.get("nominalQuota", 0))
        spare[name] = spare.get(name, 0) + amount
        most[name] = most.get(name, 0) + amount

    def plus(extra: dict[str, float]) -> dict[str, float]:
        return {
            r: n + min(extra.get(r, 0), limits.get(r, float("inf"))) for r, n in nominal.items()
        }

    return plus(spare), plus(most)


def _queue_changes(
    changes: list[MigChangeRequest], now: dt.datetime
) -> dict[str, list[QueueChange]]:
    """ClusterQueue -> the approved MIG changes not done yet that raise its quota."""
    out: dict[str, list[QueueChange]] = {}
    for change in changes:
        adds: dict[str, dict[str, float]] = {}
        for item in change.queue_changes or []:
            more = _amount(item.get("to", 0)) - _amount(item.get("from", 0))
            if more > 0:
                per = adds.setdefault(item.get("cluster_queue", ""), {})
                per[item.get("resource", "")] = per.get(item.get("resource", ""), 0) + more
        for queue, added in adds.items():
            out.setdefault(queue, []).append(
                QueueChange(change.pk, list(change.nodes), added, *_timing(change, now))
            )
    return out


def _timing(change: MigChangeRequest, now: dt.datetime) -> tuple[int | None, bool]:
    start = change.window_start
    starts_in = int((start - now).total_seconds()) if start and start > now else None
    return starts_in, change.state == MigChangeRequest.State.RUNNING


def _node_changes(
    changes: list[MigChangeRequest], now: dt.datetime, cluster_id: int
) -> list[NodeChange]:
    """What each node of an approved MIG change on cluster ``cluster_id`` not done yet offers
    after it (two queries, only when there is such a change)."""
    changes = [
        c
        for c in changes
        if c.kind == MigChangeRequest.Kind.MIG and c.target_config and c.cluster_id == cluster_id
    ]
    if not changes:
        return []
    names = {n for c in changes for n in c.nodes}
    nodes = {n.name: n for n in ObservedNode.objects.on(cluster_id).filter(name__in=names)}
    custom = custom_configs()
    out = []
    for change in changes:
        for name in change.nodes:
            node = nodes.get(name)
            if node is None:
                continue
            model = model_for_product(node.gpu_product) if node.gpu_product else None
            offers, _ = promised_resources(
                change.target_config,
                node=name,
                model=model,
                gpu_count=node.gpu_count,
                custom=custom,
            )
            if offers:
                out.append(
                    NodeChange(change.pk, name, change.target_config, offers, *_timing(change, now))
                )
    return out


LINE_FIELDS = [  # what a line needs of every workload in it (not Kueue's long messages)
    "namespace",
    "name",
    "queue_name",
    "cluster_queue",
    "admitted",
    "requests",
    "priority",
    "position",
    "created_at",
    "queued_at",
    "admitted_at",
]


class _Queues:
    """The ClusterQueues that waiting workloads wait in, with everything in them (waiting
    and admitted, every team's: their places and quota count, never their names), read in a
    fixed number of queries."""

    def __init__(self, waiting: list[ObservedWorkload], now: dt.datetime, cluster_id: int) -> None:
        self.now = now
        self.queues = {cq.name: cq for cq in ClusterQueue.objects.on(cluster_id)}
        self.cohorts = {c.pk: c for c in Cohort.objects.on(cluster_id)}
        wanted = {w.cluster_queue for w in waiting if w.cluster_queue}
        tree_of = {q: _root(cq.cohort_id, self.cohorts) for q, cq in self.queues.items()}
        trees = {tree_of[q] for q in wanted if q in tree_of} - {None}
        self.names = wanted | {q for q, tree in tree_of.items() if tree in trees}
        self.local: dict[tuple[str, str], tuple[str, str]] = {
            (ns, lq): (cq, stop)
            for ns, lq, cq, stop in LocalQueue.objects.filter(
                Q(cluster_queue__name__in=self.names)
                | Q(namespace__name__in={w.namespace for w in waiting}),
                namespace__cluster_id=cluster_id,
            ).values_list("namespace__name", "name", "cluster_queue__name", "stop_policy")
        }
        self.lines: dict[str, Line] = {}
        self.order: dict[str, dict[tuple[str, str], int]] = {}
        self.admitted: dict[str, list[ObservedWorkload]] = {}
        self.in_line: dict[str, list[ObservedWorkload]] = {}
        for other in (
            ObservedWorkload.objects.on(cluster_id)
            .filter(finished=False)
            .filter(
                Q(cluster_queue__in=self.names)
                | Q(queue_name__in={lq for _, lq in self.local}, admitted=False)
            )
            .only(*LINE_FIELDS)
        ):
            queue = (
                other.cluster_queue or self.local.get((other.namespace, other.queue_name), ("",))[0]
            )
            if queue in self.names:
                into = self.admitted if other.admitted else self.in_line
                into.setdefault(queue, []).append(other)

    def place(
        self, workload: ObservedWorkload, changes: dict[str, list[QueueChange]]
    ) -> tuple[Line | None, int | None, str]:
        """The line ``workload`` waits in (built once per ClusterQueue), its place in it, and
        what stops its LocalQueue ("" when nothing does)."""
        stop = self.local.get((workload.namespace, workload.queue_name), ("", "None"))[1]
        held = f"LocalQueue {workload.queue_name} is stopped ({stop})" if stop != "None" else ""
        cq = self.queues.get(workload.cluster_queue)
        if cq is None:
            return None, 0, held
        if cq.name not in self.lines:
            self.lines[cq.name] = self._line(cq, changes)
        order = self.order[cq.name]
        return self.lines[cq.name], order.get((workload.namespace, workload.name)), held

    def _line(self, cq: ClusterQueue, changes: dict[str, list[QueueChange]]) -> Line:
        others = sorted(self.in_line.get(cq.name, []), key=_order)
        self.order[cq.name] = {(o.namespace, o.name): i for i, o in enumerate(others)}
        now, most = _capacity(cq, self.queues, self.admitted, self.cohorts)
        return Line(
            cluster_queue=cq.name,
            capacity=now,
            most=most,
            running=[
                Running(o.requests or {}, (self.now - (o.admitted_at or self.now)).total_seconds())
                for o in self.admitted.get(cq.name, [])
            ],
            waiting=[o.requests or {} for o in others],
            strict=cq.queueing_strategy == ClusterQueue.QueueingStrategy.STRICT_FIFO,
            stopped=f"ClusterQueue {cq.name} is stopped ({cq.stop_policy})"
            if cq.stop_policy != "None"
            else "",
            changes=changes.get(cq.name, []),
        )


def _order(workload: ObservedWorkload) -> tuple[int, int, dt.datetime, str]:
    """The order of a ClusterQueue's line: Kueue's (its visibility API), and for those it
    gives no place, Kueue's rule after them: priority, then age."""
    since = workload.queued_at or workload.created_at or dt.datetime.max.replace(tzinfo=dt.UTC)
    if workload.position is not None:
        return (0, workload.position, since, f"{workload.namespace}/{workload.name}")
    return (1, -workload.priority, since, f"{workload.namespace}/{workload.name}")


def attach_estimates(
    workloads: list[ObservedWorkload],
    pods: list[ObservedPod],
    failures: list[ObservedCreateFailure],
    now: dt.datetime,
    cluster_id: int,
    changing: list[MigChangeRequest] | None = None,
) -> None:
    """``.estimate`` on each waiting workload, Pending pod and refused creation of cluster
    ``cluster_id`` (None on an admitted workload), dated from ``now``: a fixed number of
    queries however much waits or ran before, each line counted on that cluster.
    ``changing``: the MIG changes under way, when the caller read them."""
    _estimate_all(workloads, pods, failures, now, cluster_id, changing)
    for item in [*workloads, *pods, *failures]:
        if item.estimate is not None:  # type: ignore[attr-defined]
            item.estimate = dated(item.estimate, now)  # type: ignore[attr-defined]


def _estimate_all(
    workloads: list[ObservedWorkload],
    pods: list[ObservedPod],
    failures: list[ObservedCreateFailure],
    now: dt.datetime,
    cluster_id: int,
    changing: list[MigChangeRequest] | None = None,
) -> None:
    waiting = [w for w in workloads if not w.admitted]
    for workload in workloads:
        workload.estimate = None  # type: ignore[attr-defined]
    changes: list[MigChangeRequest] = []
    if waiting or pods:
        found = (
            list(MigChangeRequest.objects.raw(CHANGING_SQL, [CHANGING]))
            if changing is None
            else changing
        )
        changes = [c for c in found if c.cluster_id == cluster_id]
    if waiting:
        queues = _Queues(waiting, now, cluster_id)
        raised = _queue_changes(changes, now)
        by_queue, by_namespace = run_times(
            cluster_id=cluster_id,
            cluster_queues=[w.cluster_queue for w in waiting],
            namespaces=[w.namespace for w in waiting],
            now=now,
        )
        for workload in waiting:
            requeue = workload.requeue_at
            back = int((requeue - now).total_seconds()) if requeue and requeue > now else None
            line, place, held = queues.place(workload, raised)
            workload.estimate = estimate_workload(  # type: ignore[attr-defined]
                requests=workload.requests or {},
                line=line,
                place=place,
                exact=workload.position is not None,
                held=held,
                histories=[
                    Runs(by_queue.get(workload.cluster_queue, []), workload.cluster_queue),
                    Runs(
                        by_namespace.get(workload.namespace, []), f"namespace {workload.namespace}"
                    ),
                ],
                never=workload.why.never,  # type: ignore[attr-defined]
                requeue_in_s=back,
            )
    _estimate_pods(workloads, pods, _node_changes(changes, now, cluster_id) if pods else [])
    for failure in failures:
        failure.estimate = estimate_refused(never=failure.why.never)  # type: ignore[attr-defined]


def _estimate_pods(
    workloads: list[ObservedWorkload], pods: list[ObservedPod], changes: list[NodeChange]
) -> None:
    """A pod of a waiting workload waits as its workload does; any other, for the nodes."""
    of = {(w.namespace, w.name): w for w in workloads}
    for pod in pods:
        workload = of.get((pod.namespace, pod.workload_name)) if pod.workload_name else None
        mine: Estimate | None = getattr(workload, "estimate", None)
        if mine is not None:
            pod.estimate = mine  # type: ignore[attr-defined]
            continue
        why = pod.why  # type: ignore[attr-defined]
        pod.estimate = estimate_pod(  # type: ignore[attr-defined]
            wanted=pod.gpu_requests or {},
            never=why.never,
            topic=why.topic,
            changes=changes,
            gang=bool(pod.group_name),
            admitted_workload=pod.workload_name if workload is not None else "",
        )
