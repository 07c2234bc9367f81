"""``{% load links %}``: ``{% link "change-detail" c.pk %}`` is ``{% url %}`` for the rows of
long lists. The route is reversed once per process, name and script prefix, then each row's
arguments are put in (``{% url %}`` reverses the route again for every row: a few hundred
rows took longer than the rest of the page). ``{% page_query n %}`` is this page's query
with ``page`` made ``n`` (a pager's link keeps the list's filters)."""

from __future__ import annotations

from urllib.parse import quote

from django import template
from django.urls import get_script_prefix, reverse

from portal.infra.process_cache import kept

register = template.Library()

# Stand-ins reversed in place of the arguments: digits, so that an int converter takes them.
_MARKS = tuple(f"73{index:07d}91" for index in range(4))
_SAFE = "-._~!$&'()*+,;=:@"  # what a path segment keeps as it is (Django's reverse keeps these)


@register.simple_tag
def link(name: str, *args: object) -> str:
    """The path of the route ``name`` with ``args`` (each a path segment: an id, a name)."""
    pieces = _route(name, len(args), get_script_prefix())
    quoted = [quote(str(arg), safe=_SAFE) for arg in args]
    return "".join(piece + value for piece, value in zip(pieces, [*quoted, ""], strict=True))


@register.simple_tag(takes_context=True)
def page_query(context: template.Context, number: int) -> str:
    """``?`` and the request's query parameters, urlencoded, with ``page`` replaced."""
    query = context["request"].GET.copy()
    query["page"] = str(number)
    return "?" + query.urlencode()


@kept("route pieces", 256)
def _route(name: str, count: int, prefix: str) -> tuple[str, ...]:
    """The route's path around its arguments: ``count + 1`` pieces."""
    if count > len(_MARKS):
        raise template.TemplateSyntaxError(f"link takes at most {len(_MARKS)} arguments")
    path = reverse(name, args=list(_MARKS[:count]))
    pieces = []
    for mark in _MARKS[:count]:
        before, _, path = path.partition(mark)
        pieces.append(before)
    return (*pieces, path)
