"""Shared write helpers for services: permission, validation, audit in one transaction."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.forms.models import model_to_dict

from portal import desired
from portal.audit import Actor, Event, System, record_audit
from portal.permissions import is_platform_admin

__all__ = ["Actor", "require_platform_admin", "save_validated", "snapshot"]


def require_platform_admin(actor: Actor) -> None:
    """The system (a command or a task) may; a person needs the admin role."""
    if not isinstance(actor, System) and not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins can change this.")


def snapshot(instance: models.Model) -> dict[str, Any]:
    """A JSON-safe picture of a model's own fields, for the audit log; a related object is
    named as people know it (``cohort: ai-platform``, not its row id)."""
    data = model_to_dict(instance)
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
    cause: models.Model | None = None,
) -> models.Model:
    """Validate (field errors raise ``ValidationError``), save, and audit old -> new
    (``cause``: the reviewed request the save carries out)."""
    old = previous = None
    if instance.pk is not None:
        previous = type(instance)._default_manager.filter(pk=instance.pk).first()
        old = snapshot(previous) if previous is not None else None
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
        new=snapshot(instance),
        cause=cause,
    )
    return instance
