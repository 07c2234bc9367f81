"""A cluster's observed rows were written: what is computed from them runs next, in the poll.

Why a cluster's work waits is known once its rows are written (the nodes, the pods, the
workloads, the drift), as Kueue writes its reason into a Workload's status when it decides.
The explainer (``diagnostics``) sits above the loop and the loop never imports it: the poll
calls :func:`cluster_written`, and diagnostics subscribes when Django starts
(``diagnostics/apps.py``). Nothing subscribed (a script without diagnostics' app): nothing
is explained, the rows are written all the same.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

Listener = Callable[[int, dt.datetime], object]
_subscribers: list[Listener] = []


def subscribe(listener: Listener) -> None:
    """Call ``listener(cluster_id, now)`` after each write of a cluster's observed rows
    (inside the poll's transaction, after its drift is recorded)."""
    if listener not in _subscribers:
        _subscribers.append(listener)


def cluster_written(cluster_id: int, *, now: dt.datetime) -> None:
    """Cluster ``cluster_id``'s observed rows and drift were written as of ``now`` (in the
    current transaction): every subscriber computes what it keeps with them."""
    for listener in _subscribers:
        listener(cluster_id, now)
