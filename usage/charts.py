"""Charts drawn on the server as SVG (pure): lines and grouped bars that stay readable
without colour (each series has its own dash pattern or fill pattern and a text label), with
a title and the numbers in the markup for screen readers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from portal.vocabulary.numbers import number

# Named lines over the buckets, a value per bucket (None: no data there).
Series = Sequence[tuple[str, Sequence[float | None]]]
DASHES = ("", "6 3", "2 3", "10 3 2 3")
FILLS = ("url(#solid)", "url(#hatch)", "url(#dots)", "url(#cross)")
PATTERNS = """<defs>
<pattern id="solid" width="4" height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" fill="#1f5fbf"/></pattern>
<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff"/><line x1="0" y1="0" x2="0" y2="6" stroke="#b45309" stroke-width="3"/></pattern>
<pattern id="dots" width="5" height="5" patternUnits="userSpaceOnUse"><rect width="5" height="5" fill="#fff"/><circle cx="2.5" cy="2.5" r="1.5" fill="#1e6b34"/></pattern>
<pattern id="cross" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#fff"/><path d="M0 0L6 6M6 0L0 6" stroke="#6b21a8" stroke-width="1.2"/></pattern>
</defs>"""


def _nice(value: float) -> float:
    if value <= 0:
        return 1.0
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000):
        if value <= step:
            return float(step)
    return float(value)


@dataclass(frozen=True)
class Bucket:
    """One step of a chart's x axis: its tick ("Nov 18"), its name in tooltips ("Wed, Nov
    18"), and whether it is still going (today so far)."""

    tick: str
    name: str
    partial: bool = False


def _ticks(count: int) -> list[int]:
    """About five evenly spaced x ticks, the first and the last always among them."""
    step = max(1, -(-count // 5))
    ticks = list(range(0, count, step))
    if ticks and count - 1 - ticks[-1] < step * 0.75:  # the last label ends at the edge
        ticks.pop()
    return [*ticks, count - 1] if count else []


def _runs(values: Sequence[float | None]) -> list[list[int]]:
    """Indices of the unbroken stretches of data (a gap in the history breaks the line)."""
    runs: list[list[int]] = []
    for index, value in enumerate(values):
        if value is None:
            continue
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs


def _describe(
    buckets: Sequence[Bucket],
    series: Series,
    first: int,
    what: str,
    unit: str,
) -> str:
    parts = [f"{what} from {buckets[first].name} to {buckets[-1].name}."]
    for name, values in series:
        known = [v for v in values if v is not None]
        if known:
            parts.append(
                f"{name}: lowest {number(min(known))}{unit}, highest {number(max(known))}{unit},"
                f" last {number(known[-1])}{unit}."
            )
    return " ".join(parts)


@dataclass(frozen=True)
class _Frame:
    """Where a small chart's buckets and values land."""

    left: float
    top: float
    plot_w: float
    plot_h: float
    count: int
    peak: float

    @property
    def column(self) -> float:
        return self.plot_w / max(self.count, 1)

    def x(self, i: int) -> float:
        return self.left + self.column * (i + 0.5)

    def y(self, v: float) -> float:
        return self.top + self.plot_h * (1 - v / self.peak)


def _grid_and_ticks(f: _Frame, buckets: Sequence[Bucket], height: int) -> list[str]:
    parts = []
    for fraction in (0, 0.5, 1):
        at = f.y(f.peak * fraction)
        parts.append(
            f'<line x1="{f.left}" y1="{at:.1f}" x2="{f.left + f.plot_w}" y2="{at:.1f}" '
            f'stroke="{"#9aa5b5" if fraction == 0 else "#e3e7ee"}"/>'
            f'<text x="{f.left - 4}" y="{at + 3.5:.1f}" text-anchor="end" class="tick">'
            f"{number(f.peak * fraction)}</text>"
        )
    last = len(buckets) - 1
    for i in _ticks(len(buckets)):
        anchor, at = "middle", f.x(i)
        if last and i == last:
            anchor, at = "end", f.left + f.plot_w
        elif last and i == 0:
            anchor, at = "start", f.left
        parts.append(
            f'<text x="{at:.1f}" y="{height - 6}" text-anchor="{anchor}" class="tick">'
            f"{escape(buckets[i].tick)}</text>"
        )
    return parts


def _history_marks(f: _Frame, buckets: Sequence[Bucket], first: int) -> list[str]:
    """The stretch before the history begins, and the day in progress, shaded."""
    parts = []
    if first > 0:
        edge = f.left + f.column * first
        anchor, at = ("start", edge + 3) if first < len(buckets) / 2 else ("end", edge - 3)
        parts.append(
            f'<rect x="{f.left}" y="{f.top}" width="{edge - f.left:.1f}" height="{f.plot_h}" '
            f'class="before"/><line x1="{edge:.1f}" y1="{f.top}" x2="{edge:.1f}" '
            f'y2="{f.top + f.plot_h}" stroke="#5b6475" stroke-dasharray="2 2"/>'
            f'<text x="{at:.1f}" y="{f.top + 10}" text-anchor="{anchor}" class="tick">'
            f"history from {escape(buckets[first].tick)}</text>"
        )
    parts.extend(
        f'<rect x="{f.left + f.column * i:.1f}" y="{f.top}" width="{f.column:.1f}" '
        f'height="{f.plot_h}" class="partial"/>'
        for i, bucket in enumerate(buckets)
        if bucket.partial
    )
    return parts


def _lines(f: _Frame, buckets: Sequence[Bucket], series: Series) -> list[str]:
    """Each series' legend and its lines (broken where data is missing); the first series
    gets a point per bucket, hollow for the bucket still going."""
    parts, legend = [], f.left
    for index, (name, values) in enumerate(series):
        dash = DASHES[index % len(DASHES)]
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(
            f'<line x1="{legend}" y1="9" x2="{legend + 18}" y2="9" stroke="#1f2937" '
            f'stroke-width="2"{dashed}/><text x="{legend + 22}" y="12" class="label">'
            f"{escape(name)}</text>"
        )
        legend += 34 + 6 * len(name)
        for run in _runs(values):
            points = " ".join(f"{f.x(i):.1f},{f.y(values[i] or 0):.1f}" for i in run)
            parts.append(
                f'<polyline points="{points}" fill="none" stroke="#1f2937" stroke-width="2"'
                f"{dashed}/>"
            )
        for i, v in enumerate(values if index == 0 else ()):
            if v is not None:
                hollow = buckets[i].partial
                parts.append(
                    f'<circle cx="{f.x(i):.1f}" cy="{f.y(v):.1f}" r="{3 if hollow else 2}" '
                    f'fill="{"#fff" if hollow else "#1f2937"}" stroke="#1f2937"/>'
                )
    return parts


def _hits(
    f: _Frame,
    buckets: Sequence[Bucket],
    series: Series,
    unit: str,
) -> list[str]:
    """A column per bucket whose tooltip gives its exact values."""
    parts = []
    for i, bucket in enumerate(buckets):
        values = [(name, vs[i] if i < len(vs) else None) for name, vs in series]
        text = ", ".join(f"{name} {number(v)}{unit}" for name, v in values if v is not None)
        parts.append(
            f'<rect x="{f.left + f.column * i:.1f}" y="{f.top}" width="{f.column:.1f}" '
            f'height="{f.plot_h}" class="hit"><title>{escape(bucket.name)}: '
            f"{escape(text or 'no data')}</title></rect>"
        )
    return parts


def small_line_chart(
    title: str,
    buckets: Sequence[Bucket],
    series: Series,
    *,
    what: str,
    peak: float = 0,
    unit: str = "",
    width: int = 360,
    height: int = 170,
) -> str:
    """One of a grid of small multiples: lines over every bucket of the period (None: no
    data there, the line breaks). Before the first data the history has not begun: shaded
    and marked. A bucket still going (today so far) is shaded and its point hollow. Each bucket
    is a column whose tooltip gives the exact values; ``<desc>`` sums the chart up.
    ``peak``: the top of the scale shared with the neighbouring charts."""
    known = [v for _, values in series for v in values if v is not None]
    frame = _Frame(36, 24, width - 46, height - 46, len(buckets), _nice(max([peak, *known])))
    first = min((run[0] for _, values in series for run in _runs(values)), default=0)
    return "".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart small" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">'
            f"<title>{escape(title)}</title>"
            f"<desc>{escape(_describe(buckets, series, first, what, unit))}</desc>",
            *_history_marks(frame, buckets, first),
            *_grid_and_ticks(frame, buckets, height),
            *_lines(frame, buckets, series),
            *_hits(frame, buckets, series, unit),
            "</svg>",
        ]
    )


def bar_chart(
    title: str,
    rows: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    *,
    width: int = 360,
    unit: str = "",
) -> str:
    """Grouped horizontal bars: one group per row (its label above its bars), one bar per
    series, each with its fill pattern and its number written next to it. Drawn at about
    the size it is read on a phone, like the small multiples, and scaled to its box."""
    left, bar, gap, label = 4, 12, 8, 16
    per_group = max((len(values) for _, values in rows), default=1)
    height = 6 + len(rows) * (label + per_group * (bar + 2) + gap)
    peak = _nice(max((v for _, values in rows for _, v in values), default=0))
    plot_w = width - left - 124  # room for the longest "allocatable 1,234.5" after a bar
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart bars" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>{PATTERNS}'
    ]
    top = 4.0
    for name_of_row, values in rows:
        parts.append(
            f'<text x="{left}" y="{top + 11:.1f}" class="label">{escape(name_of_row)}</text>'
        )
        top += label
        for index, (name, value) in enumerate(values):
            w = plot_w * value / peak if peak else 0
            amount = f"{number(value)}{escape(unit)}"
            parts.append(
                f'<rect x="{left}" y="{top:.1f}" width="{max(w, 0.5):.1f}" height="{bar}" '
                f'fill="{FILLS[index % len(FILLS)]}" stroke="#1f2937" stroke-width="0.6">'
                f"<title>{escape(name_of_row)} {escape(name)}: {amount}</title></rect>"
                f'<text x="{left + w + 4:.1f}" y="{top + bar - 2:.1f}" class="tick">'
                f"{escape(name)} {amount}</text>"
            )
            top += bar + 2
        top += gap
    parts.append("</svg>")
    return "".join(parts)
