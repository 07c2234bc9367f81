"""``?watch=true``: the API server's watch, served from a bounded log of the cluster's writes.

Every write the cluster stores or removes is logged with its resourceVersion (the log
keeps the last ``size`` of them). A watch from resourceVersion X streams each later change
of the matching objects as one JSON line ``{"type": "ADDED|MODIFIED|DELETED", "object"}``;
an object that stops (starts) matching the selectors is sent as DELETED (ADDED), as the
watch cache does. Without a resourceVersion (or with ``0``, or ``sendInitialEvents``) the
stream opens with an ADDED event per current object. A version older than the log answers
one ERROR event, ``too old resource version: X (oldest)``, reason Expired, code 410, in a
200 stream (as recorded). ``allowWatchBookmarks`` adds BOOKMARK events (every
``bookmark_seconds`` and just before ``timeoutSeconds`` ends the stream).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from devcluster.cluster import Cluster
from devcluster.errors import APIError
from devcluster.resources import Resource
from devcluster.selectors import SelectorError, parse_field_selector, parse_label_selector

Obj = dict[str, Any]
DEFAULT_TIMEOUT = 1800.0  # the API server's minimum request timeout
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class Change:
    rv: int
    table: tuple[str, str]  # the cluster's storage key
    old: Obj | None
    new: Obj | None


class Log:
    """The cluster's recent writes in resourceVersion order; watchers wait on ``changed``."""

    def __init__(self, cluster: Cluster, *, size: int = 10000, bookmark_seconds: float = 60.0):
        self.cluster = cluster
        self.size = size
        self.bookmark_seconds = bookmark_seconds
        self.changes: collections.deque[Change] = collections.deque()
        self.floor = cluster.rv  # every change after this version is in the log
        self.last = cluster.rv
        self.changed = threading.Condition()
        # First, so a controller's write made in reaction to this one is logged after it.
        cluster.watchers.insert(0, self.record)

    def record(self, resource: Resource, old: Obj | None, new: Obj | None) -> None:
        rv = int(new["metadata"]["resourceVersion"]) if new is not None else self.cluster.rv
        with self.changed:
            if rv > self.last + 1:
                # Versions were used without a stored write (the seed): what came before
                # them cannot be replayed.
                self.changes.clear()
                self.floor = rv - 1
            self.changes.append(Change(rv, Cluster.storage_key(resource), old, new))
            self.last = max(self.last, rv)
            while len(self.changes) > self.size:
                self.floor = self.changes.popleft().rv
            self.changed.notify_all()

    def since(self, rv: int) -> list[Change] | None:
        """The changes after ``rv``, or None when the log no longer reaches back to it."""
        if rv < self.floor:
            return None
        return [c for c in self.changes if c.rv > rv]


def validate(query: dict[str, str]) -> None:
    """The API server's checks of a watch's options (422 on ListOptions)."""
    match = query.get("resourceVersionMatch", "")
    initial = "sendInitialEvents" in query
    causes = []
    if initial and match != "NotOlderThan":
        causes.append(
            (
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            )
        )
    if match and not initial:
        causes.append(
            (
                "FieldValueForbidden",
                "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            )
        )
    if match and match != "NotOlderThan":
        causes.append(
            (
                "FieldValueNotSupported",
                f'Unsupported value: "{match}": supported values: "NotOlderThan"',
            )
        )
    if not causes:
        return
    field = "resourceVersionMatch"
    errors = [f"{field}: {message}" for _, message in causes]
    listed = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
    raise APIError(
        422,
        f'ListOptions.meta.k8s.io "" is invalid: {listed}',
        details={
            "group": "meta.k8s.io",
            "kind": "ListOptions",
            "causes": [{"reason": r, "message": m, "field": field} for r, m in causes],
        },
    )


def expired(rv: int, floor: int) -> Obj:
    return {
        "type": "ERROR",
        "object": APIError(
            410, f"too old resource version: {rv} ({floor})", reason="Expired"
        ).status(),
    }


def bookmark(resource: Resource, version: str, rv: int, *, initial_end: bool = False) -> Obj:
    api_version = f"{resource.group}/{version}" if resource.group else version
    metadata: Obj = {"resourceVersion": str(rv)}
    if initial_end:
        metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
    obj: Obj = {"kind": resource.kind, "apiVersion": api_version, "metadata": metadata}
    if resource.kind == "Pod":
        obj |= {"spec": {"containers": None}, "status": {}}
    return {"type": "BOOKMARK", "object": obj}


class Filter:
    """Which objects one watch sees (namespace, label and field selectors)."""

    def __init__(self, cluster: Cluster, resource: Resource, namespace: str, query: dict[str, str]):
        self.cluster = cluster
        self.resource = resource
        self.table = Cluster.storage_key(resource)
        self.namespace = namespace
        try:
            labels = query.get("labelSelector", "")
            fields = query.get("fieldSelector", "")
            self.labels = parse_label_selector(labels) if labels else []
            self.fields = parse_field_selector(fields, resource.field_labels) if fields else None
        except SelectorError as exc:
            raise APIError(400, str(exc)) from None

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        labels = meta.get("labels") or {}
        if not all(r.matches(labels) for r in self.labels):
            return False
        return self.fields is None or bool(
            self.fields(self.cluster._field_view(self.resource, obj))
        )

    def event(self, change: Change) -> tuple[str, Obj] | None:
        """The event this change is for this watch, if any."""
        if change.table != self.table:
            return None
        was, now = self.matches(change.old), self.matches(change.new)
        if change.new is None:
            assert change.old is not None
            gone = {
                **change.old,
                "metadata": {**change.old["metadata"], "resourceVersion": str(change.rv)},
            }
            return ("DELETED", gone) if was else None
        if was and now:
            return "MODIFIED", change.new
        if now:
            return "ADDED", change.new
        if was:
            return "DELETED", change.new
        return None


def stream(
    log: Log,
    resource: Resource,
    version: str,
    namespace: str,
    query: dict[str, str],
    encode: Callable[[str, Obj], Obj],
) -> Callable[[Callable[[], bool]], Iterator[bytes]]:
    """Check the watch's options now (errors are answers), and return the stream: a
    function of ``alive`` (is the client still there?) yielding one line per event."""
    validate(query)
    selected = Filter(log.cluster, resource, namespace, query)
    raw_rv = query.get("resourceVersion", "")
    initial = query.get("sendInitialEvents") == "true" or raw_rv in ("", "0")
    try:
        start = 0 if initial else int(raw_rv)
    except ValueError:
        raise APIError(400, f'resourceVersion: Invalid value: "{raw_rv}": invalid value') from None
    timeout = float(query.get("timeoutSeconds") or DEFAULT_TIMEOUT)
    bookmarks = query.get("allowWatchBookmarks") == "true"

    def run(alive: Callable[[], bool]) -> Iterator[bytes]:
        deadline = time.monotonic() + timeout
        cursor = start
        if initial:
            with log.cluster.lock:
                current = [o for o in log.cluster.all(resource) if selected.matches(o)]
                cursor = log.last
            for obj in sorted(current, key=lambda o: int(o["metadata"]["resourceVersion"])):
                yield _line(encode("ADDED", obj))
            if query.get("sendInitialEvents") == "true" and bookmarks:
                yield _line(bookmark(resource, version, cursor, initial_end=True))
        yield from _follow(
            log, resource, version, selected, encode, cursor, deadline, bookmarks, alive
        )

    return run


def _follow(
    log: Log,
    resource: Resource,
    version: str,
    selected: Filter,
    encode: Callable[[str, Obj], Obj],
    cursor: int,
    deadline: float,
    bookmarks: bool,
    alive: Callable[[], bool],
) -> Iterator[bytes]:
    next_bookmark = min(time.monotonic() + log.bookmark_seconds, deadline - 1.0)
    while True:
        with log.changed:
            changes = log.since(cursor)
            if changes == []:
                wait = min(deadline, next_bookmark if bookmarks else deadline) - time.monotonic()
                log.changed.wait(timeout=max(0.0, min(wait, 1.0)))
                changes = log.since(cursor)
            latest = log.last
        if changes is None:
            yield _line(expired(cursor, log.floor))
            return
        for change in changes:
            found = selected.event(change)
            if found is not None:
                yield _line(encode(*found))
            cursor = change.rv
        now = time.monotonic()
        if bookmarks and now >= next_bookmark:
            cursor = max(cursor, latest)
            yield _line(bookmark(resource, version, cursor))
            next_bookmark = (
                min(now + log.bookmark_seconds, deadline) if now < deadline - 1.0 else deadline + 1
            )
        if now >= deadline or (not changes and not alive()):
            return


def _line(event: Obj) -> bytes:
    return orjson.dumps(event) + b"\n"
