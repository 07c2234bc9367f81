"""What the cluster shows of Kueue, for the quota what-if and the Queues page: read from the
observed rows directly (the cluster app and its observed models sit beneath the queues)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from django.db.models import Count, F, OuterRef, Subquery, Value, Window
from django.db.models.expressions import OrderBy
from django.db.models.functions import Coalesce, NullIf, RowNumber

from cluster.decode import quota_refusal
from cluster.models import ObservedCreateFailure, ObservedObject, ObservedWorkload
from cluster.scope import cluster_id_of
from portal.infra.round_trips import Read, read_together
from portal.vocabulary.quantity import QuantityError, parse_quantity
from queues.models import ClusterQueue, LocalQueue
from queues.whatif import Refusal, Workload
from tenants.models import Namespace


@dataclass(frozen=True)
class ObservedKueue:
    """Kueue's unfinished workloads as the last poll saw them (``queue``: the ClusterQueue
    that holds their quota, or the one their LocalQueue points at), whether Kueue runs fair
    sharing (its ClusterQueues report a ``fairSharing`` status), each namespace's
    ResourceQuota ``status.used``, and the pod creations a ResourceQuota refuses now."""

    workloads: tuple[Workload, ...] = ()
    refused: tuple[Refusal, ...] = ()
    fair_sharing: bool = False
    quota_used: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    known: bool = True


def waiting_cluster_queue(*otherwise: Any) -> Coalesce:
    """The name of the ClusterQueue an observed workload is in, as an expression of its row:
    its own, or (waiting, it names none yet) its LocalQueue's, found by the workload's
    cluster, namespace and queue name; then ``otherwise`` (None when none is given)."""
    via_local_queue = LocalQueue.objects.filter(
        namespace__cluster_id=OuterRef("cluster_id"),
        namespace__name=OuterRef("namespace"),
        name=OuterRef("queue_name"),
    ).values("cluster_queue__name")[:1]
    return Coalesce(NullIf("cluster_queue", Value("")), Subquery(via_local_queue), *otherwise)


# ``first_in_line`` of some ClusterQueues: their waiting workloads, found through the
# LocalQueues pointing at them (a waiting workload names no ClusterQueue yet: its namespace's
# and queue name's rows, along the workloads' unique index) and those that name one of them
# (a quota reservation not admitted yet: the partial index ``observed_workload_reserved``),
# ranked in each queue. Written out: the ORM's form of the same read scanned every workload
# of the cluster and looked up each waiting one's LocalQueue (46 ms of PostgreSQL at 50,000
# workloads for the Queues page's cohort of 100 queues, against about 20, most of it the
# rows of the queues' 200 namespaces read to rank them).
_LINE_SQL = f"""
WITH local AS (
    SELECT ns.name AS namespace, lq.name AS queue_name, cq.name AS queue
    FROM {LocalQueue._meta.db_table} lq
    JOIN {Namespace._meta.db_table} ns ON ns.id = lq.namespace_id
    JOIN {ClusterQueue._meta.db_table} cq ON cq.id = lq.cluster_queue_id
    WHERE ns.cluster_id = %s AND cq.name = ANY(%s)
), waiting AS (
    SELECT w.*, local.queue FROM local
    JOIN {ObservedWorkload._meta.db_table} w
        ON w.cluster_id = %s AND w.namespace = local.namespace
        AND w.queue_name = local.queue_name
    WHERE w.cluster_queue = '' AND NOT w.admitted AND NOT w.finished
    UNION ALL
    SELECT w.*, w.cluster_queue FROM {ObservedWorkload._meta.db_table} w
    WHERE w.cluster_id = %s AND w.cluster_queue = ANY(%s)
        AND NOT w.admitted AND NOT w.finished
), ranked AS (
    SELECT *,
        row_number() OVER (PARTITION BY queue
            ORDER BY position ASC NULLS LAST, queued_at, created_at, name) AS place,
        count(*) OVER (PARTITION BY queue) AS waiting_in_queue
    FROM waiting
)
SELECT * FROM ranked WHERE place <= %s ORDER BY queue, place
"""


def first_in_line(
    per_queue: int = 3, *, cluster_id: int, queues: Iterable[str] | None = None
) -> dict[str, list[ObservedWorkload]]:
    """ClusterQueue -> its first ``per_queue`` waiting workloads in Kueue's order (their
    place from the visibility API, then the oldest first), in one query whatever the
    number of queues and workloads. A waiting workload names no ClusterQueue yet: its
    LocalQueue says which. Each carries ``waiting_in_queue``: how many wait there in all.
    ``cluster_id``: the cluster whose queues these are; ``queues``: only these
    ClusterQueues' (by name; every one's by default)."""
    rows: Iterable[Any]
    if queues is not None:
        names = sorted(queues)
        params = [cluster_id, names, cluster_id, cluster_id, names, per_queue]
        # Never prepared: the generic plan PostgreSQL keeps for a prepared statement, not
        # knowing which queues, scans every workload for the reserved ones (a parallel
        # sequential scan: 31 ms against 11 at the scale scenario's 50,000 workloads).
        (rows,) = read_together(Read(_LINE_SQL, params, ObservedWorkload, prepared=False))
    else:
        waiting = (
            ObservedWorkload.objects.on(cluster_id)
            .filter(admitted=False, finished=False)
            .annotate(queue=waiting_cluster_queue())
            .exclude(queue=None)
        )
        order: list[OrderBy | str] = [
            F("position").asc(nulls_last=True),
            "queued_at",
            "created_at",
            "name",
        ]
        rows = (
            waiting.annotate(
                place=Window(RowNumber(), partition_by=[F("queue")], order_by=order),
                waiting_in_queue=Window(Count("pk"), partition_by=[F("queue")]),
            )
            .filter(place__lte=per_queue)
            .order_by("queue", "place")
        )
    out: dict[str, list[ObservedWorkload]] = {}
    for workload in rows:  # in order: by queue, then place
        out.setdefault(workload.queue, []).append(workload)
    return out


def observed_kueue(of: int | None) -> ObservedKueue:
    """What the quota what-if starts from (five queries whatever the number of workloads):
    every unfinished workload with the ClusterQueue it holds quota in (a reservation counts,
    admission checks or not) or the one its LocalQueue points at, whether Kueue reports fair
    sharing, each namespace's ResourceQuota use, and the pods a ResourceQuota refuses, on
    cluster ``of`` (a row's key: None is refused)."""
    cluster_id = cluster_id_of(of)
    local_queues = {
        (ns, name): cq
        for ns, name, cq in LocalQueue.objects.filter(namespace__cluster_id=cluster_id).values_list(
            "namespace__name", "name", "cluster_queue__name"
        )
    }
    workloads = []
    for row in (
        ObservedWorkload.objects.on(cluster_id).filter(finished=False).order_by("namespace", "name")
    ):
        holds = bool(row.cluster_queue)
        workloads.append(
            Workload(
                key=f"{row.namespace}/{row.name}",
                queue=row.cluster_queue or local_queues.get((row.namespace, row.queue_name), ""),
                requests={k: Fraction(v) for k, v in (row.requests or {}).items()},
                priority=row.priority,
                created=row.created_at.timestamp() if row.created_at else 0.0,
                admitted=holds,
                flavors=dict(row.flavors or {}) if holds else {},
                admitted_at=row.admitted_at.timestamp() if row.admitted_at else 0.0,
                held=held_by_kueue(row.reason, row.message, row.conditions or ())
                if not holds
                else "",
            )
        )
    observed = ObservedObject.objects.on(cluster_id)
    fair = observed.filter(kind="ClusterQueue", status__has_key="fairSharing").exists()
    used: dict[str, dict[str, str]] = {}
    for namespace, status in observed.filter(kind="ResourceQuota").values_list(
        "namespace", "status"
    ):
        used.setdefault(namespace, {}).update((status or {}).get("used") or {})
    return ObservedKueue(
        workloads=tuple(workloads),
        fair_sharing=fair,
        quota_used=used,
        refused=_refused(cluster_id),
    )


# How Kueue's workload controller marks a workload it keeps out of its queues as it is (a DRA
# claim of a device class its configuration maps to no resource, a claim named rather than
# made from a template, ...): QuotaReserved False, reason Misconfigured (Inadmissible unless
# its UnadmittedWorkloadsObservability gate is on), and Requeued False, reason Inadmissible,
# with the same message (recorded in tests/data/dra/kueue.json).
MISCONFIGURED = "Misconfigured"
INADMISSIBLE = "Inadmissible"


def held_by_kueue(reason: str, message: str, conditions: Iterable[Mapping[str, Any]] = ()) -> str:
    """Why Kueue keeps a waiting workload out of line whatever the quota ("" when it does
    not), in the what-if's words with Kueue's own."""
    requeued = next((c for c in conditions if c.get("type") == "Requeued"), {})
    not_requeued = requeued.get("status") == "False" and requeued.get("reason") == INADMISSIBLE
    if reason != MISCONFIGURED and not not_requeued:
        return ""
    said = message or str(requeued.get("message") or "")
    return f"Kueue keeps it out of line whatever the quota: {said}".rstrip(": ")


def _refused(cluster_id: int) -> tuple[Refusal, ...]:
    refused = []
    for failure in ObservedCreateFailure.objects.on(cluster_id):
        refusal = quota_refusal(failure.message)
        if refusal is None:
            continue
        asks = {}
        for item, text in refusal.requested.items():
            try:
                asks[item] = parse_quantity(text)
            except QuantityError:
                continue
        what = f"{failure.kind} {failure.namespace}/{failure.name}"
        refused.append(Refusal(failure.namespace, what, asks))
    return tuple(refused)
