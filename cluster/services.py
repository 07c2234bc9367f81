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

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from cluster import credentials, kubeconfig
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

# What a stored credential is bound to: changing one needs the credential entered again.
BOUND = {
    "connection": "the connection",
    "api_url": "the API server URL",
    "ca_certificate": "the CA certificate",
    "verify_tls": "TLS verification",
    "kubeconfig_context": "the kubeconfig context",
}


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
        _check_credential(cluster, credential.strip())
        cluster.credential = credentials.encrypt(credential.strip())
        cluster.credential_set_at = timezone.now()
    elif cluster.connection == Cluster.Connection.TOKEN and not cluster.credential:
        raise ValidationError({"credential": "A token connection needs the bearer token."})
    after = _snapshot(cluster)
    changed = {k: v for k, v in after.items() if before is None or before[k] != v}
    if before is not None and cluster.credential and not (credential and credential.strip()):
        _check_still_bound(cluster, changed)
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


def _check_credential(cluster: Cluster, secret: str) -> None:
    """A kubeconfig carries inline data only (cluster/kubeconfig.py): field errors say why."""
    if cluster.connection != Cluster.Connection.KUBECONFIG:
        return
    data, unusable = kubeconfig.parse(secret)
    if data is None:
        raise ValidationError({"credential": unusable})
    refused = kubeconfig.refusals(data, allowed_exec=settings.QM_KUBECONFIG_EXEC_ALLOWED)
    if refused:
        raise ValidationError({"credential": refused})


def _check_still_bound(cluster: Cluster, changed: dict[str, Any]) -> None:
    """A stored credential goes only to the endpoint it was given for: changing where or how
    the portal connects needs it entered again (or the old server's token would be sent to
    the new one)."""
    if cluster.connection not in (Cluster.Connection.TOKEN, Cluster.Connection.KUBECONFIG):
        return
    moved = [field for field in BOUND if field in changed]
    if not moved:
        return
    labels = ", ".join(BOUND[field] for field in moved)
    again = (
        f"Enter the credential again: the stored one is bound to the endpoint it was given for "
        f"({labels} changed)."
    )
    errors = {
        field: "Changed without a new credential: enter the credential too." for field in moved
    }
    raise ValidationError({**errors, "credential": again})


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
