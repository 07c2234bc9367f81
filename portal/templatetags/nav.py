"""``{% load nav %}``: ``{% main_nav %}`` is the navigation of every page, drawn once per
process for each of the few things it depends on (the page's route, the user's roles, the
decisions waiting, the unread notifications, the user's name): as a template it took a
good part of a small page's time."""

from __future__ import annotations

from django import template
from django.urls import get_script_prefix, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from portal.infra.process_cache import kept

register = template.Library()

# (route, label, the routes it is current on, shown to: "all", "decider" or "admin")
LINKS = (
    ("home", "My teams", ("home",), "all"),
    ("workspace", "Workspace", ("workspace",), "decider"),
    ("change-list", "MIG changes", ("change-list", "change-detail", "mig-policy"), "all"),
    ("quota-list", "Quota requests", ("quota-list", "quota-detail"), "all"),
    ("queues", "Queues", ("queues",), "all"),
    ("workloads", "Workloads", ("workloads", "workload"), "all"),
    ("planner", "Planner", ("planner",), "admin"),
    ("fleet", "Fleet", ("fleet", "fleet-node"), "all"),
    # Costs, budgets and idle GPUs hang off Usage (its page links them): one more item wrapped
    # the admin's bar at 1366
    (
        "reports",
        "Usage",
        (
            *("reports", "costs", "cost-invoice", "cost-prices"),
            *("budgets", "budget-page", "idle-list", "idle-policy"),
        ),
        "all",
    ),
    ("audit", "Audit", ("audit",), "all"),
    ("clusters", "Clusters", ("clusters", "cluster-page"), "admin"),
    ("admin:index", "Admin", (), "admin"),
)


@register.simple_tag(takes_context=True)
def main_nav(context: template.Context) -> SafeString:
    """The main navigation and who is signed in (the sign-out form is the template's)."""
    request = context["request"]
    match = getattr(request, "resolver_match", None)
    counts = context.get("nav_counts")
    decider = bool(counts and counts.decider)
    return _drawn(
        match.url_name if match is not None else "",
        bool(context.get("user_is_platform_admin")),
        decider,
        int(counts.waiting) if decider and counts is not None else 0,
        int(context.get("notifications_unread") or 0),
        str(context["user"].get_username()),
        get_script_prefix(),
    )


@kept("navigation", 1024)
def _drawn(
    current: str, admin: bool, decider: bool, waiting: int, unread: int, name: str, prefix: str
) -> SafeString:
    shown = {"all": True, "decider": decider, "admin": admin}
    links = []
    for route, label, current_on, who in LINKS:
        if not shown[who]:
            continue
        here = mark_safe(' aria-current="page"') if current in current_on else ""
        count = (
            format_html(
                ' <span class="count" title="decisions waiting">{}<span class="sr-only"> '
                "waiting</span></span>",
                waiting,
            )
            if route == "workspace" and waiting
            else ""
        )
        links.append((reverse(route), here, label, count))
    nav = format_html_join("\n      ", '<a href="{}"{}>{}{}</a>', links)
    bell = (
        format_html(
            ' aria-label="Notifications, {} unread">Notifications <span class="badge">{}</span>',
            unread,
            unread,
        )
        if unread
        else mark_safe(">Notifications")
    )
    return format_html(
        '<nav aria-label="Main">\n      {}\n    </nav>\n    <div class="who">\n'
        '      <a href="{}"{}</a>\n      <a href="{}">API tokens</a>\n      <span>{}</span>',
        nav,
        reverse("notifications"),
        bell,
        reverse("tokens"),
        name,
    )
