"""Drawing of the node lists: a node's GPUs as strips, built once per distinct drawing (the
nodes of a pool share a few) instead of once per node by the template engine."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from gpus.strips import GpuStrip

register = template.Library()

# One GPU as components/gpu_strips.html draws it: (label, lost, slices), each slice
# (busy, width) with busy True, False or None (not known).
Slices = tuple[tuple[bool | None, int], ...]
Drawing = tuple[str, bool, Slices]


@register.simple_tag
def gpu_strips(strips: Sequence[GpuStrip]) -> SafeString:
    """The GPU boxes of one node (the list box around them is the template's: it names
    the node)."""
    return _drawn(
        tuple((g.label, g.lost, tuple((s.busy, s.width) for s in g.slices)) for g in strips)
    )


@functools.lru_cache(maxsize=2048)
def _drawn(gpus: tuple[Drawing, ...]) -> SafeString:
    return format_html_join("", "{}", ((_gpu(*gpu),) for gpu in gpus))


def _gpu(label: str, lost: bool, slices: Slices) -> SafeString:
    if lost:
        inner = format_html('<span class="slice {}" style="flex:1">✕</span>', "lost")
    else:
        inner = format_html_join(
            "",
            '<span class="slice {} p{}" style="flex:{}"></span>',
            (
                ("busy" if busy else "unknown" if busy is None else "free", width, width)
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
