"""Writing the audit log. Services call :func:`record_audit` inside their transaction.

Every write names who did it: a person (``User``), or the portal itself (:class:`System`,
a beat task, a command, the demo loader) with the row's ``source`` saying which. Work done
because a person decided (an approved quota change applied, a MIG change's queues moved)
acts as that person and names the request it carries out (``cause``), as Zulip's services
take an ``acting_user``: there is no ``None`` meaning "somebody, we forget who"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models

from portal.audit.events import AdminEvent, Event, admin_event
from portal.infra.observability import request_id as current_request_id
from portal.models import AuditEvent


@dataclass(frozen=True)
class System:
    """The portal acting for nobody in person; ``name`` is the audit row's actor name (an
    auto-approval rule says which rule)."""

    name: str = "system"

    @property
    def is_authenticated(self) -> bool:  # a permission check reads it as it reads a user's
        return False


SYSTEM = System()

__all__ = [
    "SYSTEM",
    "Actor",
    "AdminEvent",
    "Event",
    "System",
    "admin_event",
    "cause_of",
    "record_audit",
]

# Who acts: a user (AnonymousUser reaches a service only to be refused), or the system.
Actor = AbstractBaseUser | AnonymousUser | System


def cause_of(request: models.Model) -> str:
    """How an audit row names the reviewed request a write carries out
    (``changes.quotachangerequest:42``, as its target is named)."""
    return f"{request._meta.label_lower}:{request.pk}"


def record_audit(
    *,
    actor: Actor,
    event: Event | AdminEvent,
    source: str,
    target: models.Model | None = None,
    team: Any = None,
    old: Any = None,
    new: Any = None,
    request_id: str = "",
    cause: models.Model | None = None,
) -> AuditEvent:
    """Append one audit row; ``cause``: the reviewed request this write carries out."""
    if actor is None:  # typed away; said at run time too, for callers mypy does not see
        raise TypeError("record_audit needs an actor: a user, or portal.audit.record.SYSTEM.")
    user = actor if not isinstance(actor, System) and actor.is_authenticated else None
    return AuditEvent.objects.create(
        actor_id=user.pk if user is not None else None,
        actor_name=user.get_username()
        if user is not None
        else actor.name
        if isinstance(actor, System)
        else "system",
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
        cause=cause_of(cause) if cause is not None else "",
    )
