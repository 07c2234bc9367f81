"""``{% load queues_page %}``: a ClusterQueue's entry on the Queues page (its quota table and
the first in line), drawn once per what it shows.

An open cohort draws a hundred entries, each a table of a few rows and up to
``PENDING_SHOWN`` waiting workloads; between two polls each shows what it showed before.
Its HTML is kept in this process under every value the partial reads
(``portal.infra.process_cache``: the quantities, links and words are pure functions of
them; the time since a workload was queued is in the key as it is written, so an entry is
drawn anew when it would read differently)."""

from __future__ import annotations

from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from portal.infra.process_cache import ProcessCache
from portal.templatetags.qm import ago

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
