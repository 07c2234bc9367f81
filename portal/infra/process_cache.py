"""The one way a value is kept in a web process between requests (docs/architecture.md, "One
cache convention").

A value is kept under a key that holds *everything it is computed from* (the rows' facts, the
columns, the time zone, the day...), never under a name with a version beside it: a value
whose inputs moved has a new key and is computed anew, so a kept value is never stale and
nothing is ever invalidated. The old keys simply age out: each cache is bounded and the least
recently used goes first. Shared by the process's threads (one lock per cache).

Why not Django's cache framework: these values are HTML fragments and small tuples looked up
hundreds of times a page; its local-memory backend pickles each value and a shared backend
(Redis) costs a round trip per lookup, both more than drawing the fragment again. What the
processes must share goes to the database (``diagnostics.explainer`` stores its explanations
with the observed rows) or to the shared store (``portal.infra.shared_store``).

Two ways in: :class:`ProcessCache` for a value computed from a key the caller builds (the
node rows, the home's tables, the Fleet page's pool cards), :func:`kept` for a function whose
arguments are that key (the GPU strips, bars and health cells, the navigation, a route's
pieces). ``functools.cache`` stays only on pure computations of immutable input that draw no
HTML (``gpus/``, which imports nothing of ours: the MIG catalog, the strips' geometry) and on
a process's set-up (a gateway per connection).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Generic, ParamSpec, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")

_EVERY: list[ProcessCache[object, object]] = []  # for clear_every_cache (tests)


class ProcessCache(Generic[K, V]):
    """Values kept in this process under everything they are computed from, at most
    ``most`` of them (the least recently used out first)."""

    def __init__(self, name: str, most: int = 4096) -> None:
        self.name = name
        self.most = most
        self._kept: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        _EVERY.append(self)  # type: ignore[arg-type]

    def found(self, keys: Iterable[K]) -> dict[K, V]:
        """The values kept under these keys (those not kept are missing)."""
        with self._lock:
            found = {key: self._kept[key] for key in keys if key in self._kept}
            for key in found:
                self._kept.move_to_end(key)
        return found

    def keep(self, values: Mapping[K, V]) -> None:
        """Keep these values, dropping the least recently used beyond the bound."""
        with self._lock:
            self._kept.update(values)
            while len(self._kept) > self.most:
                self._kept.popitem(last=False)

    def get(self, key: K, compute: Callable[[], V]) -> V:
        """The value kept under ``key``, computed (outside the lock) and kept if it is not.
        Two threads may both compute a missing value: the same inputs give the same value."""
        found = self.found([key])
        if key in found:
            return found[key]
        value = compute()
        self.keep({key: value})
        return value

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)


def kept(name: str, most: int = 2048) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A function's results kept in a :class:`ProcessCache` under its arguments (which must
    be hashable and be everything the result is computed from: a pure function)."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        cache: ProcessCache[Hashable, R] = ProcessCache(name, most)

        @functools.wraps(function)
        def keeping(*args: P.args, **kwargs: P.kwargs) -> R:
            key = (args, tuple(sorted(kwargs.items()))) if kwargs else args
            return cache.get(key, lambda: function(*args, **kwargs))

        keeping.cache = cache  # type: ignore[attr-defined]
        return keeping

    return wrap


def clear_every_cache() -> None:
    """Forget every value kept in this process (a test that counts what is drawn)."""
    for cache in _EVERY:
        cache.clear()
