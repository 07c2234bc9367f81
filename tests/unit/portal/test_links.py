"""``{% link %}``: the same paths as ``{% url %}``, the route reversed once."""

from __future__ import annotations

import pytest
from django.template import TemplateSyntaxError, engines
from django.urls import reverse

from portal.templatetags.links import link


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("troubleshooting", ()),
        ("change-detail", (7,)),
        ("change-detail", (1234567890,)),
        ("fleet-node", ("gpu-a100-03",)),
        ("fleet-node", ("node.with.dots_and-dashes",)),
        ("fleet-node", ("7300000009173",)),  # a name that looks like the stand-in
        ("change-action", (12, "approve")),
    ],
)
def test_a_link_is_the_path_url_gives(name: str, args: tuple[object, ...]) -> None:
    assert link(name, *args) == reverse(name, args=list(args))


def test_the_tag_renders_in_a_template_escaped() -> None:
    page = engines["django"].from_string("{% load links %}<a href=\"{% link 'fleet-node' n %}\">")
    assert (
        page.render({"n": "a&b"})
        == f'<a href="{reverse("fleet-node", args=["a&b"]).replace("&", "&amp;")}">'
    )


def test_too_many_arguments_are_refused() -> None:
    with pytest.raises(TemplateSyntaxError):
        link("fleet-node", 1, 2, 3, 4, 5)
