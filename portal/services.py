"""Shared write helpers for services: permission, validation, audit in one transaction."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.forms.models import model_to_dict

from portal import desired
from portal.access.permissions import is_platform_admin
from portal.audit.record import Actor, Event, System, admin_event, record_audit

__all__ = ["Actor", "require_platform_admin", "save_validated", "snapshot"]


def require_platform_admin(actor: Actor) -> None:
    """The system (a command or a task) may; a person needs the admin role."""
    if not isinstance(actor, System) and not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins can change this.")


def snapshot(instance: models.Model) -> dict[str, Any]:
    """A JSON-safe picture of a model's own fields, for the audit log; a related object is
    named as people know it (``cohort: ai-platform``, not its row id), a decimal as it is
    written (``400.00``)."""
    data = {
        key: str(value) if isinstance(value, Decimal) else value
        for key, value in model_to_dict(instance).items()
    }
    for field in instance._meta.concrete_fields:
        if field.is_relation and field.name in data and data[field.name] is not None:
            related = getattr(instance, field.name, None)
            data[field.name] = str(related) if related is not None else data[field.name]
    return {
        key: (
            [str(v) if hasattr(v, "pk") else v for v in value]
            if isinstance(value, list | tuple)
            else value
        )
        for key, value in data.items()
    }


@transaction.atomic
def save_validated(
    instance: models.Model,
    *,
    actor: Actor,
    source: str,
    event: Event,
    team: Any = None,
    noted: dict[str, Any] | None = None,
    cause: models.Model | None = None,
) -> models.Model:
    """Validate (field errors raise ``ValidationError``), save, and audit old -> new (with
    ``noted`` beside the new fields: why a rule was overridden; ``cause``: the reviewed
    request the save carries out).

    An object of one cluster stays on it: moving it is no edit (the cluster would lose it,
    pods and all, without the delete's confirmation), so a changed ``cluster`` is a field
    error whatever the door."""
    old = previous = None
    if instance.pk is not None:
        previous = type(instance)._default_manager.filter(pk=instance.pk).first()
        old = snapshot(previous) if previous is not None else None
    if previous is not None:
        stays_on_its_cluster(previous, instance)
    instance.full_clean()
    if old is not None and old == snapshot(instance):
        return instance  # nothing changed: nothing to save, apply or audit
    instance.save()
    desired.changed(*(row for row in (previous, instance) if row is not None))
    record_audit(
        actor=actor,
        event=event,
        source=source,
        target=instance,
        team=team,
        old=old,
        new={**snapshot(instance), **(noted or {})},
        cause=cause,
    )
    return instance


def stays_on_its_cluster(previous: models.Model, instance: models.Model) -> None:
    """Refuse moving an object of one cluster to another (a ``cluster`` field error naming
    the way that is: create it on the other cluster, then delete it here, confirmed)."""
    was, now = getattr(previous, "cluster_id", None), getattr(instance, "cluster_id", None)
    if was is None or was == now:
        return
    kind = instance._meta.verbose_name
    name = getattr(instance, "name", instance.pk)
    raise ValidationError(
        {
            "cluster": [
                f"The {kind} {name} is on cluster {getattr(previous, 'cluster', was)}: it "
                "cannot move. Create it on the other cluster, then delete it here (the delete "
                "says what it removes and asks to confirm)."
            ]
        }
    )


@transaction.atomic
def move_to_cluster(
    instance: models.Model, *, cluster: models.Model, actor: Actor, source: str, team: Any = None
) -> None:
    """Move an object of desired state to another cluster on purpose, audited: the loop
    removes it from the old cluster and makes it on the new one. Only the demo loader does
    (re-homing the rows of its one-cluster database once its second cluster is registered):
    no page, API or admin offers it, for them a move is a create there and a confirmed
    delete here (:func:`stays_on_its_cluster`)."""
    require_platform_admin(actor)
    previous = type(instance)._default_manager.get(pk=instance.pk)
    if previous.cluster_id == cluster.pk:  # type: ignore[attr-defined]
        return
    type(instance)._default_manager.filter(pk=instance.pk).update(cluster=cluster)
    instance.cluster = cluster  # type: ignore[attr-defined]
    desired.changed(previous, instance)
    record_audit(
        actor=actor,
        event=admin_event(str(instance._meta.model_name), "moved"),
        source=source,
        target=instance,
        team=team,
        old={"cluster": str(previous.cluster)},  # type: ignore[attr-defined]
        new={"cluster": str(cluster)},
    )
