"""Writes of the clusters themselves: registering and editing a cluster (credentials
encrypted, write-only), re-encrypting every credential under the newest key, and what a
poll discovered.

Registering and editing are platform admins' and audited; the audit row names which fields
changed and whether the credential was replaced, never its value. Discovery is observed
state (the poll's), recorded without audit like the other observed tables.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from cluster import credentials
from cluster import scope as clusters
from cluster.discovery import Discovered
from cluster.models import Cluster
from portal.access.permissions import is_platform_admin
from portal.audit.record import SYSTEM, Actor, Event, System, record_audit

# The fields an admin sets (the rest is discovered, or the credential).
EDITABLE = (
    "name",
    "display_name",
    "purpose",
    "connection",
    "api_url",
    "kubeconfig_context",
    "verify_tls",
    "ca_certificate",
)


def settings_cluster() -> Cluster:
    """The cluster the portal's settings connect to, made when missing
    (:func:`cluster.scope.settings_cluster`, typed)."""
    found: Cluster = clusters.settings_cluster()
    return found


def _snapshot(cluster: Cluster) -> dict[str, Any]:
    return {field: getattr(cluster, field) for field in EDITABLE}


@transaction.atomic
def save_cluster(
    *,
    actor: Actor,
    cluster: Cluster,
    credential: str | None = None,
    source: str,
) -> Cluster:
    """Create or update ``cluster`` (its admin-set fields); ``credential`` (a token or a
    kubeconfig) replaces the stored one when given, encrypted. Field errors raise
    ValidationError and save nothing; an edit that changes nothing saves and audits
    nothing. ``actor`` may be the system (a command: the demo registers its clusters)."""
    if not isinstance(actor, System) and not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins register and edit clusters.")
    before = _snapshot(Cluster.objects.get(pk=cluster.pk)) if cluster.pk is not None else None
    cluster.full_clean()
    takes_none = cluster.connection in (Cluster.Connection.SETTINGS, Cluster.Connection.IN_CLUSTER)
    if credential and credential.strip() and takes_none:
        raise ValidationError(
            {"credential": f"A connection by {cluster.get_connection_display()} takes none."}
        )
    if credential is not None and credential.strip():
        cluster.credential = credentials.encrypt(credential.strip())
        cluster.credential_set_at = timezone.now()
    elif cluster.connection == Cluster.Connection.TOKEN and not cluster.credential:
        raise ValidationError({"credential": "A token connection needs the bearer token."})
    after = _snapshot(cluster)
    changed = {k: v for k, v in after.items() if before is None or before[k] != v}
    if before is not None and not changed and not credential:
        return cluster
    cluster.save()
    if credential:
        changed["credential"] = "replaced"
    record_audit(
        actor=actor,
        event=Event.CLUSTER_REGISTERED if before is None else Event.CLUSTER_CHANGED,
        source=source,
        target=cluster,
        old=None if before is None else {k: before[k] for k in changed if k in before},
        new=changed,
    )
    return cluster


@transaction.atomic
def rotate_cluster_credentials(*, source: str = "cli") -> int:
    """Re-encrypt every stored credential under the first key of QM_CREDENTIALS_KEY (each
    row locked while it is rewritten); how many were re-encrypted. Safe to run twice."""
    rotated = 0
    for cluster in Cluster.objects.select_for_update(no_key=True).exclude(credential=""):
        cluster.credential = credentials.rotate(cluster.credential, cluster=cluster.name)
        cluster.save(update_fields=["credential", "updated_at"])
        rotated += 1
    if rotated:
        record_audit(
            actor=SYSTEM,
            event=Event.CLUSTER_CREDENTIALS_ROTATED,
            source=source,
            new={"count": rotated},
        )
    return rotated


def record_discovery(
    cluster: Cluster, found: Discovered | None, *, now: dt.datetime, error: str = ""
) -> None:
    """Store what a poll discovered (or why it could not ask: the facts found before stay,
    with their time, so a page can say how old they are)."""
    if found is None:
        Cluster.objects.filter(pk=cluster.pk).update(discovery_error=error)
        return
    Cluster.objects.filter(pk=cluster.pk).update(
        kubernetes_version=found.kubernetes_version,
        kueue_versions=list(found.kueue_versions),
        volcano=found.volcano,
        gpu_operator=found.gpu_operator,
        gpu_operator_detail=found.gpu_operator_detail[:300],
        mig_strategy=found.mig_strategy[:16],
        discovered_at=now,
        discovery_error="",
    )
