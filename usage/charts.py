"""Charts drawn on the server as SVG (pure): lines and grouped bars that stay readable
without colour (each series has its own dash pattern or fill pattern and a text label), with
a title and the numbers in the markup for screen readers."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

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


def line_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    width: int = 640,
    height: int = 200,
    unit: str = "",
) -> str:
    """Lines over shared x labels; series keep their dash pattern and are named at the end."""
    left, right, top, bottom = 44, 150, 12, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = _nice(max((v for _, values in series for v in values), default=0))
    n = max(len(labels), 2)

    def x(i: int) -> float:
        return left + plot_w * i / (n - 1)

    def y(v: float) -> float:
        return top + plot_h * (1 - v / peak)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<line x1="{left}" y1="{y(0):.1f}" x2="{left + plot_w}" y2="{y(0):.1f}" stroke="#9aa5b5"/>',
        f'<text x="{left - 6}" y="{y(peak) + 4:.1f}" text-anchor="end" class="tick">{peak:g}{escape(unit)}</text>',
        f'<text x="{left - 6}" y="{y(0) + 4:.1f}" text-anchor="end" class="tick">0</text>',
    ]
    step = max(1, len(labels) // 6)
    for i in range(0, len(labels), step):
        parts.append(
            f'<text x="{x(i):.1f}" y="{height - 8}" text-anchor="middle" class="tick">{escape(labels[i])}</text>'
        )
    for index, (name, values) in enumerate(series):
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        dash = DASHES[index % len(DASHES)]
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="#1f2937" stroke-width="2"'
            + (f' stroke-dasharray="{dash}"' if dash else "")
            + f"><title>{escape(name)}: {', '.join(f'{v:g}' for v in values)}</title></polyline>"
        )
        if values:
            parts.append(
                f'<text x="{x(len(values) - 1) + 6:.1f}" y="{y(values[-1]) + 4:.1f}" class="label">'
                f"{escape(name)} {values[-1]:g}{escape(unit)}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(
    title: str,
    rows: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    *,
    width: int = 640,
    unit: str = "",
) -> str:
    """Grouped horizontal bars: one group per row, one bar per series, each with its fill
    pattern and its number written next to it."""
    left, bar, gap = 190, 12, 10
    groups = len(rows)
    per_group = max((len(values) for _, values in rows), default=1)
    height = 20 + groups * (per_group * (bar + 2) + gap)
    peak = _nice(max((v for _, values in rows for _, v in values), default=0))
    plot_w = width - left - 90
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>{PATTERNS}'
    ]
    top = 10.0
    for label, values in rows:
        parts.append(
            f'<text x="{left - 8}" y="{top + bar:.1f}" text-anchor="end" class="label">{escape(label)}</text>'
        )
        for index, (name, value) in enumerate(values):
            w = plot_w * value / peak if peak else 0
            parts.append(
                f'<rect x="{left}" y="{top:.1f}" width="{max(w, 0.5):.1f}" height="{bar}" '
                f'fill="{FILLS[index % len(FILLS)]}" stroke="#1f2937" stroke-width="0.6">'
                f"<title>{escape(label)} {escape(name)}: {value:g}{escape(unit)}</title></rect>"
                f'<text x="{left + w + 4:.1f}" y="{top + bar - 2:.1f}" class="tick">'
                f"{escape(name)} {value:g}{escape(unit)}</text>"
            )
            top += bar + 2
        top += gap
    parts.append("</svg>")
    return "".join(parts)
