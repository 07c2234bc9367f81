"""Writes to queue objects: platform admins only, validated, audited."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models, transaction

from portal.audit import Event, record_audit
from portal.capacity import fleet_capacity
from portal.services import Actor, require_platform_admin, save_validated
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from queues.rules import Promise, promises, quota_entries
from tenants.rules import spelled_quantity


@transaction.atomic
def save_resource_flavor(*, actor: Actor, flavor: ResourceFlavor, source: str) -> ResourceFlavor:
    require_platform_admin(actor)
    save_validated(flavor, actor=actor, source=source, event=Event.RESOURCE_FLAVOR_SAVED)
    return flavor


@transaction.atomic
def save_cohort(*, actor: Actor, cohort: Cohort, source: str) -> Cohort:
    require_platform_admin(actor)
    save_validated(cohort, actor=actor, source=source, event=Event.COHORT_SAVED)
    return cohort


@transaction.atomic
def save_cluster_queue(
    *,
    actor: Actor,
    cluster_queue: ClusterQueue,
    source: str,
    override_reason: str = "",
    serves: models.Model | None = None,
) -> ClusterQueue:
    """Save a ClusterQueue; ``override_reason``: why a platform admin promises more than the
    fleet could ever offer (recorded with the save). ``serves``: the approved request the
    save carries out, whose decision already checked who decides and the fleet's ceiling
    (its audit row names it)."""
    if serves is None:
        require_platform_admin(actor)
    save_validated(
        cluster_queue, actor=actor, source=source, event=Event.CLUSTER_QUEUE_SAVED, cause=serves
    )
    if override_reason:
        record_audit(
            actor=actor,
            event=Event.CLUSTER_QUEUE_OVERRIDE,
            source=source,
            target=cluster_queue,
            new={"reason": override_reason, "quota": _quota_text(cluster_queue)},
        )
    return cluster_queue


def promises_of(cq: ClusterQueue, edited: ClusterQueue) -> dict[tuple[str, str], Promise]:
    """Each GPU (flavor, resource) of an edited queue next to the fleet behind its flavor:
    what it offers, what every queue would promise with the edit, and whether the edit
    promises more than exists (or ever could). Raises ValueError on a value that is no
    quantity (its field error says why)."""
    others: dict[tuple[str, str], Any] = defaultdict(int)
    # Queues of the same cluster only: another cluster's fleet backs its own queues.
    for other in ClusterQueue.objects.filter(cluster=cq.cluster_id).exclude(pk=cq.pk):
        for key, amount in other.quota().items():
            others[key] += amount
    new = edited.quota()
    capacity = fleet_capacity({resource for _, resource in new}, cq.cluster_id)
    return promises(
        cq.quota(),
        new,
        others,
        capacity.behind if capacity.known else None,
        capacity.flavor_ceiling if capacity.known else None,
    )


def refused_promises(
    shown: dict[tuple[str, str], Promise],
    *,
    override_reason: str,
    confirmed: bool,
    reason_field: str,
    confirm_field: str,
) -> list[str]:
    """Why a valid edit is still refused: promising more than the fleet offers needs a
    confirmation, more than it could ever offer a reason as well."""
    problems = []
    if any(p.beyond_ceiling for p in shown.values()) and not override_reason.strip():
        problems.append(
            "These quotas promise more than the nodes behind their flavor could ever offer, in "
            "any MIG layout: "
            f"say why in {reason_field}, or lower them."
        )
    if any(p.unbacked for p in shown.values()) and not confirmed:
        problems.append(
            "Queues would promise more than the fleet offers behind these flavors: "
            f"{confirm_field} to save anyway."
        )
    return problems


def respelled(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Resource groups with every quantity in the one spelling it is stored and shown in."""
    groups = copy.deepcopy(groups)
    for _, _, quota in quota_entries(groups):
        for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
            if isinstance(quota.get(field), str | int) and str(quota[field]).strip():
                quota[field] = spelled_quantity(str(quota.get("name", "")), str(quota[field]))
    return groups


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
        event=Event.LOCAL_QUEUE_SAVED,
    )
    return local_queue
