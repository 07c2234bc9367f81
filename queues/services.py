"""Writes to queue objects: platform admins only, validated, audited."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from portal.audit import record_audit
from portal.services import Actor, require_platform_admin, save_validated
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor


@transaction.atomic
def save_resource_flavor(*, actor: Actor, flavor: ResourceFlavor, source: str) -> ResourceFlavor:
    require_platform_admin(actor)
    save_validated(flavor, actor=actor, source=source, event="resource_flavor.saved")
    return flavor


@transaction.atomic
def save_cohort(*, actor: Actor, cohort: Cohort, source: str) -> Cohort:
    require_platform_admin(actor)
    save_validated(cohort, actor=actor, source=source, event="cohort.saved")
    return cohort


@transaction.atomic
def save_cluster_queue(
    *, actor: Actor, cluster_queue: ClusterQueue, source: str, override_reason: str = ""
) -> ClusterQueue:
    """Save a ClusterQueue; ``override_reason``: why a platform admin promises more than the
    fleet could ever offer (recorded with the save)."""
    require_platform_admin(actor)
    save_validated(cluster_queue, actor=actor, source=source, event="cluster_queue.saved")
    if override_reason:
        record_audit(
            actor=actor,
            event="cluster_queue.override",
            source=source,
            target=cluster_queue,
            new={"reason": override_reason, "quota": _quota_text(cluster_queue)},
        )
    return cluster_queue


def _quota_text(cq: ClusterQueue) -> dict[str, str]:
    return {
        f"{flavor} {resource}": str(amount) for (flavor, resource), amount in cq.quota().items()
    }


@transaction.atomic
def save_local_queue(*, actor: Actor, local_queue: LocalQueue, source: str) -> LocalQueue:
    """Create or update a LocalQueue.

    Kueue makes ``spec.clusterQueue`` immutable; pointing an existing LocalQueue elsewhere
    means the applier deletes and recreates it, which the portal does not do yet, so it is
    refused here with the way out.
    """
    require_platform_admin(actor)
    if local_queue.pk is not None:
        before = (
            LocalQueue.objects.filter(pk=local_queue.pk)
            .values_list("cluster_queue_id", flat=True)
            .first()
        )
        if before is not None and before != local_queue.cluster_queue_id:
            raise ValidationError(
                {
                    "cluster_queue": "Kueue does not allow changing a LocalQueue's ClusterQueue; "
                    "create a new LocalQueue and delete this one."
                }
            )
    save_validated(
        local_queue,
        actor=actor,
        source=source,
        team=local_queue.namespace.team,
        event="local_queue.saved",
    )
    return local_queue
