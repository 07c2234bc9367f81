"""Deleting an object of desired state (a namespace, a ClusterQueue) means more than its row:
the applier removes what the portal put in the cluster for it, requests about it stay in the
history under its name, and the open ones can no longer be applied.

The apps that own such objects (tenants, queues) sit below the changes app, which knows the
open requests, and never import it: a delete asks :func:`explain` what it means (the
confirmation page and the API say it) and calls :func:`removing` in its transaction before
the row goes; the changes app subscribes when Django starts (``changes/apps.py``). The
cluster app says what leaves the cluster through the same hook (``cluster/apps.py``),
although it sits beneath the tenants now, so that one call gathers every consequence.
Nothing subscribed (a script without those apps): nothing is explained and nothing closed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db import models, transaction

from portal import desired
from portal.audit.record import AdminEvent, record_audit
from portal.services import Actor, snapshot


@dataclass(frozen=True)
class Consequences:
    """What deleting an object means, as sentences: ``cluster`` what leaves the cluster
    (or stays there), ``history`` what the portal keeps and which open requests end."""

    cluster: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)


class Closer(Protocol):
    def __call__(self, obj: models.Model, *, actor: Actor, source: str) -> None: ...


Explainer = Callable[[models.Model], Consequences]
_explainers: list[Explainer] = []
_closers: list[Closer] = []


def explains(explainer: Explainer) -> None:
    """Say what deleting an object means (an explainer ignores objects it knows nothing of)."""
    if explainer not in _explainers:
        _explainers.append(explainer)


def closes(closer: Closer) -> None:
    """Call ``closer(obj, actor=..., source=...)`` in the transaction that deletes ``obj``,
    before its row goes."""
    if closer not in _closers:
        _closers.append(closer)


def explain(obj: models.Model) -> Consequences:
    """What deleting ``obj`` means, from every app that knows."""
    cluster: list[str] = []
    history: list[str] = []
    for explainer in _explainers:
        said = explainer(obj)
        cluster.extend(said.cluster)
        history.extend(said.history)
    return Consequences(cluster=cluster, history=history)


def removing(obj: models.Model, *, actor: Actor, source: str) -> None:
    """``obj`` is about to be deleted in the current transaction."""
    for closer in _closers:
        closer(obj, actor=actor, source=source)


@transaction.atomic
def delete_desired(
    instance: models.Model, *, actor: Actor, source: str, event: AdminEvent, team: Any = None
) -> None:
    """Delete an object of desired state, whatever the door: the requests about it end
    first (:func:`removing`), the audit row keeps what it was, and the loop removes it from
    its cluster once the transaction commits."""
    removing(instance, actor=actor, source=source)
    record_audit(
        actor=actor,
        event=event,
        source=source,
        target=instance,
        team=team,
        old=snapshot(instance),
    )
    instance.delete()
    desired.changed(instance)
