"""The drawings a process keeps: found by key, bounded, the least recently used out first."""

from __future__ import annotations

from overview.html_cache import Drawings


def test_the_least_recently_used_drawing_goes_first_when_the_bound_is_reached() -> None:
    kept = Drawings(most=2)
    kept.keep({("a",): "<a>", ("b",): "<b>"})
    assert kept.found([("a",), ("x",)]) == {("a",): "<a>"}  # "a" now the most recent
    kept.keep({("c",): "<c>"})
    assert len(kept) == 2
    assert kept.found([("a",), ("b",), ("c",)]) == {("a",): "<a>", ("c",): "<c>"}
