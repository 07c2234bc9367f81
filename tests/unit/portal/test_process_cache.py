"""The one process cache: values found by everything they are computed from, bounded, the
least recently used out first, computed once per key, and a function's results kept under
its arguments."""

from __future__ import annotations

import threading

import pytest

from portal.infra.process_cache import ProcessCache, clear_every_cache, kept


def test_the_least_recently_used_value_goes_first_when_the_bound_is_reached() -> None:
    cache: ProcessCache[tuple[str], str] = ProcessCache("test", most=2)
    cache.keep({("a",): "<a>", ("b",): "<b>"})
    assert cache.found([("a",), ("x",)]) == {("a",): "<a>"}  # "a" now the most recent
    cache.keep({("c",): "<c>"})
    assert len(cache) == 2
    assert cache.found([("a",), ("b",), ("c",)]) == {("a",): "<a>", ("c",): "<c>"}


def test_a_value_is_computed_once_per_key_and_again_for_a_new_key() -> None:
    cache: ProcessCache[tuple[str, int], str] = ProcessCache("test")
    computed: list[int] = []

    def draw(version: int) -> str:
        computed.append(version)
        return f"<p>{version}</p>"

    assert cache.get(("row", 1), lambda: draw(1)) == "<p>1</p>"
    assert cache.get(("row", 1), lambda: draw(1)) == "<p>1</p>"
    assert cache.get(("row", 2), lambda: draw(2)) == "<p>2</p>"  # its facts moved: a new key
    assert computed == [1, 2]


def test_a_failed_computation_keeps_nothing() -> None:
    cache: ProcessCache[str, str] = ProcessCache("test")

    def fails() -> str:
        raise ValueError("no such route")

    for _ in range(2):
        with pytest.raises(ValueError, match="no such route"):
            cache.get("x", fails)
    assert len(cache) == 0


def test_a_kept_function_is_called_once_per_arguments_and_shared_by_threads() -> None:
    calls: list[tuple[int, str]] = []

    @kept("test squares", most=8)
    def square(n: int, unit: str = "") -> str:
        calls.append((n, unit))
        return f"{n * n}{unit}"

    threads = [threading.Thread(target=square, args=(3,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert square(3) == "9" and square(3, unit=" m²") == "9 m²"
    assert square(3, unit=" m²") == "9 m²"
    assert calls.count((3, " m²")) == 1
    assert 1 <= calls.count((3, "")) <= 4  # threads that met it missing may each compute it
    clear_every_cache()
    assert square(3) == "9" and calls.count((3, "")) >= 2  # forgotten, computed again
