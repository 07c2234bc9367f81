"""Drawing of the node lists: a node's GPUs as strips, its GPU resources as bars and its GPU
health, each built once per distinct drawing (the nodes of a pool share a few) instead of
once per node by the template engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from gpus.strips import GpuStrip
from portal.infra.process_cache import kept
from portal.templatetags.qm import when

register = template.Library()

# One GPU as gpu_strips draws it: (label, lost, slices), each slice (busy, width) with busy
# True, False or None (not known).
Slices = tuple[tuple[bool | None, int], ...]
Drawing = tuple[str, bool, Slices]


@register.simple_tag
def gpu_strips(node_name: str, strips: Sequence[GpuStrip]) -> SafeString:
    """A node's GPUs as strips, one box per GPU and one slice per MIG instance, in the list
    box that names the node: the one drawing of the node list and the node page (the boxes
    are drawn once per distinct drawing, the nodes of a pool share a few)."""
    return format_html(
        '<div class="gpus" role="list" aria-label="GPUs of {}">{}</div>',
        node_name,
        _drawn(
            tuple((g.label, g.lost, tuple((s.busy, s.width) for s in g.slices)) for g in strips)
        ),
    )


@kept("GPU strips", 2048)
def _drawn(gpus: tuple[Drawing, ...]) -> SafeString:
    return format_html_join("", "{}", ((_gpu(*gpu),) for gpu in gpus))


def _gpu(label: str, lost: bool, slices: Slices) -> SafeString:
    if lost:
        inner = format_html('<span class="slice {}">✕</span>', "lost")
    else:
        inner = format_html_join(
            "",
            '<span class="slice {} p{}"></span>',  # pN: N compute slices wide (portal.css)
            (
                ("busy" if busy else "unknown" if busy is None else "free", width)
                for busy, width in slices
            ),
        )
    return format_html(
        '<span class="gpu{}" role="listitem" title="{}" aria-label="{}">{}</span>',
        " gpu-lost" if lost else "",
        label,
        label,
        inner,
    )


@register.simple_tag
def gpu_bars(resources: Sequence[tuple[str, int, int]]) -> SafeString:
    """A node's GPU resources as bars, allocated of allocatable (``gpu_resources()``)."""
    return _bars(tuple(resources))


@kept("GPU bars", 2048)
def _bars(resources: tuple[tuple[str, int, int], ...]) -> SafeString:
    if not resources:
        return format_html('<span class="muted">{}</span>', "no GPU resources offered")
    return format_html_join(
        "",
        '<div class="bar" role="img" aria-label="{0}: {1} of {2} allocated">'
        '<span class="bar-label"><code>{0}</code> {1} / {2}</span>'
        '<span class="bar-track"><span class="bar-fill fill-{3}"></span></span></div>',
        (
            (name, used, total, min(100, round(100 * used / total)) if total else 0)
            for name, total, used in resources
        ),
    )


@register.simple_tag
def dra_bars(row: Any) -> SafeString:
    """A node's devices by DRA as bars (``node_rows.RowDra``), allocated of published per
    kind of device, and what its partitionable GPUs' counters have left."""
    return _dra_bars(
        tuple(
            (o.what, o.product, o.taken, o.devices, o.available, o.fill, _tainted(o.tainted))
            for o in row.offers
        ),
        row.left,
        row.slices,
    )


def _tainted(count: int) -> str:
    return f", {count:,} tainted" if count else ""


@kept("DRA bars", 2048)
def _dra_bars(
    offers: tuple[tuple[str, str, int, int, int, int, str], ...], left: int, slices: int
) -> SafeString:
    bars = format_html_join(
        "",
        '<div class="bar" role="img" aria-label="{0} of {1} by DRA: {2} of {3} allocated, '
        '{4} could be had now{6}"><span class="bar-label"><code>{0}</code> {2} / {3} '
        '<span class="muted">by DRA{6}</span></span>'
        '<span class="bar-track"><span class="bar-fill fill-{5}"></span></span></div>',
        offers,
    )
    if not slices:
        return bars
    return format_html(
        '{}<p class="small muted">counters left: {} of {} memory slices</p>', bars, left, slices
    )


HEALTH_TAGS = {
    "critical": ("tag bad", "critical"),
    "warning": ("tag warn", "warning"),
    "info": ("tag", "note"),
}


@register.simple_tag
def health_cell(health: Any, util: int | None) -> SafeString:
    """A node's last GPU health (``attach_health``): its worst level, average use, the first
    two findings, and since when the exporter was not read."""
    if health is None:
        return format_html('<span class="small muted">{}</span>', "no DCGM data")
    titles = tuple(str(f.get("title", "")) for f in (health.findings or [])[:2])
    since = str(when(health.observed_at)) if health.error else ""
    return _health(health.worst, util, titles, health.error, since)


@kept("health cells", 2048)
def _health(
    worst: str, util: int | None, titles: tuple[str, ...], error: str, since: str
) -> SafeString:
    css, word = HEALTH_TAGS.get(worst, ("tag ok", "healthy"))
    parts = [format_html('<span class="{}">{}</span>', css, word)]
    if util is not None:
        parts.append(
            format_html(
                ' <span class="small" title="average GPU utilisation (DCGM)">{} % busy</span>',
                util,
            )
        )
    parts += [format_html('<div class="small">{}</div>', title) for title in titles]
    if error:
        parts.append(
            format_html(
                '<div class="small muted" title="{}">exporter not read since {}</div>',
                error,
                mark_safe(since),
            )
        )
    return format_html_join("", "{}", ((part,) for part in parts))
