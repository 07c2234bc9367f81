"""Writes to queue objects: platform admins only, validated, audited."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models, transaction

from cluster.scope import cluster_id_of
from fleet.capacity import fleet_capacity_read
from portal.audit.record import Event, admin_event
from portal.infra.round_trips import Read, read_together
from portal.removal import delete_desired
from portal.services import Actor, require_platform_admin, save_validated
from queues.dra import Ceiling, dra_ceilings, kueue_dra_from, kueue_dra_read
from queues.kueue_config import KueueDra, counter_text
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from queues.rules import Promise, promises, quota_entries
from queues.selectors import promised_by_others, promised_by_others_read
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
    promise_more_than_exists: bool = False,
    serves: models.Model | None = None,
) -> ClusterQueue:
    """Save a ClusterQueue, held to the fleet behind its flavors whatever the door: a raise
    that leaves the queues promising more than those nodes offer needs
    ``promise_more_than_exists``; more than they could ever offer, in any MIG layout, an
    ``override_reason`` as well (recorded in the save's audit row). Refused: field errors on
    those names, nothing written. ``serves``: the approved request the save carries out,
    whose decision already checked who decides and the fleet's ceiling (its audit row names
    it); its decision stands."""
    if serves is None:
        require_platform_admin(actor)
    cluster_queue.full_clean()  # a quota that is no quantity: its field error first
    beyond = False
    if serves is None:
        shown = promises_of(_stored(cluster_queue), cluster_queue)
        errors = promise_errors(
            shown,
            override_reason=override_reason,
            promise_more_than_exists=promise_more_than_exists,
        )
        if errors:
            raise ValidationError(errors)
        beyond = any(p.beyond_ceiling for p in shown.values())
    save_validated(
        cluster_queue,
        actor=actor,
        source=source,
        event=Event.CLUSTER_QUEUE_SAVED,
        noted={"override_reason": override_reason.strip()} if beyond else None,
        cause=serves,
    )
    return cluster_queue


def _stored(cq: ClusterQueue) -> ClusterQueue:
    """The queue as the database holds it (a new one: on its cluster, promising nothing)."""
    stored = ClusterQueue.objects.filter(pk=cq.pk).first() if cq.pk is not None else None
    return stored or ClusterQueue(cluster_id=cq.cluster_id, resource_groups=[])


def promises_of(cq: ClusterQueue, edited: ClusterQueue) -> dict[tuple[str, str], Promise]:
    """Each GPU (flavor, resource) of an edited queue next to the fleet behind its flavor:
    what it offers, what every queue would promise with the edit, and whether the edit
    promises more than exists (or ever could). Raises ValueError on a value that is no
    quantity (its field error says why). One round trip (two where Kueue counts one of its
    resources in DRA devices)."""
    asked = promises_read(cq, edited)
    return asked.answer(read_together(*asked.reads))[0]


@dataclass(frozen=True)
class PromisesRead:
    """``promises_of``'s reads, for a page that sends them with its own in one round trip,
    and ``answer``: from their rows, the promises, Kueue's DRA settings on the queue's
    cluster and the DRA ceilings of its resources (which the editor's notes read too)."""

    reads: tuple[Read, ...]
    # Per read: whether it reads queues, flavors and nodes alone (a page may keep its rows
    # under their version: ``queues.selectors.editor_kept_under_read``)
    kept: tuple[bool, ...]
    answer: Callable[
        [Sequence[list[Any]]],
        tuple[dict[tuple[str, str], Promise], KueueDra, dict[str, Ceiling]],
    ]


def promises_read(cq: ClusterQueue, edited: ClusterQueue) -> PromisesRead:
    """The reads of ``promises_of`` (raises ValueError as it does): what the other queues of
    the cluster promise of the edited queue's resources, summed in the database (another
    cluster's fleet backs its own queues), the fleet's capacity behind its flavors, and
    Kueue's DRA settings there. Not the whole fleet's ceiling: a queue's promises are
    weighed against its flavors' alone."""
    new = edited.quota()
    resources = {resource for _, resource in new}
    cluster_id = cluster_id_of(edited.cluster_id)
    capacity = fleet_capacity_read(
        resources, cluster_id, flavors={flavor for flavor, _ in new}, whole=False
    )
    reads = (
        promised_by_others_read(cq, cluster_id, resources),
        kueue_dra_read(cluster_id),
        *capacity.reads,
    )

    def answer(
        rows: Sequence[list[Any]],
    ) -> tuple[dict[tuple[str, str], Promise], KueueDra, dict[str, Ceiling]]:
        others, config_rows, *capacity_rows = rows
        config = kueue_dra_from(config_rows)
        fleet = capacity.answer(capacity_rows)
        dra = dra_ceilings(cluster_id, resources, config)
        shown = promises(
            cq.quota(),
            new,
            promised_by_others(others),
            fleet.behind if fleet.known else None,
            fleet.flavor_ceiling if fleet.known else None,
            {r: c.amount for r, c in dra.items()},
            {r: c.unit for r, c in dra.items()},
        )
        return shown, config, dra

    # the other queues' promises and the fleet's capacity (nodes and flavors alone, as the
    # capacity hook says), not Kueue's configuration (an observed ConfigMap)
    kept = (True, False, *(True for _ in capacity.reads))
    return PromisesRead(reads, kept, answer)


def promise_errors(
    shown: dict[tuple[str, str], Promise], *, override_reason: str, promise_more_than_exists: bool
) -> dict[str, list[str]]:
    """Why a valid edit is still refused, as field errors every door shows alike: promising
    more than the fleet offers needs a confirmation, more than it could ever offer a reason
    as well."""
    errors: dict[str, list[str]] = {}
    beyond = {key: p for key, p in shown.items() if p.beyond_ceiling}
    if beyond and not override_reason.strip():
        errors["override_reason"] = [
            f"Queues would promise {counter_text(p.promised)} {resource}, which Kueue charges "
            f"in the DRA counter {p.unit}, but the cluster's DRA devices could give at most "
            f"{counter_text(p.ceiling or 0)} of it at once: give the reason to promise beyond "
            "the fleet (recorded with the save), or lower it."
            for (_, resource), p in sorted(beyond.items())
            if p.unit not in ("", "devices")
        ]
        if any(p.unit in ("", "devices") for p in beyond.values()):
            errors["override_reason"].insert(
                0,
                "These quotas promise more than the nodes behind their flavor could ever "
                "offer, in any MIG layout: give the reason to promise beyond the fleet "
                "(recorded with the save), or lower them.",
            )
    if any(p.unbacked for p in shown.values()) and not promise_more_than_exists:
        errors["promise_more_than_exists"] = [
            "Queues would promise more than the fleet offers behind these flavors: confirm "
            "to promise more than exists, or lower them."
        ]
    return errors


def respelled(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Resource groups with every quantity in the one spelling it is stored and shown in."""
    groups = copy.deepcopy(groups)
    for _, _, quota in quota_entries(groups):
        for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
            if isinstance(quota.get(field), str | int) and str(quota[field]).strip():
                quota[field] = spelled_quantity(str(quota.get("name", "")), str(quota[field]))
    return groups


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


@transaction.atomic
def hold_for_budget(
    *,
    actor: Actor,
    local_queues: list[LocalQueue],
    held: bool,
    source: str,
    cause: models.Model | None = None,
) -> list[LocalQueue]:
    """Hold (or release) LocalQueues for their team's spent budget: ``budget_hold``, which
    the renderer sends as ``stopPolicy: Hold`` (no new admissions, running work goes on) and
    the loop applies; the stop policy an admin set stays as it was. One audit row per
    queue that changes (``cause``: the budget); the changed ones are returned."""
    require_platform_admin(actor)
    changed = []
    for lq in local_queues:
        if lq.budget_hold == held:
            continue
        lq.budget_hold = held
        save_validated(
            lq,
            actor=actor,
            source=source,
            team=lq.namespace.team,
            event=Event.LOCAL_QUEUE_BUDGET_HOLD,
            cause=cause,
        )
        changed.append(lq)
    return changed


QueueObject = ResourceFlavor | Cohort | ClusterQueue | LocalQueue


@transaction.atomic
def delete_queue_object(*, actor: Actor, obj: QueueObject, source: str) -> None:
    """Delete a ResourceFlavor, Cohort, ClusterQueue or LocalQueue (platform admins): the
    requests about it end, the audit keeps what it was, the loop removes it from its
    cluster. What still points at it (a queue at its cohort, a LocalQueue at its
    ClusterQueue) keeps it: the database refuses, and nothing changes."""
    require_platform_admin(actor)
    team = obj.namespace.team if isinstance(obj, LocalQueue) else None
    delete_desired(
        obj,
        actor=actor,
        source=source,
        event=admin_event(str(obj._meta.model_name), "deleted"),
        team=team,
    )
