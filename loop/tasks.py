"""Celery tasks of the cluster loop: thin wrappers that map errors to retries.

Each cluster has its own tasks (``poll_cluster_task(cluster_id)``,
``apply_desired_state_task(cluster_id)``), so the workers run the clusters side by side and
a cluster that does not answer holds nobody else up: beat's tasks only fan out, one task
per cluster; a poll or an apply first asks the API server its version with a short timeout
(QM_API_PROBE_SECONDS); the locks are per cluster; a busy lock retries only its cluster.
Without a cluster id a task works on the settings' cluster (the tasks' callers from before
there were several clusters).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from celery import shared_task
from django.conf import settings

from cluster.connection import cluster_configured, gateway_for, probed
from cluster.credentials import CredentialKeyError
from cluster.models import Cluster, Drift
from cluster.services import settings_cluster
from kube import Gateway, KubeError, RetryableKubeError
from loop.apply import ApplierBusy, apply_desired_state
from loop.poll import PollerBusy, poll_cluster, poller_lock, record_failed_poll
from portal.infra import outbox
from tenants.models import Namespace

log = logging.getLogger(__name__)


def loop_cluster_ids() -> list[int]:
    """The clusters the loop runs for: every registered one, the settings' one only when the
    settings name a cluster (one query)."""
    clusters = Cluster.objects.order_by("name")
    if not cluster_configured():
        clusters = clusters.exclude(connection=Cluster.Connection.SETTINGS)
    return list(clusters.values_list("pk", flat=True))


def loop_cluster(cluster_id: int | None) -> Cluster | None:
    """The cluster a task works on (None: the settings' one); None when there is nothing to
    do: a cluster deleted since the task was queued, or the settings' cluster while the
    settings name none."""
    if cluster_id is None:
        cluster: Cluster | None = settings_cluster()
    else:
        cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    if cluster.connection == Cluster.Connection.SETTINGS and not cluster_configured():
        return None
    return cluster


@shared_task(name="cluster.tasks.poll_all_clusters_task", ignore_result=True)
def poll_all_clusters_task() -> int:
    """Queue one poll per cluster (beat, every QM_POLL_SECONDS); a poll still waiting for a
    worker when the next one is queued is dropped (it would read the same)."""
    ids = loop_cluster_ids()
    for cluster_id in ids:
        poll_cluster_task.apply_async((cluster_id,), expires=float(settings.QM_POLL_SECONDS))
    return len(ids)


@shared_task(name="cluster.tasks.poll_cluster_task", acks_late=True, ignore_result=True)
def poll_cluster_task(cluster_id: int | None = None) -> None:
    """Read one cluster's fleet back into the observed tables (a failed poll is recorded, not
    retried: the next beat tick polls again; a poll of the cluster still running: none)."""
    cluster = loop_cluster(cluster_id)
    if cluster is None:
        return
    try:
        gateway = gateway_for(cluster)
    except (KubeError, CredentialKeyError) as exc:
        record_failed_poll(cluster, getattr(exc, "message", str(exc)))
        return
    try:
        with poller_lock(cluster.pk):
            run = poll_cluster(gateway=gateway, cluster=cluster)
    except PollerBusy:
        log.info("poll of %s skipped: the previous one is still running", cluster.name)
        return
    if run.ok and missing_objects(cluster):
        put_back(gateway, cluster)


def missing_objects(cluster: Cluster) -> bool:
    """The poll found objects the portal applied gone from the cluster."""
    return (
        Drift.objects.on(cluster).filter(resolved_at__isnull=True, kind=Drift.Kind.MISSING).exists()
    )


def put_back(gateway: Gateway, cluster: Cluster) -> None:
    """Objects deleted in the cluster are applied again at once (the apply takes them from
    the drift rows), not at the periodic full re-apply minutes later; an apply already
    running takes them too, and one that fails is the next poll's to try again."""
    try:
        report = apply_desired_state(gateway=gateway, cluster=cluster)
    except ApplierBusy:
        return
    except KubeError as exc:
        log.info("objects missing from %s not applied again yet: %s", cluster.name, exc.message)
        return
    if report.applied:
        log.info("%s: applied again what was deleted there: %s", cluster.name, report.applied)


@shared_task(name="cluster.tasks.apply_all_clusters_task", ignore_result=True)
def apply_all_clusters_task(full: bool = False) -> int:
    """Queue one apply per cluster (beat's periodic full re-apply; a change to desired state
    that may concern every cluster)."""
    ids = loop_cluster_ids()
    for cluster_id in ids:
        apply_desired_state_task.delay(cluster_id, full=full)
    return len(ids)


@shared_task(
    name="cluster.tasks.apply_desired_state_task",
    bind=True,
    acks_late=True,
    autoretry_for=(RetryableKubeError,),
    retry_backoff=2,
    retry_backoff_max=120,
    retry_jitter=True,
    max_retries=None,
)
def apply_desired_state_task(
    self: Any, cluster_id: int | None = None, full: bool = False
) -> dict[str, int]:
    """Converge one cluster toward the portal's desired state (idempotent: SSA by hash)."""
    cluster = loop_cluster(cluster_id)
    if cluster is None:
        return {}
    # A cluster that does not answer fails here within the probe's seconds (and retries),
    # never holding a worker for the lists' and applies' longer timeouts.
    gateway = probed(gateway_for(cluster))
    try:
        report = apply_desired_state(gateway=gateway, cluster=cluster, full=full)
    except ApplierBusy as exc:
        # Another run holds this cluster's lock and may have rendered before our change: run
        # after it (only this cluster's apply waits).
        raise self.retry(exc=exc, countdown=3, max_retries=None) from exc
    if report.applied or report.removed or report.failed or report.conflicts:
        log.info(
            "%s: applied %d, removed %d, conflicts %d, failed %d, unchanged %d",
            cluster.name,
            len(report.applied),
            len(report.removed),
            len(report.conflicts),
            len(report.failed),
            report.unchanged,
        )
    return {
        "applied": len(report.applied),
        "removed": len(report.removed),
        "conflicts": len(report.conflicts),
        "failed": len(report.failed),
    }


def clusters_concerned(objects: Sequence[object]) -> list[int] | None:
    """The clusters whose desired state ``objects`` (the rows written, before and after)
    belong to; None: it may be any (none named, or a row of no one cluster: a team, a
    PriorityClass of the catalog, a MIG layout)."""
    if not objects:
        return None
    found: set[int] = set()
    namespaces: set[int] = set()
    for obj in objects:
        if isinstance(getattr(obj, "cluster_id", None), int):
            found.add(obj.cluster_id)  # type: ignore[attr-defined]
        elif isinstance(getattr(obj, "namespace_id", None), int):
            namespaces.add(obj.namespace_id)  # type: ignore[attr-defined]
        else:
            return None
    if namespaces:  # a LocalQueue, a quota or limit item: its namespace's cluster
        of = dict(Namespace.objects.filter(pk__in=namespaces).values_list("pk", "cluster_id"))
        if len(of) < len(namespaces):  # a namespace gone too: its cluster is not known
            return None
        found.update(of.values())
    return sorted(found)


def queue_apply(objects: Sequence[object] = ()) -> None:
    """Queue the applies of the clusters ``objects`` belong to (every cluster when that is
    not known) when the current transaction commits (once per cluster and transaction).
    The loop subscribes this to desired-state changes (``portal.desired``).

    A broker that is down loses nothing: the outbox's relay sends it when the broker is back
    (and the periodic re-apply would find the change by hash anyway).
    """
    clusters = clusters_concerned(objects)
    if clusters is None:
        outbox.send_later(apply_all_clusters_task.name, once=True)
        return
    for cluster_id in clusters:
        outbox.send_later(apply_desired_state_task.name, cluster_id, once=True)
