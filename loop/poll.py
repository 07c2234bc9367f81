"""The poller: read the cluster into the observed tables, then record drift.

1. fetch (LIST with pagination, decoded to plain dicts: ``loop.fetch``);
2. write the rows that changed (``loop.write``, pure decoding in ``cluster.decode``);
3. record drift (``loop.drift``); 4. what is computed from the rows (why work waits:
``loop.written``, filled by diagnostics); 5. record the run (``SyncRun``).

Writes only observed state; desired state is never touched.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cluster.models import Cluster, SyncRun
from cluster.services import record_discovery, settings_cluster
from kube import Gateway, KubeError
from loop import write, written
from loop.drift import record_drift
from loop.fetch import Listing, discover, fetch
from portal.infra.collector import no_cyclic_gc
from portal.infra.locks import advisory_lock

log = logging.getLogger(__name__)
POLL_LOCK = 0x5155_504C  # advisory lock id: one poll of a cluster at a time


class PollerBusy(Exception):
    """A poll of this cluster is running (its answer is on the way: no second one)."""


@contextmanager
def poller_lock(cluster_id: int) -> Iterator[None]:
    """A PostgreSQL advisory lock per cluster: a poll that outlasts the poll interval (a slow
    API server, a big fleet) is not joined by the next one, which would only double the
    load there and take a worker from the other clusters."""
    with advisory_lock(POLL_LOCK, cluster_id) as taken:
        if not taken:
            raise PollerBusy("another poll of this cluster is running")
        yield


def poll_cluster(*, gateway: Gateway, cluster: Cluster | None = None) -> SyncRun:
    """One poll, recorded as a :class:`SyncRun` (with the API's words when it failed), and
    what the cluster runs recorded on its :class:`Cluster` row (by default the one the
    settings connect to)."""
    cluster = cluster or settings_cluster()
    started = timezone.now()
    clock = time.monotonic()
    run = SyncRun.objects.create(cluster=cluster, started_at=started)
    try:
        # A quick question first: a hung API server fails this poll in seconds, so the pages
        # and /readyz say "unreachable" within a poll interval (the lists below may
        # legitimately take long on a big fleet).
        probe = settings.QM_API_PROBE_SECONDS
        version = gateway.bounded(connect=probe, read=probe).version()
        # A poll holds a few hundred thousand small dicts at once (a 40 MB list decodes 2.5x
        # slower with the cyclic collector walking them as they are built).
        with no_cyclic_gc():
            listing = fetch(gateway, cluster)
            _discover(gateway, cluster, listing, version, now=started)
            with transaction.atomic():
                changed = write_listing(listing, cluster_id=cluster.pk, now=started)
                record_drift(cluster, now=started)
                # what is computed from the rows (why work waits), with them: a page never
                # reads rows of one poll with explanations of another
                written.cluster_written(cluster.pk, now=timezone.now())
            run.nodes, run.pods, run.changed = len(listing.nodes), len(listing.pods), changed
            del listing  # freed before the collector is back, or its first pass walks it all
    except KubeError as exc:
        run.error = exc.message
        record_discovery(cluster, None, now=started, error=exc.message)
        log.warning("poll of %s failed: %s", cluster.name, exc.message)
    except Exception as exc:  # recorded as failed (never left unfinished), then raised
        run.error = f"the poll failed: {exc}"
        _finish(run, clock)
        raise
    _finish(run, clock)
    return run


def record_failed_poll(cluster: Cluster, error: str) -> SyncRun:
    """A poll that could not begin (the cluster's gateway could not be made: a stored
    credential the keys cannot read, a kubeconfig that is not one), recorded as failed so
    the cluster's status says why."""
    now = timezone.now()
    log.warning("poll of %s not begun: %s", cluster.name, error)
    return SyncRun.objects.create(
        cluster=cluster, started_at=now, finished_at=now, duration_ms=0, error=error
    )


def _discover(
    gateway: Gateway,
    cluster: Cluster,
    listing: Listing,
    version: dict[str, Any],
    *,
    now: dt.datetime,
) -> None:
    """Discovery is a part of the poll that may fail alone (an API server that refuses its
    group discovery still has its fleet read): the error is kept on the cluster's row."""
    try:
        found = discover(gateway, listing.nodes, version=version, pods=listing.pods)
    except KubeError as exc:
        record_discovery(cluster, None, now=now, error=exc.message)
        return
    record_discovery(cluster, found, now=now)


def _finish(run: SyncRun, clock: float) -> None:
    run.finished_at = timezone.now()
    run.duration_ms = int((time.monotonic() - clock) * 1000)
    run.save()


def write_listing(listing: Listing, *, cluster_id: int, now: dt.datetime) -> int:
    """The cluster's observed tables from one listing; how many rows were written or
    removed."""
    changed = write.write_fleet(listing.nodes, listing.pods, cluster_id=cluster_id, now=now)
    if listing.workloads is not None:
        changed += write.write_workloads(
            listing.workloads, positions=listing.positions, cluster_id=cluster_id, now=now
        )
        if listing.events is not None:
            changed += write.write_events(
                listing.events, listing.workloads, cluster_id=cluster_id, now=now
            )
    if listing.podgroups is not None:
        changed += write.write_podgroups(listing.podgroups, cluster_id=cluster_id, now=now)
    changed += write.write_create_failures(listing.failures, cluster_id=cluster_id, now=now)
    if listing.dra is not None:
        changed += write.write_dra(listing.dra, cluster_id=cluster_id, now=now)
    write.write_managed(listing.managed, cluster_id=cluster_id, now=now)
    return changed
