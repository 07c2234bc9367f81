"""Why is it waiting, as shown: the waiting workloads, Pending pods and refused pod creations
of some namespaces, each with the explanation and estimate the poll stored with it
(``diagnostics.explainer``), redacted for the viewer (the home page and the API show the
same words)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, replace

from django.utils import timezone

from cluster.models import ObservedCreateFailure, ObservedPod, ObservedWorkload
from cluster.scope import cluster_id_of
from diagnostics.estimate import Estimate
from diagnostics.explain import Explanation
from diagnostics.explainer import REFUSALS_KEPT, from_json
from portal.infra.round_trips import PAIRS, Read, pairs_params, read_together
from portal.vocabulary.names import PodNames

_PAIRS = f"(cluster_id, namespace) IN {PAIRS}"
# Written out, as the page's other reads of what waits: the ORM took longer to build these
# than the database to answer them.
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
# Shown for a row the poll has not explained yet (written since, or before this release).
NOT_YET = Explanation(
    "Not explained yet: the portal explains what waits after each poll of its cluster.",
    "Look again after the next poll.",
)
NO_ESTIMATE_YET = Estimate("no estimate", "not explained yet")


@dataclass(frozen=True)
class WaitingRead:
    """What ``explain_waiting`` reads of some namespaces' observed rows, read by a caller with
    its own reads in one round trip (``waiting_reads``): their workloads not finished and
    their refused creations of the last REFUSALS_KEPT, each with what the poll stored."""

    workloads: list[ObservedWorkload]
    failures: list[ObservedCreateFailure]

    def on(self, cluster_id: int) -> WaitingRead:
        """The rows of one cluster's namespaces."""
        return WaitingRead(
            [w for w in self.workloads if w.cluster_id == cluster_id],
            [f for f in self.failures if f.cluster_id == cluster_id],
        )


def waiting_reads(
    pairs: Sequence[tuple[int, str]], now: dt.datetime, workload_columns: str = "*"
) -> list[Read]:
    """The reads of ``WaitingRead`` for these (cluster id, namespace) pairs, in its order
    (``workload_columns``: the workloads' columns a caller shows, the others deferred)."""
    of = pairs_params(pairs)
    workloads = _WORKLOADS_SQL.replace("SELECT *", f"SELECT {workload_columns}", 1)
    return [
        Read(workloads, of, ObservedWorkload),
        Read(_FAILURES_SQL, [*of, now - REFUSALS_KEPT], ObservedCreateFailure),
    ]


def read_waiting(pairs: Sequence[tuple[int, str]]) -> tuple[WaitingRead, list[ObservedPod]]:
    """What ``explain_waiting`` reads of these (cluster id, namespace) pairs and their
    Pending pods, every cluster's in one round trip (a caller shows each cluster's with
    ``WaitingRead.on`` and that cluster's pods)."""
    if not pairs:
        return WaitingRead([], []), []
    pods, *rows = read_together(
        Read(_PENDING_SQL, pairs_params(pairs), ObservedPod),
        *waiting_reads(pairs, timezone.now()),
    )
    return WaitingRead(*rows), pods


def explain_waiting(
    namespaces: list[str],
    *,
    cluster_id: int,
    names: PodNames,
    pods: list[ObservedPod] | None = None,
    read: WaitingRead | None = None,
) -> tuple[list[ObservedWorkload], list[ObservedPod], list[ObservedCreateFailure]]:
    """What waits in these namespaces of cluster ``cluster_id``, each waiting workload and
    pod with ``.why`` (an ``Explanation``; None for an admitted workload with nothing in its
    way) and ``.estimate`` (an ``Estimate``; None for an admitted workload), as the cluster's
    last poll explained them, redacted for the viewer whose ``names`` these are (another
    team's pods are never named). ``pods`` are the Pending pods of these namespaces, ordered
    by namespace and name, and ``read`` their workloads and refused creations, when the
    caller read them already (the home, with its own reads; ``WaitingRead.on`` the
    cluster)."""
    if read is None:
        read, pods = read_waiting([(cluster_id, name) for name in namespaces])
    elif pods is None:
        raise ValueError("a caller that read the namespaces' rows reads their pods too")
    for workload in read.workloads:
        shown_for(workload, names)
        queue = (workload.explained or {}).get("cluster_queue")
        if queue and not workload.cluster_queue:
            workload.cluster_queue = queue
    for pod in pods:
        shown_for(pod, names)
    for failure in read.failures:
        shown_for(failure, names)
    return read.workloads, pods, read.failures


def shown_for(
    item: ObservedWorkload | ObservedPod | ObservedCreateFailure, names: PodNames
) -> None:
    """``.why`` and ``.estimate`` of a row, as stored, each sentence redacted for ``names``
    (the lists here, and one workload's page)."""
    if item.explained is None:  # not explained yet: a workload waits until the poll says
        admitted = isinstance(item, ObservedWorkload) and item.admitted
        why, estimate = (None, None) if admitted else (NOT_YET, NO_ESTIMATE_YET)
    else:
        why, estimate = from_json(item.explained)
    on = cluster_id_of(item.cluster_id)  # the names in its sentences are of its cluster
    item.why = why if why is None else _redacted(why, names, on)  # type: ignore[union-attr]
    if estimate is not None and not names.everyone:
        summary, basis = names.redact(estimate.summary, on), names.redact(estimate.basis, on)
        estimate = replace(estimate, summary=summary, basis=basis)
    item.estimate = estimate  # type: ignore[union-attr]


def _redacted(why: Explanation, names: PodNames, cluster: int) -> Explanation:
    """The explanation (of a row of ``cluster``) with every pod another team's the viewer
    may not name said as "a pod in namespace" (its cause, next step, evidence, what it
    belongs to, why never)."""
    if names.everyone:
        return why
    return replace(
        why,
        cause=names.redact(why.cause, cluster),
        next_step=names.redact(why.next_step, cluster),
        evidence=[names.redact(line, cluster) for line in why.evidence],
        belongs_to=names.redact(why.belongs_to, cluster),
        never=names.redact(why.never, cluster),
    )
