"""The node list's rows are drawn once per what they show: the same facts are not drawn
again, and a row whose facts moved (even without a new poll stamp) is never stale."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import ObservedNode
from fleet.models import NodePool
from health.models import NodeHealth
from overview import node_rows
from portal.infra.process_cache import ProcessCache
from tests.unit.overview.test_views import node

pytestmark = pytest.mark.django_db


@pytest.fixture
def drawn(monkeypatch: Any) -> list[str]:
    """The nodes whose rows were drawn, in order (a cache of this test's own)."""
    monkeypatch.setattr(node_rows, "_ROWS", ProcessCache("node rows"))
    names: list[str] = []
    draw = node_rows.render_to_string

    def counted(template: str, context: dict[str, Any]) -> str:
        names.append(context["node"].name)
        return draw(template, context)

    monkeypatch.setattr(node_rows, "render_to_string", counted)
    return names


def rows_of(page: str) -> str:
    return page[page.index("<tbody>") : page.index("</tbody>")]


def test_unchanged_rows_are_not_drawn_again_and_changed_ones_are(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any, drawn: list[str]
) -> None:
    NodePool.objects.create(name="train", node_selector={"quartermaster.io/pool": "train"})
    for name in ("n1", "n2", "n3"):
        node(name, allocated={"nvidia.com/mig-3g.40gb": 2})
    client.force_login(team_a_member)
    first = rows_of(client.get("/fleet/nodes/?pool=train").content.decode())
    assert sorted(drawn) == ["n1", "n2", "n3"] and first.count("<tr ") == 3
    assert rows_of(client.get("/fleet/nodes/?pool=train").content.decode()) == first
    assert len(drawn) == 3  # the same facts: nothing drawn again
    # facts that move without the poll's stamp are still seen: the row is drawn anew
    ObservedNode.objects.filter(name="n2").update(mig_config_state="failed")
    NodeHealth.objects.create(
        node="n3",
        observed_at=timezone.now(),
        gpus=[{"index": 0, "util": 40.0, "xid": 0}],
        findings=[{"gpu": 0, "severity": "warning", "title": "GPU 0: 88 °C"}],
        worst="warning",
    )
    page = client.get("/fleet/nodes/?pool=train").content.decode()
    assert sorted(drawn[3:]) == ["n2", "n3"]
    row = page[page.index('id="node-') :]
    assert '<span class="tag bad">failed</span>' in page and "GPU 0: 88 °C" in row
    # the same row in another column layout (the whole fleet: a pool column) is its own
    client.get("/fleet/nodes/?q=n1")
    assert drawn[5:] == ["n1"]
