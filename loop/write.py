"""The bulk writer of a poll: make the observed tables equal what the cluster showed.

Rows that did not change since the last poll are not written: each node and pod row carries
a hash of its content, compared before anything goes to PostgreSQL; changed rows go through
``COPY`` into a temporary table and one ``INSERT … ON CONFLICT DO UPDATE``. The smaller
tables (workloads, PodGroups, refused creations, the portal's objects, DRA's classes, slices
and claims) are compared row by row. Only observed tables are written here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson
from django.conf import settings
from django.db import connection, models, transaction

from cluster import decode
from cluster.models import (
    ObservedCreateFailure,
    ObservedDeviceClass,
    ObservedEvent,
    ObservedNode,
    ObservedObject,
    ObservedPod,
    ObservedPodGroup,
    ObservedResourceClaim,
    ObservedResourceSlice,
    ObservedWorkload,
)
from loop.fetch import DraListing

NODE_COLUMNS = (
    "cluster_id",
    "name",
    "uid",
    "gpu_product",
    "gpu_count",
    "gpu_memory_mib",
    "mig_capable",
    "mig_strategy",
    "mig_config",
    "mig_config_state",
    "mig_config_by",
    "pool_label",
    "capacity",
    "allocatable",
    "allocated",
    "labels",
    "taints",
    "unschedulable",
    "ready",
    "resource_version",
    "row_hash",
    "first_seen",
    "last_changed",
    "gone_since",
)


POD_COLUMNS = (
    "cluster_id",
    "namespace",
    "name",
    "uid",
    "node_name",
    "phase",
    "gpu_requests",
    "limit_defaulted",
    "priority",
    "queue_name",
    "group_name",
    "workload_name",
    "pending_reason",
    "pending_message",
    "created_at",
    "started_at",
    "owner_kind",
    "owner_name",
    "resource_claims",
    "row_hash",
    "decoded_from",
    "last_changed",
)


_JSON_COLUMNS = {
    "capacity",
    "allocatable",
    "allocated",
    "labels",
    "taints",
    "gpu_requests",
    "limit_defaulted",
    "resource_claims",
}


def _digest(values: Sequence[Any]) -> str:
    return hashlib.blake2b(
        orjson.dumps(values, option=orjson.OPT_SORT_KEYS), digest_size=12
    ).hexdigest()


def _copy_upsert(
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    conflict: Sequence[str],
    *,
    kept_when_same: Sequence[str] = (),
    empty: bool = False,
) -> int:
    """COPY rows into a temporary table, then INSERT ... ON CONFLICT DO UPDATE (fast). The
    columns ``kept_when_same`` keep their value where the row's hash did not change (a row
    written for its new source only). ``empty``: the cluster has no rows in ``table`` yet
    (its first poll), so none can conflict: the rows are copied straight in (the temporary
    table's second write of every row was a third of a first poll's writing). No rows: no
    statement."""
    if not rows:
        return 0
    count = 0
    cols = ", ".join(columns)
    if empty:
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
                count += 1
        return count
    updates = ", ".join(
        f"{c} = CASE WHEN {table}.row_hash = EXCLUDED.row_hash THEN {table}.{c} "
        f"ELSE EXCLUDED.{c} END"
        if c in kept_when_same
        else f"{c} = EXCLUDED.{c}"
        for c in columns
        if c not in conflict
    )
    with connection.cursor() as cursor:
        raw = cursor.cursor
        raw.execute(f"CREATE TEMP TABLE _upsert (LIKE {table} INCLUDING DEFAULTS) ON COMMIT DROP")
        raw.execute("ALTER TABLE _upsert DROP COLUMN id")
        with raw.copy(f"COPY _upsert ({cols}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        raw.execute(
            f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _upsert "
            f"ON CONFLICT ({', '.join(conflict)}) DO UPDATE SET {updates}"
        )
        raw.execute("DROP TABLE _upsert")
    return count


def _copy_in(model: Any, rows: Iterable[dict[str, Any]], **common: Any) -> None:
    """Insert ``rows`` (field name -> value, each with ``common``) with one COPY. Django's
    bulk_create sends a column's values as one array parameter: a JSON column's text then
    has every quote escaped in Python as an array element, which was most of a first poll
    at 10,000 ResourceClaims (4.1 of its 8 s). A field a row leaves out gets its default;
    None in a JSON field that may be null is SQL's NULL, as the ORM writes it."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    json = {f.attname for f in fields if isinstance(f, models.JSONField)}
    nullable = {f.attname for f in fields if f.null}
    defaults = {f.attname: f.get_default() for f in fields}
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {model._meta.db_table} ({columns}) FROM STDIN") as copy,
    ):
        for values in rows:
            row = {**defaults, **common, **values}
            copy.write_row(
                [
                    orjson.dumps(row[name]).decode()
                    if name in json and (row[name] is not None or name not in nullable)
                    else row[name]
                    for name in defaults
                ]
            )


def write_column(model: Any, name: str, values: Mapping[int, Any]) -> None:
    """Set field ``name`` of many rows of ``model`` (id -> value): :func:`write_columns`
    with one column."""
    write_columns(model, [name], {pk: (value,) for pk, value in values.items()})


def write_columns(model: Any, names: Sequence[str], values: Mapping[int, Sequence[Any]]) -> None:
    """Set fields ``names`` of many rows of ``model`` (id -> their values, in that order)
    in four statements: the values copied into a temporary table, then one UPDATE joined on
    the id. Django's ``bulk_update`` writes a CASE over every row's id per batch, built as
    expressions in Python (a first poll of the scale scenario stores 50,000 explanations).
    A JSON value of None is SQL's NULL, as the ORM writes it. No values: no statement.
    Called outside a transaction, it makes its own (the temporary table lasts until the
    commit)."""
    if not values:
        return
    fields = [model._meta.get_field(name) for name in names]
    json = [isinstance(field, models.JSONField) for field in fields]
    table = model._meta.db_table
    columns = [connection.ops.quote_name(field.column) for field in fields]
    temporary = ", ".join(
        f"value_{i} {field.db_type(connection)}" for i, field in enumerate(fields)
    )
    copied = ", ".join(f"value_{i}" for i in range(len(fields)))
    sets = ", ".join(f"{column} = _columns.value_{i}" for i, column in enumerate(columns))
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        raw = cursor.cursor
        raw.execute(f"CREATE TEMP TABLE _columns (id bigint, {temporary}) ON COMMIT DROP")
        with raw.copy(f"COPY _columns (id, {copied}) FROM STDIN") as copy:
            for pk, row in values.items():
                copy.write_row(
                    (
                        pk,
                        *(
                            orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
                            if is_json and value is not None
                            else value
                            for value, is_json in zip(row, json, strict=True)
                        ),
                    )
                )
        raw.execute(f"UPDATE {table} SET {sets} FROM _columns WHERE {table}.id = _columns.id")
        raw.execute("DROP TABLE _columns")


def _row(values: dict[str, Any], columns: Sequence[str]) -> list[Any]:
    return [orjson.dumps(values[c]).decode() if c in _JSON_COLUMNS else values[c] for c in columns]


def write_fleet(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], *, cluster_id: int, now: dt.datetime
) -> int:
    """Write the cluster's changed node and pod rows; how many rows were written or removed."""
    pool_label = settings.QM_POOL_LABEL
    existing_pods, stored = _stored_pods(cluster_id)
    decoded = decode.decode_pods(pods, stored)
    allocated, pod_rows = decoded.allocated, decoded.rows

    existing_nodes: dict[str, str] = {}
    first_seen: dict[str, dt.datetime] = {}
    gone: set[str] = set()
    for name, digest, gone_since, seen_first in ObservedNode.objects.filter(
        cluster_id=cluster_id
    ).values_list("name", "row_hash", "gone_since", "first_seen"):
        existing_nodes[name], first_seen[name] = digest, seen_first
        if gone_since is not None:
            gone.add(name)
    node_out = []
    seen = set()
    for node in nodes:
        name = (node.get("metadata") or {}).get("name", "")
        seen.add(name)
        values = decode.node_values(node, dict(allocated.get(name, {})), pool_label)
        values["cluster_id"] = cluster_id
        digest = _digest(
            [values[c] for c in NODE_COLUMNS if c not in ("resource_version",) and c in values]
        )
        if existing_nodes.get(name) == digest and name not in gone:
            continue
        values.update(
            row_hash=digest, first_seen=first_seen.get(name, now), last_changed=now, gone_since=None
        )
        node_out.append(_row(values, NODE_COLUMNS))
    written = _copy_upsert(
        ObservedNode._meta.db_table,
        NODE_COLUMNS,
        node_out,
        ("cluster_id", "name"),
        empty=not existing_nodes,
    )
    vanished = [n for n in existing_nodes if n not in seen and n not in gone]
    if vanished:
        written += ObservedNode.objects.filter(cluster_id=cluster_id, name__in=vanished).update(
            gone_since=now, last_changed=now
        )

    pod_out = []
    for key, values in pod_rows.items():
        values["cluster_id"] = cluster_id
        digest = _digest([values[c] for c in POD_COLUMNS if c in values and c != "decoded_from"])
        if (
            existing_pods.get(key, (None, None))[1] == digest
            and stored[key][0] == values["decoded_from"]
        ):
            continue
        values.update(row_hash=digest, last_changed=now)
        pod_out.append(_row(values, POD_COLUMNS))
    written += _copy_upsert(
        ObservedPod._meta.db_table,
        POD_COLUMNS,
        pod_out,
        ("cluster_id", "namespace", "name"),
        kept_when_same=("last_changed",),
        empty=not existing_pods,
    )
    removed = [
        pk
        for key, (pk, _) in existing_pods.items()
        if key not in pod_rows and key not in decoded.unchanged
    ]
    for start in range(0, len(removed), 5000):
        written += ObservedPod.objects.filter(pk__in=removed[start : start + 5000]).delete()[0]
    return written


def _stored_pods(
    cluster_id: int,
) -> tuple[dict[decode.Key, tuple[int, str]], dict[decode.Key, decode.Stored]]:
    """The cluster's pod rows: each one's id and hash, and what it says of its pod. Read by
    a plain statement: on 50,000 rows the ORM's row handling took twice the query."""
    ids: dict[decode.Key, tuple[int, str]] = {}
    stored: dict[decode.Key, decode.Stored] = {}
    loads = orjson.loads
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, namespace, name, row_hash, decoded_from, node_name, gpu_requests "
            f"FROM {ObservedPod._meta.db_table} WHERE cluster_id = %s",
            [cluster_id],
        )
        for pk, namespace, name, digest, source, node_name, gpu in cursor.fetchall():
            ids[namespace, name] = (pk, digest)
            # jsonb comes as its text (Django's JSON fields decode it themselves)
            stored[namespace, name] = (source, node_name, loads(gpu) if type(gpu) is str else gpu)
    return ids, stored


def _replace_rows(
    model: Any,
    current: Mapping[tuple[Any, ...], dict[str, Any]],
    keys: tuple[str, ...],
    stamp: dict[str, Any],
    *,
    cluster_id: int,
) -> int:
    """Make the cluster's rows of ``model`` equal ``current`` (key -> values): write those
    that differ (with ``stamp``; times compare as times), delete those gone; the number of
    rows written or deleted. Only the columns compared are read, as values (no model is
    built for the rows that did not change). Rows new to the table are copied in at once
    (``_copy_in``; one by one, a first poll's 50,000 workloads took a statement and a
    savepoint each), and those that changed are written together (``write_columns``; one
    by one, each had a locking read, a savepoint and an UPDATE)."""
    compared = {column for values in current.values() for column in values}
    rows = model.objects.filter(cluster_id=cluster_id).values("pk", *keys, *compared)
    existing = {tuple(r[k] for k in keys): r for r in rows}
    new = []
    written_columns = sorted(compared - set(keys))
    changed: dict[int, list[Any]] = {}  # id -> its new values (``written_columns``, stamp)
    for key, values in current.items():
        row = existing.get(key)
        if row is None:
            new.append({**dict(zip(keys, key, strict=True)), **values, **stamp})
            continue
        if all(row[k] == v for k, v in values.items()):
            continue
        changed[row["pk"]] = [*(values.get(c, row[c]) for c in written_columns), *stamp.values()]
    if new:  # rows the table had not (a first poll's all), in one statement
        _copy_in(model, new, cluster_id=cluster_id)
    write_columns(model, [*written_columns, *stamp], changed)
    written = len(new) + len(changed)
    gone = [row["pk"] for key, row in existing.items() if key not in current]
    if gone:
        written += model.objects.filter(pk__in=gone).delete()[0]
    return written


def write_podgroups(groups: list[dict[str, Any]], *, cluster_id: int, now: dt.datetime) -> int:
    """Replace the PodGroup rows that changed; drop those gone."""
    current = {}
    for item in groups:
        values = decode.podgroup_values(item)
        current[(values["namespace"], values["name"])] = values
    return _replace_rows(
        ObservedPodGroup,
        current,
        ("namespace", "name"),
        {"last_changed": now},
        cluster_id=cluster_id,
    )


def write_create_failures(
    events: list[dict[str, Any]], *, cluster_id: int, now: dt.datetime
) -> int:
    """The last FailedCreate per involved object (Job, ReplicaSet, ...); older ones go."""
    return _replace_rows(
        ObservedCreateFailure,
        decode.create_failure_values(events, now=now),
        ("namespace", "kind", "name"),
        {},
        cluster_id=cluster_id,
    )


# A workload's story keeps its newest events, the cluster its newest in all: bounded
# whatever the API server's --event-ttl, at 50,000 workloads at most EVENTS_PER_CLUSTER rows.
EVENTS_PER_WORKLOAD = 20
EVENTS_PER_CLUSTER = 200_000
EVENT_COLUMNS = (
    "cluster_id",
    "namespace",
    "name",
    "workload_name",
    "type",
    "reason",
    "message",
    "count",
    "first_seen",
    "last_seen",
    "preemptor",
)
EventKey = tuple[str, str]  # the Event's namespace and name
MANY_WORKLOADS = 1000


def write_events(
    events: Mapping[EventKey, dict[str, Any]],
    workloads: Sequence[dict[str, Any]],
    *,
    cluster_id: int,
    now: dt.datetime,
) -> int:
    """Keep the Events about the cluster's Workloads (``events``: the ones the poll looked
    at, decoded by ``cluster.decode.workload_event_values``, keyed by the Event's namespace
    and name) as ``ObservedEvent`` rows: the new and changed ones written in one COPY and
    upsert, then each of their workloads' beyond its newest EVENTS_PER_WORKLOAD deleted,
    and the cluster's oldest past EVENTS_PER_CLUSTER. An Event about a workload the poll
    did not see is left out; one the API server has dropped stays (it keeps them an hour;
    the story is longer). A gone workload's go with it (``write_workloads``). The number of
    rows written or deleted."""
    present: dict[tuple[str, str], str] = {}  # (namespace, name) -> uid
    for item in workloads:
        meta = item.get("metadata") or {}
        present[meta.get("namespace", ""), meta.get("name", "")] = meta.get("uid", "")
    by_uid = {uid: f"{ns}/{name}" for (ns, name), uid in present.items() if uid}
    looked_at = [k for k, v in events.items() if (v["namespace"], v["workload_name"]) in present]
    stored = _stored_events(cluster_id, [events[key] for key in looked_at])
    out = []
    touched: set[tuple[str, str]] = set()
    for key in looked_at:
        row = {**events[key], "cluster_id": cluster_id}
        row["last_seen"] = row["last_seen"] or now
        row["first_seen"] = row["first_seen"] or row["last_seen"]
        row["preemptor"] = by_uid.get(row.pop("preemptor_uid"), "")
        if stored.get(key) == (row["count"], row["last_seen"]):
            continue
        out.append([row[c] for c in EVENT_COLUMNS])
        touched.add((row["namespace"], row["workload_name"]))
    if not out:
        return 0
    table = ObservedEvent._meta.db_table
    written = _copy_upsert(table, EVENT_COLUMNS, out, ("cluster_id", "namespace", "name"))
    return written + _trim_events(cluster_id, touched)


def _stored_events(
    cluster_id: int, events: Sequence[dict[str, Any]]
) -> dict[EventKey, tuple[int, dt.datetime]]:
    """The stored count and last time of the events kept since the oldest of ``events``
    was last said (along the index of the cluster's newest: a steady poll's few minutes).
    One kept longer ago and said again is written again, as changed."""
    stamps = [v["last_seen"] for v in events if v["last_seen"] is not None]
    if not stamps:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT namespace, name, count, last_seen FROM {ObservedEvent._meta.db_table} "
            "WHERE cluster_id = %s AND last_seen >= %s",
            [cluster_id, min(stamps)],
        )
        return {(ns, name): (count, last) for ns, name, count, last in cursor.fetchall()}


def _pairs(whose: set[tuple[str, str]]) -> list[list[str]]:
    spaces, names = zip(*sorted(whose), strict=True)
    return [list(spaces), list(names)]


def forget_events(cluster_id: int, workloads: set[tuple[str, str]]) -> int:
    """Delete the events of these workloads (namespace, name), gone from the cluster."""
    if not workloads:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {ObservedEvent._meta.db_table} WHERE cluster_id = %s AND "
            "(namespace, workload_name) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
            [cluster_id, *_pairs(workloads)],
        )
        return int(cursor.rowcount)


def _trim_events(cluster_id: int, touched: set[tuple[str, str]]) -> int:
    """Delete the events of ``touched`` workloads beyond their newest EVENTS_PER_WORKLOAD,
    and, past EVENTS_PER_CLUSTER rows, the cluster's oldest."""
    table = ObservedEvent._meta.db_table
    with connection.cursor() as cursor:
        # A few workloads are found by their keys; many (a first poll) in one pass.
        some = len(touched) <= MANY_WORKLOADS
        cursor.execute(
            f"DELETE FROM {table} WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER "
            "(PARTITION BY namespace, workload_name ORDER BY last_seen DESC, id DESC) AS n "
            f"FROM {table} WHERE cluster_id = %s"
            + (
                " AND (namespace, workload_name) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
                if some
                else ""
            )
            + ") AS ranked WHERE n > %s)",
            [cluster_id, *(_pairs(touched) if some else []), EVENTS_PER_WORKLOAD],
        )
        deleted = int(cursor.rowcount)
        cursor.execute(
            f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE cluster_id = %s "
            "ORDER BY last_seen DESC, id DESC OFFSET %s)",
            [cluster_id, EVENTS_PER_CLUSTER],
        )
        return deleted + int(cursor.rowcount)


def write_workloads(
    workloads: list[dict[str, Any]],
    *,
    cluster_id: int,
    now: dt.datetime,
    positions: dict[tuple[str, str], tuple[int, int]] | None = None,
) -> int:
    """Replace changed workload rows and drop those gone. A Workload listed at the version
    its row was decoded from (``decode.workload_source``), at the same place in line, is not
    decoded again: a steady poll reads every row's key, source and place, and the other
    columns of the few listed at another (50,000 decoded and compared were a quarter of it)."""
    stored = _stored_workloads(cluster_id)
    current: dict[decode.Key, dict[str, Any] | None] = {}  # None: listed as its row says
    for item in workloads:
        meta = item.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        where = (positions or {}).get(key) or (None, None)
        source = decode.workload_source(item)
        row = stored.get(key)
        if row is not None and source and row[1] == source and row[2:] == where:
            current[key] = None
            continue
        values = decode.workload_values(item)
        values["position"], values["position_in_local_queue"] = where
        current[key] = {**values, "decoded_from": source}
    written = _replace_workloads(
        {k: v for k, v in current.items() if v is not None}, stored, cluster_id=cluster_id, now=now
    )
    gone = {key for key in stored if key not in current}
    if gone:
        written += ObservedWorkload.objects.filter(pk__in=[stored[k][0] for k in gone]).delete()[0]
        written += forget_events(cluster_id, gone)  # their story goes with them
    return written


# A stored workload row: its id, what it was decoded from and its places in line.
StoredWorkload = tuple[int, str, int | None, int | None]


def _stored_workloads(cluster_id: int) -> dict[decode.Key, StoredWorkload]:
    """The cluster's workload rows by (namespace, name): their ids, sources and places."""
    rows = ObservedWorkload.objects.filter(cluster_id=cluster_id).values_list(
        "namespace", "name", "pk", "decoded_from", "position", "position_in_local_queue"
    )
    return {(ns, name): (pk, source, at, at_local) for ns, name, pk, source, at, at_local in rows}


def _replace_workloads(
    decoded: dict[decode.Key, dict[str, Any]],
    stored: Mapping[decode.Key, StoredWorkload],
    *,
    cluster_id: int,
    now: dt.datetime,
) -> int:
    """Write the ``decoded`` workloads whose values differ from their rows (stamped
    ``last_changed=now``); a row of the same values has only its source noted (its
    ``last_changed`` kept). Only these rows' compared columns are read, as values. Rows new
    to the table are copied in at once (``_copy_in``; one by one, a first poll's 50,000
    took a statement and a savepoint each). The number of rows written."""
    compared = [c for c in next(iter(decoded.values()), {}) if c != "decoded_from"]
    pks = [stored[key][0] for key in decoded if key in stored]
    rows = {}
    for start in range(0, len(pks), 5000):
        for row in ObservedWorkload.objects.filter(pk__in=pks[start : start + 5000]).values(
            "pk", *compared
        ):
            rows[row["namespace"], row["name"]] = row
    new = []
    noted: dict[int, str] = {}  # id -> what its row was decoded from
    changed: dict[int, list[Any]] = {}  # id -> its new values (``columns``)
    columns = [*compared, "decoded_from", "last_changed"]
    for key, values in decoded.items():
        row = rows.get(key)
        if row is None:  # new to the table
            new.append({"namespace": key[0], "name": key[1], **values, "last_changed": now})
            continue
        if all(row[c] == values[c] for c in compared):
            if stored[key][1] != values["decoded_from"]:
                noted[row["pk"]] = values["decoded_from"]
            continue
        # Its row changed (admitted, finished, evicted...): written with the others in a
        # few statements (one by one, a poll in which a thousand workloads were admitted
        # sent a SELECT, a savepoint and an UPDATE for each).
        changed[row["pk"]] = [*(values[c] for c in compared), values["decoded_from"], now]
    if new:  # rows the table had not (a first poll's all), in one statement
        _copy_in(ObservedWorkload, new, cluster_id=cluster_id)
    write_columns(ObservedWorkload, columns, changed)
    write_column(ObservedWorkload, "decoded_from", noted)
    return len(new) + len(changed)


def _replace_in_bulk(
    model: Any,
    current: Mapping[tuple[Any, ...], dict[str, Any]],
    keys: tuple[str, ...],
    *,
    cluster_id: int,
    now: dt.datetime,
) -> int:
    """As :func:`_replace_rows`, in a fixed number of statements whatever the number of rows
    (a ResourceSlice per node and driver: thousands on a big fleet): rows that changed are
    deleted with those gone and inserted again, stamped ``last_changed=now``; nothing else
    refers to these rows. The number of rows written or deleted."""
    existing = {
        tuple(getattr(row, k) for k in keys): row
        for row in model.objects.filter(cluster_id=cluster_id)
    }
    changed = {
        key: values
        for key, values in current.items()
        if key not in existing or any(getattr(existing[key], k) != v for k, v in values.items())
    }
    stale = [row.pk for key, row in existing.items() if key not in current or key in changed]
    gone = sum(1 for key in existing if key not in current)
    if stale:
        model.objects.filter(pk__in=stale).delete()
    _copy_in(model, changed.values(), cluster_id=cluster_id, last_changed=now)
    return len(changed) + gone


def write_dra(listing: DraListing, *, cluster_id: int, now: dt.datetime) -> int:
    """Dynamic Resource Allocation's DeviceClasses, ResourceSlices and ResourceClaims
    (``listing``): rows that changed are written, those gone dropped. A slice or claim
    listed at the version its row was decoded from is not decoded again (a ResourceSlice per
    node and tens of thousands of claims: the steady poll reads their keys and versions
    only)."""
    classes = {}
    for item in listing.device_classes:
        values = decode.device_class_values(item)
        classes[(values["name"],)] = values
    return (
        _replace_in_bulk(ObservedDeviceClass, classes, ("name",), cluster_id=cluster_id, now=now)
        + _replace_versioned(
            ObservedResourceSlice,
            listing.slices,
            decode.resource_slice_values,
            ("name",),
            cluster_id=cluster_id,
            now=now,
        )
        + _replace_versioned(
            ObservedResourceClaim,
            listing.claims,
            decode.resource_claim_values,
            ("namespace", "name"),
            cluster_id=cluster_id,
            now=now,
        )
    )


def _replace_versioned(
    model: Any,
    items: Sequence[dict[str, Any]],
    decoded: Callable[[dict[str, Any]], dict[str, Any]],
    keys: tuple[str, ...],
    *,
    cluster_id: int,
    now: dt.datetime,
) -> int:
    """As :func:`_replace_in_bulk` for objects whose rows keep what they were decoded from
    (``decode.dra_source``) and a hash of their values: an object at its row's version is
    skipped undecoded, one decoded to the same values only has its version noted. ``keys``
    are the object's metadata fields that name its row."""
    existing = {
        tuple(row[1 : 1 + len(keys)]): (row[0], row[-2], row[-1])
        for row in model.objects.filter(cluster_id=cluster_id).values_list(
            "pk", *keys, "decoded_from", "row_hash"
        )
    }
    changed: dict[tuple[Any, ...], dict[str, Any]] = {}
    noted: dict[int, str] = {}
    seen = set()
    for item in items:
        meta = item.get("metadata") or {}
        key = tuple(meta.get(k, "") for k in keys)
        seen.add(key)
        source = decode.dra_source(meta)
        old = existing.get(key)
        if old is not None and source and old[1] == source:
            continue
        values = decoded(item)
        digest = _digest(list(values.values()))
        if old is not None and old[2] == digest:
            noted[old[0]] = source
            continue
        changed[key] = {**values, "decoded_from": source, "row_hash": digest}
    stale = [pk for key, (pk, _, _) in existing.items() if key not in seen or key in changed]
    if stale:
        model.objects.filter(pk__in=stale).delete()
    write_column(model, "decoded_from", noted)
    _copy_in(model, changed.values(), cluster_id=cluster_id, last_changed=now)
    return len(changed) + sum(1 for key in existing if key not in seen)


def write_managed(
    managed: dict[tuple[str, str], list[dict[str, Any]]], *, cluster_id: int, now: dt.datetime
) -> None:
    """Replace the observed copies of the portal's objects and of what the loop keeps beside
    them (Kueue's queues, its ConfigMap, the ResourceClaimTemplates: thousands on a large
    cluster), copied in as the DRA rows are."""
    ObservedObject.objects.filter(cluster_id=cluster_id).delete()
    _copy_in(
        ObservedObject,
        (
            {
                "api_version": api_version,
                "kind": kind,
                **decode.observed_object_values(item, field_manager=settings.QM_FIELD_MANAGER),
            }
            for (api_version, kind), items in managed.items()
            for item in items
        ),
        cluster_id=cluster_id,
        last_seen=now,
    )
