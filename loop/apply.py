"""Apply desired state to the cluster, converging: render all, apply what changed, remove
what the portal no longer wants. Safe to run twice or after a crash at any point."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.utils import timezone

from cluster.models import AppliedObject, Cluster, Drift
from cluster.services import settings_cluster
from kube import (
    ApplyConflict,
    Gateway,
    NotFound,
    ObjectRef,
    PermanentKubeError,
    RetryableKubeError,
)
from loop.desired import collect_manifests
from portal.infra.locks import advisory_lock
from portal.vocabulary.labels import MANAGED_BY_KEY, MANAGED_BY_VALUE

log = logging.getLogger(__name__)
APPLY_LOCK = 0x5155_4152  # advisory lock id: one applier at a time


def content_hash(manifest: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)).hexdigest()


def object_key(ref: ObjectRef) -> tuple[str, str, str]:
    return (ref.kind, ref.namespace, ref.name)


@dataclass
class ApplyReport:
    applied: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # "<object>: <the server's warning>"


class ApplierBusy(Exception):
    """Another applier holds the lock; try again shortly."""


@contextmanager
def applier_lock(cluster_id: int) -> Iterator[None]:
    """A PostgreSQL advisory lock per cluster (one applier at a time there, any number of
    clusters at once): released on exit or when a killed worker's session ends."""
    with advisory_lock(APPLY_LOCK, cluster_id) as taken:
        if not taken:
            raise ApplierBusy("another apply to this cluster is running")
        yield


def _record(cluster_id: int, ref: ObjectRef, **values: Any) -> None:
    """The object's row as one statement: inserted with ``values``, or, when there is one
    (the cluster, kind, namespace and name are unique), those fields of it updated (an
    ``update_or_create`` took a savepoint, a locking read and a write: five round trips,
    twice for each object a first apply creates)."""
    AppliedObject.objects.bulk_create(
        [
            AppliedObject(
                cluster_id=cluster_id,
                kind=ref.kind,
                namespace=ref.namespace,
                name=ref.name,
                api_version=ref.api_version,
                **values,
            )
        ],
        update_conflicts=True,
        unique_fields=["cluster", "kind", "namespace", "name"],
        update_fields=["api_version", *values],
    )


def apply_desired_state(
    *, gateway: Gateway, cluster: Cluster | None = None, full: bool = False
) -> ApplyReport:
    """To one cluster (by default the settings' one): 1. render everything the portal wants
    there; 2. apply each object whose rendering changed
    since its last successful apply, or that the last poll found deleted or changed in the
    cluster (all of them when ``full``), in apply order; 3. remove
    objects applied before and no longer wanted, in reverse order, only if they carry the
    portal's managed-by label. Each outcome is recorded as it happens, so a crash loses
    nothing: the next run finds the unapplied rest by hash."""
    report = ApplyReport()
    cluster = cluster or settings_cluster()
    with applier_lock(cluster.pk):
        manifests = collect_manifests(cluster=cluster)
        desired = {object_key(ObjectRef.of(m)): m for m in manifests}
        records = {
            (r.kind, r.namespace, r.name): r for r in AppliedObject.objects.filter(cluster=cluster)
        }
        # Objects the last poll found deleted or changed in the cluster are applied again.
        drifted = set(
            Drift.objects.filter(
                cluster=cluster,
                resolved_at__isnull=True,
                kind__in=[Drift.Kind.OBJECT, Drift.Kind.MISSING],
            ).values_list("subject", flat=True)
        )
        for manifest in manifests:
            ref = ObjectRef.of(manifest)
            digest = content_hash(manifest)
            record = records.get(object_key(ref))
            if (
                not full
                and str(ref) not in drifted
                and record is not None
                and record.content_hash == digest
                and record.outcome == AppliedObject.Outcome.APPLIED
            ):
                report.unchanged += 1
                continue
            _apply_one(gateway, cluster.pk, ref, manifest, digest, record, report)
        stale = [key for key, record in records.items() if key not in desired]
        for key in sorted(stale, key=_removal_order):
            record = records[key]
            ref = ObjectRef(record.api_version, record.kind, record.name, record.namespace)
            try:
                if record.adopted:
                    release_fields(gateway, ref)
                else:
                    gateway.delete_if_managed(ref)
            except PermanentKubeError as exc:
                log.warning("could not remove %s: %s", ref, exc.message)
            record.delete()
            report.removed.append(str(ref))
    return report


def release_fields(gateway: Gateway, ref: ObjectRef) -> None:
    """Give up every field the portal set on an object it adopted (an empty apply)."""
    metadata = {"name": ref.name, **({"namespace": ref.namespace} if ref.namespace else {})}
    gateway.apply({"apiVersion": ref.api_version, "kind": ref.kind, "metadata": metadata})


def _adopts(gateway: Gateway, ref: ObjectRef) -> bool:
    """Whether the object already exists without being the portal's (first apply only)."""
    try:
        live = gateway.get(ref)
    except NotFound:
        return False
    labels = (live.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_KEY) != MANAGED_BY_VALUE


def _apply_one(
    gateway: Gateway,
    cluster_id: int,
    ref: ObjectRef,
    manifest: dict[str, Any],
    digest: str,
    record: AppliedObject | None,
    report: ApplyReport,
) -> None:
    attempts = (record.attempts if record else 0) + 1
    stamp = timezone.now()
    warned: list[str] = []  # the API server's Warning headers (a deprecated version...)
    try:
        if record is None:
            _record(
                cluster_id,
                ref,
                outcome=AppliedObject.Outcome.PENDING,
                adopted=_adopts(gateway, ref),
            )
        live = gateway.apply(manifest, warnings=warned)
    except ApplyConflict as exc:
        owners = ", ".join(sorted({m for m, _ in exc.fields}))
        _record(
            cluster_id,
            ref,
            content_hash=digest,
            outcome=AppliedObject.Outcome.CONFLICT,
            attempts=attempts,
            last_attempt_at=stamp,
            message=f"Fields are owned by {owners}: {exc.message}",
            warnings=warned,
        )
        report.conflicts.append(str(ref))
        return
    except PermanentKubeError as exc:
        _record(
            cluster_id,
            ref,
            content_hash=digest,
            outcome=AppliedObject.Outcome.FAILED,
            attempts=attempts,
            last_attempt_at=stamp,
            message=exc.message,
            warnings=warned,
        )
        report.failed.append(str(ref))
        return
    except RetryableKubeError as exc:
        _record(
            cluster_id,
            ref,
            content_hash="",
            outcome=AppliedObject.Outcome.RETRYING,
            attempts=attempts,
            last_attempt_at=stamp,
            message=exc.message,
        )
        raise
    _record(
        cluster_id,
        ref,
        content_hash=digest,
        outcome=AppliedObject.Outcome.APPLIED,
        attempts=attempts,
        last_attempt_at=stamp,
        applied_at=stamp,
        message="",
        resource_version=str((live.get("metadata") or {}).get("resourceVersion", "")),
        warnings=warned,
    )
    for text in warned:
        log.info("applying %s: the API server warns: %s", ref, text)
    report.warnings.extend(f"{ref}: {text}" for text in warned)
    report.applied.append(str(ref))


_KIND_ORDER = [
    "Namespace",
    "DeviceClass",
    "PriorityClass",
    "ResourceQuota",
    "LimitRange",
    "ResourceFlavor",
    "Cohort",
    "ClusterQueue",
    "Queue",
    "LocalQueue",
]


def _removal_order(key: tuple[str, str, str]) -> tuple[int, str, str]:
    kind, namespace, name = key
    rank = _KIND_ORDER.index(kind) if kind in _KIND_ORDER else 0
    return (-rank, namespace, name)
