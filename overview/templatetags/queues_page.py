"""``{% load queues_page %}``: a ClusterQueue's entry on the Queues page (its quota table and
the first in line), drawn once per what it shows.

An open cohort draws a hundred entries, each a table of a few rows and up to
``PENDING_SHOWN`` waiting workloads; between two polls each shows what it showed before.
Its HTML is kept in this process under every value the partial reads
(``portal.infra.process_cache``: the quantities, links and words are pure functions of
them; the time since a workload was queued is in the key as it is written, so an entry is
drawn anew when it would read differently). When it is drawn, its quota rows and the
workloads in line are written out here (``quota_table_rows``, ``in_line``): a template node
per cell cost more than the cell."""

from __future__ import annotations

import html
from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from portal.infra.process_cache import ProcessCache
from portal.templatetags.links import link
from portal.templatetags.qm import ago, quantity

register = template.Library()

_DRAWN: ProcessCache[tuple[Any, ...], str] = ProcessCache("queue entries", most=8192)
_ROW = ("flavor", "resource", "nominal", "borrowing", "lending", "used", "reserved", "borrowed")


def _key(e: dict[str, Any], idp: str, cluster: str, is_admin: bool) -> tuple[Any, ...]:
    """Everything ``overview/queues_entry.html`` is drawn from."""
    cq, share = e["cq"], e["share"]
    rows = tuple((*(row[name] for name in _ROW), row.get("lent")) for row in e["rows"])
    waiting = tuple(
        (
            bool(getattr(w, "shown", False)),
            w.namespace,
            w.name,
            tuple((resource, repr(amount)) for resource, amount in (w.requests or {}).items()),
            ago(w.queued_at) if w.queued_at else "",
            w.message,
        )
        for w in e["waiting"]
    )
    return (
        *(idp, cluster, bool(is_admin), cq.name, cq.stop_policy),
        *(share.weight, share.value, e["pending"], e["admitted"], e["waiting_count"]),
        rows,
        waiting,
    )


@register.simple_tag(takes_context=True)
def queue_entry(context: template.Context, e: dict[str, Any]) -> SafeString:
    """The ClusterQueue entry ``e`` (``overview.views._queue_entry``) in its section: the
    section's id prefix (``idp``), cluster (``section_cluster``) and whether the user edits
    queues (``is_admin``) come from the page."""
    idp, cluster = str(context.get("idp") or ""), context.get("section_cluster")
    is_admin = bool(context.get("is_admin"))
    key = _key(e, idp, getattr(cluster, "name", ""), is_admin)
    shown = {"e": e, "idp": idp, "section_cluster": cluster, "is_admin": is_admin}
    html = _DRAWN.get(key, lambda: render_to_string("overview/queues_entry.html", shown))
    return mark_safe(html)  # the template's own output, escaped as it was drawn


_QUOTA_ROW = (
    '<tr><td class="head">{}</td><td class="head"><code>{}</code></td>'
    '<td data-label="Nominal">{}</td><td data-label="Borrow limit">{}</td>'
    '<td data-label="Lend limit">{}</td><td data-label="In use">{}</td>'
    '<td data-label="Reserved">{}</td><td data-label="Borrowed">{}</td>'
    '<td data-label="Lent">{}</td></tr>'
)


def _text(value: Any) -> str:
    """Text as the template escapes it (``django.utils.html.escape`` is this, behind a check
    for lazy text that costs more than the escaping: these values are never lazy)."""
    return html.escape(str(value))


@register.simple_tag
def quota_table_rows(rows: list[dict[str, Any]]) -> SafeString:
    """The body rows of a queue's quota table (``queues.selectors.quota_rows`` with
    ``lent``), written out: a cell each, no template node per cell."""
    return mark_safe("".join(_quota_row(row) for row in rows))  # each value escaped


def _quota_row(row: dict[str, Any]) -> str:
    resource = row["resource"]

    def amount(name: str) -> str:
        return _text(quantity(row.get(name), resource))

    borrowed = amount("borrowed")
    if row["borrowed"] not in ("0", "—"):
        borrowed = f'<span class="tag warn">{borrowed}</span>'
    return _QUOTA_ROW.format(
        _text(row["flavor"]),
        _text(resource),
        amount("nominal"),
        amount("borrowing") if row["borrowing"] else "unlimited",
        amount("lending") if row["lending"] else "all",
        amount("used"),
        amount("reserved"),
        borrowed,
        amount("lent"),
    )


@register.simple_tag
def in_line(waiting: list[Any], cluster: Any) -> SafeString:
    """The list items of the workloads first in a queue's line (``shown``: whether the
    viewer may read its name), written out."""
    return mark_safe("".join(_in_line(w, cluster) for w in waiting))  # each value escaped


def _in_line(w: Any, cluster: Any) -> str:
    shown = bool(getattr(w, "shown", False))
    if shown:
        path = link("workload", getattr(cluster, "name", ""), w.namespace, w.name)
        who = f'<a href="{_text(path)}"><code>{_text(w.namespace)}/{_text(w.name)}</code></a>'
    else:
        who = '<span class="muted">another team\'s workload</span>'
    asks = "".join(
        f" · {_text(quantity(amount, resource))} <code>{_text(resource)}</code>"
        for resource, amount in (w.requests or {}).items()
    )
    queued = f" · queued {_text(ago(w.queued_at))}" if w.queued_at else ""
    said = f'<br><span class="muted">{_text(w.message)}</span>' if shown and w.message else ""
    return f"<li>{who}{asks}{queued}{said}</li>"
