"""Desired state changed: the cluster loop applies it once the transaction commits.

The apps that own desired state (tenants, queues, fleet) sit below the loop (``cluster/``)
and never import it: their services call :func:`changed`, and the loop subscribes when
Django starts (``cluster/apps.py``). Nothing subscribed (a script without the loop's app):
nothing is queued, and the loop's periodic re-apply still converges.
"""

from __future__ import annotations

from collections.abc import Callable

_subscribers: list[Callable[[], None]] = []


def subscribe(listener: Callable[[], None]) -> None:
    """Call ``listener`` whenever desired state changes (inside the writing transaction)."""
    if listener not in _subscribers:
        _subscribers.append(listener)


def changed() -> None:
    """Desired state was written in the current transaction."""
    for listener in _subscribers:
        listener()
