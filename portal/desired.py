"""Desired state changed: the cluster loop applies it once the transaction commits.

The apps that own desired state (tenants, queues, fleet) sit below the loop (``loop/``)
and never import it: their services call :func:`changed`, and the loop subscribes when
Django starts (``loop/apps.py``). Nothing subscribed (a script without the loop's app):
nothing is queued, and the loop's periodic re-apply still converges.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Listener = Callable[[Sequence[object]], None]
_subscribers: list[Listener] = []


def subscribe(listener: Listener) -> None:
    """Call ``listener(objects)`` whenever desired state changes (inside the writing
    transaction)."""
    if listener not in _subscribers:
        _subscribers.append(listener)


def changed(*objects: object) -> None:
    """Desired state was written in the current transaction: ``objects`` are the rows
    written (as they were and as they are: a row moved to another cluster concerns both),
    so the loop applies only their clusters; none given: it may concern any cluster."""
    for listener in _subscribers:
        listener(objects)
