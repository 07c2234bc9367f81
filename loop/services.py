"""What a platform admin does to the loop by hand: take the portal's fields of a managed
object back from another writer (a ``kubectl edit`` or ``kubectl patch`` in the cluster),
with a forced server-side apply, audited."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.utils import timezone

from cluster.connection import gateway_for
from cluster.models import AppliedObject, Cluster, Drift
from kube import ObjectRef
from loop.apply import content_hash
from loop.desired import collect_manifests
from portal.audit.events import Event
from portal.audit.record import record_audit
from portal.services import Actor, require_platform_admin


def take_back_fields(
    *, actor: Actor, cluster: Cluster, kind: str, namespace: str, name: str, source: str
) -> AppliedObject:
    """Apply the portal's rendering of one managed object with ``force``: the fields another
    writer took (the apply's conflict) are the portal's again, and the cluster enforces the
    portal's values. The drift rows of the object stay open until the next poll sees it."""
    require_platform_admin(actor)
    manifest = next(
        (
            m
            for m in collect_manifests(cluster=cluster)
            if (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"])
            == (kind, namespace, name)
        ),
        None,
    )
    if manifest is None:
        raise ValidationError(
            {"name": [f"The portal manages no {kind} {namespace}/{name} on {cluster.name}."]}
        )
    record = AppliedObject.objects.on(cluster).filter(kind=kind, namespace=namespace, name=name)
    before: dict[str, Any] = dict(record.values("outcome", "message").first() or {})
    ref = ObjectRef.of(manifest)
    drift = {
        d.field: d.observed
        for d in Drift.objects.on(cluster).filter(resolved_at__isnull=True, subject=str(ref))
    }
    live = gateway_for(cluster).apply(manifest, force=True)
    now = timezone.now()
    applied, _ = AppliedObject.objects.on(cluster).update_or_create(
        cluster=cluster,
        kind=kind,
        namespace=namespace,
        name=name,
        defaults={
            "api_version": manifest["apiVersion"],
            "content_hash": content_hash(manifest),
            "outcome": AppliedObject.Outcome.APPLIED,
            "message": "",
            "last_attempt_at": now,
            "applied_at": now,
            "resource_version": str((live.get("metadata") or {}).get("resourceVersion", "")),
        },
    )
    record_audit(
        actor=actor,
        event=Event.MANAGED_FIELDS_TAKEN_BACK,
        source=source,
        target=applied,
        old={**before, "in the cluster": drift},
        new={"applied with force": str(ref)},
    )
    return applied
