"""The small multiples drawn as SVG (pure): every bucket of the period on the axis, the line
broken where data is missing, the start of the history and the day in progress marked, and
each bucket's values in its tooltip, numbers as the pages write them (portal.vocabulary.numbers); the
grouped bars drawn at the size they are read on a phone."""

from __future__ import annotations

import re
from xml.etree import ElementTree

from portal.vocabulary.numbers import number
from usage.charts import Bucket, _ticks, bar_chart, small_line_chart

SVG = "{http://www.w3.org/2000/svg}"
DAYS = [Bucket(f"Nov {d}", f"Mon, Nov {d}") for d in range(1, 7)] + [
    Bucket("today", "Sat, Nov 7 (today so far: to 14:00 UTC)", partial=True)
]


def chart(series: list[tuple[str, list[float | None]]], **options: float) -> ElementTree.Element:
    svg = small_line_chart(
        "team-a: nvidia.com/gpu in use against the quota, daily averages",
        DAYS,
        series,
        what="Daily averages",
        **options,
    )
    return ElementTree.fromstring(svg)  # well-formed XML, or this raises


def tooltips(root: ElementTree.Element) -> list[str]:
    return [
        r.findtext(f"{SVG}title") or "" for r in root.iter(f"{SVG}rect") if r.get("class") == "hit"
    ]


def test_each_bucket_has_a_tooltip_with_its_exact_values() -> None:
    root = chart(
        [
            ("in use", [None, None, 1234.5, 3.25, 4, 5, 2.125]),
            ("quota", [None, None, 1600, 1600, 1600, 1600, 1600]),
        ]
    )
    tips = tooltips(root)
    assert len(tips) == 7  # every bucket, those before the history too
    assert tips[0] == "Mon, Nov 1: no data"
    assert tips[2] == "Mon, Nov 3: in use 1,234.5, quota 1,600"
    assert tips[6] == "Sat, Nov 7 (today so far: to 14:00 UTC): in use 2.1, quota 1,600"
    assert root.get("aria-label") == (
        "team-a: nvidia.com/gpu in use against the quota, daily averages"
    )
    assert root.findtext(f"{SVG}desc") == (
        "Daily averages from Mon, Nov 3 to Sat, Nov 7 (today so far: to 14:00 UTC). "
        "in use: lowest 2.1, highest 1,234.5, last 2.1. "
        "quota: lowest 1,600, highest 1,600, last 1,600."
    )


def test_the_start_of_the_history_is_marked_only_when_the_period_begins_before_it() -> None:
    late = chart([("in use", [None, None, 1, 2, 3, 4, 5])])
    shaded = [r for r in late.iter(f"{SVG}rect") if r.get("class") == "before"]
    assert len(shaded) == 1
    texts = [t.text for t in late.iter(f"{SVG}text")]
    assert "history from Nov 3" in texts
    early = chart([("in use", [1, 2, 3, 4, 5, 6, 7])])
    assert not [r for r in early.iter(f"{SVG}rect") if r.get("class") == "before"]
    assert not [t for t in early.iter(f"{SVG}text") if (t.text or "").startswith("history")]


def test_a_gap_breaks_the_line_and_the_day_in_progress_is_shaded_and_hollow() -> None:
    root = chart([("in use", [1, 2, None, None, 3, 4, 5])])
    lines = list(root.iter(f"{SVG}polyline"))
    assert [len(line.get("points", "").split()) for line in lines] == [2, 3]
    partial = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "partial"]
    assert len(partial) == 1
    points = list(root.iter(f"{SVG}circle"))
    assert [p.get("fill") for p in points] == ["#1f2937"] * 4 + ["#fff"]  # today's hollow
    ticks = [t.text for t in root.iter(f"{SVG}text") if t.get("y") == "164"]  # the x axis
    assert ticks[0] == "Nov 1" and ticks[-1] == "today"


def test_charts_of_one_resource_share_the_scale_they_are_given() -> None:
    small = chart([("in use", [1, 1, 1, 1, 1, 1, 1])], peak=16)
    ticks = [t.text for t in small.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert ticks[:3] == ["0", "10", "20"]  # up to 16, rounded to a nice 20
    alone = chart([("in use", [1, 1, 1, 1, 1, 1, 1])])
    assert [t.text for t in alone.iter(f"{SVG}text") if t.get("text-anchor") == "end"][:3] == [
        "0",
        "0.5",
        "1",
    ]


def test_names_are_escaped_and_numbers_read_as_the_pages_write_them() -> None:
    svg = small_line_chart(
        'a<b> & "c"', [Bucket("x<y>", "x<y>")], [("in <use>", [1.0])], what="Hourly averages"
    )
    assert "<b>" not in svg and "<use>" not in svg and "x<y>" not in svg
    ElementTree.fromstring(svg)
    assert re.search(r"in &lt;use&gt; 1<", svg)
    assert [number(v) for v in (0, 16.0, 1234.5678, -0.0001, 0.1)] == [
        "0",
        "16",
        "1,234.6",
        "0",
        "0.1",
    ]


def test_about_five_ticks_and_the_last_never_crowded() -> None:
    assert _ticks(7) == [0, 2, 4, 6]
    assert _ticks(24) == [0, 5, 10, 15, 23]  # 20 would run into the last label, "00:00"
    assert _ticks(30) == [0, 6, 12, 18, 24, 29]
    assert _ticks(1) == [0] and _ticks(0) == []


def test_bars_write_their_numbers_as_the_pages_do_and_scale_to_their_box() -> None:
    svg = bar_chart(
        "Fleet: allocated against allocatable",
        [
            ("train gpu", [("allocatable", 1234.5), ("allocated", 8.327)]),
            ("dev <x>", [("allocated", 25.169)]),
        ],
    )
    root = ElementTree.fromstring(svg)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts == [
        "train gpu",
        "allocatable 1,234.5",
        "allocated 8.3",
        "dev <x>",
        "allocated 25.2",
    ]
    titles = [
        r.findtext(f"{SVG}title") for r in root.iter(f"{SVG}rect") if r.findtext(f"{SVG}title")
    ]
    assert titles == [
        "train gpu allocatable: 1,234.5",
        "train gpu allocated: 8.3",
        "dev <x> allocated: 25.2",
    ]
    # Drawn about as wide as a phone shows it, like the small multiples: the text stays legible.
    assert root.get("viewBox", "").startswith("0 0 360 ") and root.get("width") is None
    assert "bars" in root.get("class", "").split()
    right = max(float(t.get("x", 0)) + 6 * len(t.text or "") for t in root.iter(f"{SVG}text"))
    assert right <= 360  # the longest number fits after the longest bar
