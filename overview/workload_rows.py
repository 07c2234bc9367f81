"""The rows of the Workloads list, written with ``format_html``: fifty rows of a dozen
cells each took the template engine longer than the database took to find them."""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from portal.templatetags.links import link
from portal.templatetags.qm import ago, gpus, thousands

STATE_TAG = {"admitted": " ok", "evicted": " bad", "waiting": " warn", "finished": ""}


def workload_rows(workloads: list[Any], *, cluster_column: bool) -> SafeString:
    """The ``<tr>`` of each workload (each carrying ``of_cluster``, ``state``, ``team`` and
    ``queue``), linking to its page."""
    return format_html_join("\n", "{}", ((_row(w, cluster_column),) for w in workloads))


def _row(w: Any, cluster_column: bool) -> SafeString:
    cluster = w.of_cluster
    href = link("workload", cluster.name, w.namespace, w.name)
    where = ""
    if w.state in ("waiting", "evicted") and w.position is not None:
        where = format_html(
            ' <span class="small muted">#{} in line</span>', thousands(w.position + 1)
        )
    if w.evictions and w.state != "evicted":
        where = format_html(
            '{} <span class="small muted">evicted {} times</span>', where, thousands(w.evictions)
        )
    queue = format_html(" → <code>{}</code>", w.queue) if w.queue else ""
    return format_html(
        '<tr id="workload-{}-row"><td class="head"><a href="{}"><code>{}/{}</code></a></td>{}'
        '<td data-label="Team">{}</td><td data-label="State"><span class="tag{}">{}</span>{}</td>'
        '<td data-label="Queue" class="long"><code>{}</code>{}</td>'
        '<td data-label="GPUs">{}</td><td data-label="Priority">{}</td>'
        '<td data-label="Created" class="small">{}</td></tr>',
        w.pk,
        href,
        w.namespace,
        w.name,
        format_html('<td data-label="Cluster">{}</td>', cluster.display_name or cluster.name)
        if cluster_column
        else "",
        w.team or "—",
        STATE_TAG.get(w.state, ""),
        w.state,
        where,
        w.queue_name or "—",
        queue,
        gpus(w.requests),
        w.priority,
        ago(w.created_at) if w.created_at else "—",
    )
