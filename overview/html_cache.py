"""HTML kept in this process under everything it was drawn from: a row or a part of a page
whose facts did not move is not drawn again, and one whose facts moved is drawn anew (its
key is new), so a kept drawing is never stale. Bounded (the least recently used goes first)
and shared by the process's threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

Key = tuple[Any, ...]


class Drawings:
    def __init__(self, most: int = 4096) -> None:
        self.most = most
        self._kept: OrderedDict[Key, str] = OrderedDict()
        self._lock = threading.Lock()

    def found(self, keys: Iterable[Key]) -> dict[Key, str]:
        """The drawings kept under these keys (those not kept are missing)."""
        with self._lock:
            found = {key: self._kept[key] for key in keys if key in self._kept}
            for key in found:
                self._kept.move_to_end(key)
        return found

    def keep(self, drawn: Mapping[Key, str]) -> None:
        with self._lock:
            self._kept.update(drawn)
            while len(self._kept) > self.most:
                self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
