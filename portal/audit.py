"""Writing the audit log. Services call :func:`record_audit` inside their transaction."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models

from portal.models import AuditEvent
from portal.observability import request_id as current_request_id


def record_audit(
    *,
    actor: AbstractBaseUser | AnonymousUser | None,
    event: str,
    source: str,
    target: models.Model | None = None,
    team: Any = None,
    old: Any = None,
    new: Any = None,
    request_id: str = "",
) -> AuditEvent:
    """Append one audit row. ``actor`` None means the system (a task or a command)."""
    user = actor if actor is not None and actor.is_authenticated else None
    return AuditEvent.objects.create(
        actor_id=user.pk if user is not None else None,
        actor_name=user.get_username() if user is not None else "system",
        team=team,
        team_name=getattr(team, "slug", "") or "",
        event=event,
        target_type=target._meta.label_lower if target is not None else "",
        target_id=str(target.pk) if target is not None else "",
        target_repr=str(target)[:200] if target is not None else "",
        old=old,
        new=new,
        source=source,
        request_id=request_id or current_request_id.get(),
    )
