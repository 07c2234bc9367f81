"""``{% load inbox %}``: ``{% inbox_lines inbox cluster_column %}`` draws the lines of the MIG
change inbox. An approver's inbox holds every pending request (hundreds at a time); drawn by
the template language, its lines took as long as the rest of the page (each line a dozen
variable lookups and filters). Here each line is one ``format_html``."""

from __future__ import annotations

from collections.abc import Iterable

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from changes.selectors import InboxLine
from portal.templatetags.links import link

register = template.Library()


@register.simple_tag
def inbox_lines(requests: Iterable[InboxLine], cluster_column: bool) -> SafeString:
    """One ``<li>`` per request: its link, its cluster (when the page names clusters), what
    it asks and the verdict of its assessment."""
    return format_html_join("", "{}", ((_line(c, cluster_column),) for c in requests))


def _line(change: InboxLine, cluster_column: bool) -> SafeString:
    nodes = ", ".join(change.nodes or ())
    if change.is_drain:
        what = format_html("cordon and drain {}, suggested by the GPU health check", nodes)
    else:
        what = format_html(
            "{} → <code>{}</code> for {} by {}",
            nodes,
            change.target_config,
            change.team_slug,
            change.requested_by,
        )
    cluster = ""
    if cluster_column:
        named = change.of_cluster
        cluster = format_html(
            '<span class="tag" title="cluster">{}</span> ',
            (named.display_name or named.name) if named else "",
        )
    return format_html(
        '<li><a href="{}">#{}</a> {}{} <span class="tag verdict-{}">{}</span></li>',
        link("change-detail", change.pk),
        change.pk,
        cluster,
        what,
        change.verdict,
        change.verdict_label,
    )
