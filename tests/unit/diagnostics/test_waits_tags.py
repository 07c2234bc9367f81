"""``{% why_box %}`` and ``{% estimate_box %}`` draw what ``components/why.html`` and
``components/estimate.html`` draw, once per distinct explanation or estimate in a page."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

from django.template import engines
from django.test.utils import override_settings

from diagnostics.estimate import Estimate
from diagnostics.explain import Explanation

DJANGO = engines["django"]
TAGS = DJANGO.from_string(
    "{% load waits %}{% for w in items %}<li>{% estimate_box w.estimate %}"
    "{% why_box w.why team %}</li>{% endfor %}"
)
INCLUDES = DJANGO.from_string(
    "{% for w in items %}<li>{% if w.estimate %}"
    '{% include "components/estimate.html" with estimate=w.estimate %}{% endif %}'
    '{% include "components/why.html" with why=w.why %}</li>{% endfor %}'
)
ASK = {"label": "Ask for more quota", "url": "/changes/quota/new/?ns=team-a"}


def why(cause: str = "No node has a free nvidia.com/gpu.", **more: Any) -> Explanation:
    return Explanation(cause, "Wait, or ask for more.", evidence=["0/5 nodes"], **more)


def items() -> list[dict[str, Any]]:
    soon = Estimate("about 1 h", "10 finished runs", 1800, 5400)
    later = Estimate(
        "3 to 5 h",
        "10 finished runs",
        3 * 3600,
        5 * 3600,
        dt.datetime(2026, 12, 2, 5, tzinfo=dt.UTC),
    )
    return [
        {"why": why(action=ASK, topic="insufficient-gpu"), "estimate": soon},
        {"why": why(action=ASK, topic="insufficient-gpu"), "estimate": soon},
        {"why": why(belongs_to="workload w in queue q"), "estimate": later},
        {
            "why": why("Its quota is used up.", never="it asks for more than the quota"),
            "estimate": None,
        },
        {"why": why(action={"label": "See the node", "url": "/fleet/nodes/n1/"}), "estimate": soon},
    ]


@override_settings(USE_TZ=True)
def test_the_boxes_are_what_the_components_draw_for_a_lead_and_for_a_member() -> None:
    for may_ask in (True, False):
        context = {"items": items(), "team": SimpleNamespace(may_ask=may_ask)}
        drawn = TAGS.render(context)
        assert drawn == INCLUDES.render(context)
        assert drawn.count("Estimated wait:") == 4 and drawn.count("Why:") == 5
        assert ("Ask for more quota" in drawn) is may_ask
        assert ("your team's lead can ask for it" in drawn) is not may_ask
        assert "See the node" in drawn  # not a request: offered to everyone


def test_each_distinct_box_is_drawn_once(monkeypatch: Any) -> None:
    from django.template.base import Template

    drawn: list[str] = []
    render = Template.render

    def counted(self: Template, context: Any) -> Any:
        drawn.append(str(self.origin.template_name))
        return render(self, context)

    monkeypatch.setattr(Template, "render", counted)
    page = TAGS.render({"items": items(), "team": SimpleNamespace(may_ask=True)})
    assert page.count("Why:") == 5
    assert drawn.count("components/why.html") == 4  # the first two pods share theirs
    assert drawn.count("components/estimate.html") == 2
