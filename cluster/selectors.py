"""Reads of what the loop recorded (the same for every signed-in user: the cluster's state is
not team data; team-scoped reads filter by namespace where they use it)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone

from cluster import dra
from cluster.discovery import render_target
from cluster.models import (
    AppliedObject,
    Cluster,
    Drift,
    ObservedDeviceClass,
    ObservedNode,
    ObservedObject,
    ObservedResourceClaim,
    ObservedResourceSlice,
    SyncRun,
)
from cluster.scope import cluster_choice, cluster_id_of, clusters_read
from portal.access.permissions import is_platform_admin, request_facts_from, request_facts_read
from portal.infra.round_trips import Read, read_together
from portal.vocabulary.names import PodNames


def amount_sql(value: str) -> str:
    """SQL: the JSON value ``value`` of a node's allocatable or allocated (a number, or a
    string of digits) as a bigint; anything else is 0, as ``cluster.decode.gpu_offer``
    counts it. For sums over the fleet in the database."""
    text = f"({value} #>> '{{}}')"
    return f"(CASE WHEN {text} ~ '^[0-9]{{1,18}}$' THEN {text}::bigint ELSE 0 END)"


def open_drift() -> QuerySet[Drift]:
    """Every cluster's open drift (a caller showing one cluster says ``.on(cluster)``)."""
    return (
        Drift.objects.on_every_cluster()
        .filter(resolved_at__isnull=True)
        .order_by("kind", "subject")
    )


def open_drift_reads(cluster_id: int, shown: int) -> list[Read]:
    """The cluster's first ``shown`` open drift rows as ``open_drift`` orders them, and how
    many there are (for a page that reads them with others in one round trip)."""
    table = Drift._meta.db_table
    where = f"FROM {table} WHERE resolved_at IS NULL AND cluster_id = %s"
    return [
        Read(f"SELECT * {where} ORDER BY kind, subject LIMIT %s", [cluster_id, shown], Drift),
        Read(f"SELECT count(*) {where}", [cluster_id]),
    ]


def cluster_runs(cluster: Cluster | int) -> QuerySet[SyncRun]:
    """The polls of ``cluster`` (a ``Cluster`` or its id: the caller that means the
    settings' one says so, ``settings_cluster()``), the newest first."""
    return SyncRun.objects.on(cluster).order_by("-started_at")


def last_sync(cluster: Cluster | int) -> SyncRun | None:
    """The newest poll of ``cluster``, whatever its outcome."""
    return cluster_runs(cluster).first()


def apply_problems() -> QuerySet[AppliedObject]:
    """Every cluster's objects whose last apply did not succeed."""
    return (
        AppliedObject.objects.on_every_cluster()
        .exclude(outcome=AppliedObject.Outcome.APPLIED)
        .order_by("kind", "name")
    )


def apply_warnings() -> QuerySet[AppliedObject]:
    """Every cluster's objects whose last apply the API server warned about."""
    return AppliedObject.objects.on_every_cluster().exclude(warnings=[]).order_by("kind", "name")


def apply_notices_read() -> Read:
    """The objects not applied or warned about, as ``apply_notices`` reads them (for a page
    that reads them with others in one round trip)."""
    return Read(
        f"SELECT * FROM {AppliedObject._meta.db_table} "
        "WHERE outcome <> %s OR warnings <> '[]'::jsonb ORDER BY kind, name",
        [AppliedObject.Outcome.APPLIED],
        AppliedObject,
    )


def apply_notices(
    read: list[AppliedObject] | None = None,
) -> tuple[list[AppliedObject], list[AppliedObject]]:
    """The objects not applied, and those whose last apply the API server warned about
    (one query; none when the page read them already: ``read``, the rows of
    ``apply_notices_read``)."""
    rows = read_together(apply_notices_read())[0] if read is None else read
    problems = [r for r in rows if r.outcome != AppliedObject.Outcome.APPLIED]
    return problems, [r for r in rows if r.warnings]


def notices_for(names: PodNames, rows: list[AppliedObject]) -> tuple[list[AppliedObject], int]:
    """The apply notices a user may read (``names``: ``pod_names_for(user)``): cluster-wide
    objects, and the namespaced ones of their own teams' namespaces on the row's cluster
    (platform admins and approvers: every one); and how many of other teams' were left out
    (counted, never named)."""
    shown = [row for row in rows if not row.namespace or names.named(row.cluster_id, row.namespace)]
    return shown, len(rows) - len(shown)


@dataclass(frozen=True)
class ApiStatus:
    """What the polls tell of the Kubernetes API: reachable or since when not."""

    state: str  # "ok", "unreachable", "stale" (nobody polls), "never" (no poll yet)
    since: dt.datetime | None  # unreachable: the first poll that got no answer
    last_ok: dt.datetime | None  # the state on the pages is as of this poll
    message: str
    latest: SyncRun | None = None  # the newest poll, whatever its outcome

    @property
    def ok(self) -> bool:
        return self.state == "ok"


# How many recent polls are read to find where an outage began.
RECENT_POLLS = 50


def api_status(cluster: Cluster | int, *, now: dt.datetime | None = None) -> ApiStatus:
    """What the recent polls of ``cluster`` tell (never a call to the API; one query)."""
    return status_of(list(cluster_runs(cluster)[:RECENT_POLLS]), now=now or timezone.now())


def status_of(runs: list[SyncRun], *, now: dt.datetime) -> ApiStatus:
    """From a cluster's recent polls, the newest first: a poll that failed, or one still
    without an answer after a poll interval, makes the API unreachable since the first such
    poll after the last good one."""
    interval = dt.timedelta(seconds=settings.QM_POLL_SECONDS)
    latest = runs[0] if runs else None
    last_ok = next((run for run in runs if run.ok), None)
    ok_at = last_ok.started_at if last_ok else None
    failing = [
        run
        for run in runs
        if (ok_at is None or run.started_at > ok_at)
        and (run.error or (run.finished_at is None and now - run.started_at > interval))
    ]
    if failing:
        first, newest = failing[-1], failing[0]
        waited = int((now - newest.started_at).total_seconds())
        why = newest.error or f"no answer for {waited} s"
        return ApiStatus("unreachable", first.started_at, ok_at, why, latest)
    if last_ok is None:
        return ApiStatus("never", None, None, "the cluster has not been polled yet", latest)
    if now - last_ok.started_at > 3 * interval:
        return ApiStatus(
            "stale",
            None,
            ok_at,
            f"no poll for {int((now - last_ok.started_at).total_seconds())} s "
            "(are the worker and beat running?)",
            latest,
        )
    age = int((now - last_ok.started_at).total_seconds())
    return ApiStatus("ok", None, ok_at, f"polled {age} s ago", latest)


@dataclass(frozen=True)
class ClusterStatus:
    """How fresh one cluster's data is: its :class:`ApiStatus` with the cluster it is of."""

    cluster: Cluster
    state: str  # as ApiStatus.state: "ok", "unreachable", "stale", "never"
    since: dt.datetime | None  # unreachable: the first poll that got no answer
    last_ok_at: dt.datetime | None  # the cluster's data on the pages is as of this poll
    message: str
    latest: SyncRun | None = None

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    @property
    def api(self) -> ApiStatus:
        """The same as ``api_status(cluster)`` tells."""
        return ApiStatus(self.state, self.since, self.last_ok_at, self.message, self.latest)


# The newest polls of every cluster that ``status_of`` reads: of the newest RECENT_POLLS, those
# since the last answered one (it included). The same answer as all of them: no poll before
# the last answered one counts. A cluster that answers reads one or two rows, not fifty; the
# index (cluster, -started_at) read once per cluster.
_RECENT_RUNS = f"""
    SELECT run.* FROM "{Cluster._meta.db_table}" AS cluster CROSS JOIN LATERAL (
        SELECT * FROM "{SyncRun._meta.db_table}" WHERE cluster_id = cluster.id
        AND started_at >= coalesce((
            SELECT started_at FROM "{SyncRun._meta.db_table}" WHERE cluster_id = cluster.id
            AND finished_at IS NOT NULL AND error = '' ORDER BY started_at DESC LIMIT 1
        ), '-infinity')
        ORDER BY started_at DESC LIMIT %s
    ) AS run
"""  # the table names from the models, the limit a parameter


def recent_runs_read() -> Read:
    """The recent polls ``cluster_statuses`` reads, for a page that reads them with others in
    one round trip (``cluster_statuses(runs=rows)``)."""
    return Read(_RECENT_RUNS, [RECENT_POLLS], SyncRun)


def statuses_of(request: HttpRequest, read: Sequence[SyncRun] | None = None) -> list[ClusterStatus]:
    """``cluster_statuses`` of the request's clusters (``cluster_choice``), read once per
    request (``read``: the recent polls, when the page read them already): the header, the
    banner and a page's sections share it."""
    found = getattr(request, "_cluster_statuses", None)
    if found is None:
        found = cluster_statuses(clusters=cluster_choice(request).clusters, read=read)
        request._cluster_statuses = found  # type: ignore[attr-defined]
    return list(found)


@dataclass(frozen=True)
class FirstRead:
    """A read an app above this one sends with every page's first round trip: ``read``
    gives it for a request (None: nothing to read for this one), ``keep`` keeps its rows
    for the rest of the request."""

    read: Callable[[HttpRequest], Read | None]
    keep: Callable[[HttpRequest, list[Any]], None]


_also_first: list[FirstRead] = []


def sends_first(first: FirstRead) -> None:
    """Send ``first`` with every page's first round trip (``first_reads``): what the layout
    shows of an app above this one (the navigation's count of the decisions waiting) then
    waits for the database with the page's own reads, not after them."""
    if first not in _also_first:
        _also_first.append(first)


def first_reads(request: HttpRequest, *also: Read) -> list[list[Any]]:
    """A page's first round trip: what every page shows (the clusters the user may see for
    the switcher's choice, their polls for the header's freshness, the user's roles and
    unread count, and what the apps above send first: ``sends_first``), kept for the rest
    of the request, with the reads ``also``; returns their rows."""
    facts = request_facts_read(request.user)
    firsts = [(first, read) for first in _also_first if (read := first.read(request)) is not None]
    cluster_rows, runs, *more = read_together(
        clusters_read(request.user),
        recent_runs_read(),
        *also,
        *(read for _, read in firsts),
        *([facts] if facts is not None else []),
    )
    if facts is not None:
        request_facts_from(request.user, more.pop())
    for first, _ in reversed(firsts):
        first.keep(request, more.pop())
    cluster_choice(request, cluster_rows)
    statuses_of(request, runs)
    return more


def cluster_statuses(
    *,
    now: dt.datetime | None = None,
    clusters: Sequence[Cluster] | None = None,
    read: Sequence[SyncRun] | None = None,
) -> list[ClusterStatus]:
    """Every registered cluster's status (``clusters``: every one, already read), by name,
    from its recent polls (two queries whatever the number of clusters, one when the
    clusters are given, none when the polls are too: ``read``, the rows of
    ``recent_runs_read``; what every page shows)."""
    now = now or timezone.now()
    if clusters is None:
        clusters = list(Cluster.objects.defer("credential").order_by("name"))
    runs: dict[int | None, list[SyncRun]] = {}
    for run in SyncRun.objects.raw(_RECENT_RUNS, [RECENT_POLLS]) if read is None else read:
        runs.setdefault(run.cluster_id, []).append(run)
    out = []
    for cluster in clusters:
        mine = sorted(runs.get(cluster.pk, []), key=lambda r: r.started_at, reverse=True)
        api = status_of(mine, now=now)
        out.append(
            ClusterStatus(cluster, api.state, api.since, api.last_ok, api.message, api.latest)
        )
    return out


def list_clusters_for_user(user: Any) -> QuerySet[Cluster]:
    """Every registered cluster, for platform admins only (PermissionDenied otherwise)."""
    if not is_platform_admin(user):
        raise PermissionDenied("Only platform admins see the clusters.")
    return Cluster.objects.defer("credential").order_by("name")


def get_cluster_for_user(user: Any, name: str) -> Cluster:
    """One cluster by name (404), for platform admins only."""
    return get_object_or_404(list_clusters_for_user(user), name=name)


def discovery_age(cluster: Cluster, *, now: dt.datetime | None = None) -> str:
    """How fresh the discovered facts are: "fresh", "stale" (older than three polls) or
    "never" (not discovered yet)."""
    if cluster.discovered_at is None:
        return "never"
    now = now or timezone.now()
    limit = dt.timedelta(seconds=3 * settings.QM_POLL_SECONDS)
    return "fresh" if now - cluster.discovered_at <= limit else "stale"


def rendering_for(cluster: Cluster) -> tuple[str, str]:
    """The (queue backend, Kueue version) the portal renders for ``cluster``: the settings'
    choice, following what the cluster was discovered to serve."""
    return render_target(
        cluster.discovered_facts(),
        backend=settings.QM_QUEUE_BACKEND,
        version=settings.QM_KUEUE_API_VERSION,
    )


def loop_target() -> tuple[str, str]:
    """What the loop of the settings' cluster renders, applies and reads: the settings'
    backend and Kueue version, following what that cluster was last discovered to serve (a
    Kueue upgraded to 0.20 serves no v1beta1 any more: the portal moves to v1beta2)."""
    cluster = Cluster.objects.filter(connection=Cluster.Connection.SETTINGS).first()
    if cluster is None:
        return settings.QM_QUEUE_BACKEND, settings.QM_KUEUE_API_VERSION
    return rendering_for(cluster)


@dataclass
class NodeDra:
    """A node's GPUs published through DRA (``cluster.dra``), and who holds each allocated
    device: (namespace, claim) by (driver, pool, device)."""

    gpus: list[dra.Gpu]
    holders: dict[dra.DeviceKey, tuple[str, str]]

    def __bool__(self) -> bool:
        return bool(self.gpus)


def node_dra(cluster: Cluster | int, node: str) -> NodeDra:
    """What the node's ResourceSlices publish and its allocated claims hold (two queries)."""
    key = (cluster_id_of(cluster), node)
    return nodes_dra([key]).get(key) or NodeDra([], {})


def nodes_dra(nodes: Sequence[tuple[int, str]]) -> dict[tuple[int, str], NodeDra]:
    """``node_dra`` for a page of nodes, (cluster id, name) each, of one or several clusters
    (two queries for them all; a node no slice is published for is absent)."""
    if not nodes:
        return {}
    wanted = set(nodes)
    clusters, names = {c for c, _ in wanted}, {n for _, n in wanted}
    rows: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in (
        ObservedResourceSlice.objects.on_every_cluster()
        .filter(cluster_id__in=clusters, node_name__in=names)
        .values("cluster_id", "node_name", "driver", "pool", "devices", "shared_counters")
    ):
        key = (row["cluster_id"], row["node_name"])
        if key in wanted:
            rows.setdefault(key, []).append(dict(row))
    if not rows:
        return {}
    holders: dict[tuple[int, str], dict[dra.DeviceKey, tuple[str, str]]] = {}
    for cluster, node, namespace, name, allocated in (
        ObservedResourceClaim.objects.on_every_cluster()
        .filter(
            cluster_id__in={c for c, _ in rows},
            node_name__in={n for _, n in rows},
            state=ObservedResourceClaim.State.ALLOCATED,
        )
        .values_list("cluster_id", "node_name", "namespace", "name", "allocated")
    ):
        held = holders.setdefault((cluster, node), {})
        for a in allocated or ():
            held[(str(a.get("driver", "")), str(a.get("pool", "")), str(a.get("device", "")))] = (
                namespace,
                name,
            )
    out = {}
    for key, published in rows.items():
        held = holders.get(key, {})
        out[key] = NodeDra(dra.gpus_of(published, set(held)), held)
    return out


def device_class_ceilings(cluster: Cluster | int, classes: Sequence[str]) -> dict[str, int]:
    """The most devices of each DeviceClass in ``classes`` the cluster's DRA fleet could
    give at once (``cluster.dra.most_at_once``); a class the cluster lacks gives 0, one
    whose selectors are not read here is left out (two queries)."""
    selectors = dict(
        ObservedDeviceClass.objects.on(cluster)
        .filter(name__in=list(classes))
        .values_list("name", "selectors")
    )
    rows = ObservedResourceSlice.objects.on(cluster).values(
        "node_name", "driver", "pool", "devices", "shared_counters"
    )
    gpus = dra.gpus_of(rows, set())
    out = {}
    for name in classes:
        most = dra.most_at_once(selectors[name], gpus) if name in selectors else 0
        if most is not None:
            out[name] = most
    return out


def counter_ceilings(
    cluster: Cluster | int,
    wanted: Mapping[str, tuple[Sequence[str], Sequence[tuple[str, str, str]]]],
) -> dict[str, int | None]:
    """Per key of ``wanted`` (DeviceClass names, and counters as ``(counter, driver,
    selector)``): the most of those counters the cluster's DRA fleet could give at once to
    the devices of those classes (``cluster.dra.counter_at_once``, summed over the
    counters); a class the cluster lacks selects nothing; None where a selector is not read
    here (two queries)."""
    names = sorted({c for classes, _ in wanted.values() for c in classes})
    selectors = dict(
        ObservedDeviceClass.objects.on(cluster)
        .filter(name__in=names)
        .values_list("name", "selectors")
    )
    rows = ObservedResourceSlice.objects.on(cluster).values(
        "node_name", "driver", "pool", "devices", "shared_counters"
    )
    gpus = dra.gpus_of(rows, set())
    out: dict[str, int | None] = {}
    for key, (classes, counters) in wanted.items():
        chosen = [selectors[c] for c in classes if c in selectors]
        amounts = [
            dra.counter_at_once(chosen, counter, driver, scope, gpus) if chosen else 0
            for counter, driver, scope in counters
        ]
        out[key] = None if None in amounts else sum(a or 0 for a in amounts)
    return out


_MIG_PROFILES_SQL = """
SELECT DISTINCT d -> 'attributes' ->> 'profile'
FROM cluster_observedresourceslice s, jsonb_array_elements(s.devices) d
WHERE s.cluster_id = %s AND d -> 'attributes' ->> 'type' = 'mig'
  AND d -> 'attributes' ->> 'profile' IS NOT NULL
ORDER BY 1
"""


def mig_profiles_published(cluster: Cluster | int) -> list[str]:
    """The MIG profiles the cluster's DRA drivers publish devices of (the last poll's
    slices; ``type == 'mig'``, their ``profile``), read in the database in one query: the
    slices of 5,000 nodes are not brought into Python for a handful of names."""
    with connection.cursor() as cursor:
        cursor.execute(_MIG_PROFILES_SQL, [cluster_id_of(cluster)])
        return [str(row[0]) for row in cursor.fetchall()]


def kueue_config_read(cluster_id: int, namespace: str, name: str) -> Read:
    """The last poll's copy of Kueue's ConfigMap on the cluster (its spec alone), written
    out: the ORM took longer to build the statement than the database to answer it."""
    return Read(
        f"SELECT id, spec FROM {ObservedObject._meta.db_table} WHERE cluster_id = %s "
        "AND kind = 'ConfigMap' AND namespace = %s AND name = %s LIMIT 1",
        [cluster_id, namespace, name],
        ObservedObject,
    )


def device_classes_read(cluster_id: int, resources: Iterable[str]) -> Read:
    """The cluster's DRA device classes (name, extended resource, None) and, only when it
    has any, which of ``resources`` a node of the cluster offers (None, None, resource):
    what the queue editor's notes on Kueue's configuration read (``queues.dra``)."""
    classes, nodes = ObservedDeviceClass._meta.db_table, ObservedNode._meta.db_table
    sql = (
        f"SELECT name, extended_resource, NULL FROM {classes} WHERE cluster_id = %s "
        "UNION ALL SELECT NULL, NULL, r FROM unnest(%s::text[]) AS r "
        f"WHERE EXISTS (SELECT 1 FROM {classes} WHERE cluster_id = %s) "
        f"AND EXISTS (SELECT 1 FROM {nodes} n WHERE n.cluster_id = %s AND n.allocatable ? r)"
    )
    return Read(sql, [cluster_id, sorted(set(resources)), cluster_id, cluster_id])
