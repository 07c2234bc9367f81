"""Which nodes a pool holds, one rule in three forms (``fleet.membership``): in memory, as
an ORM filter and as SQL give the same membership over the same nodes and overlapping
pools, and so do the callers (the Fleet page's pools, drift, the explainer, usage samples,
the planner, a MIG change asked for a whole pool).

The fixture, on the settings' cluster: pool ``alpha`` (``pool=a``, no MIG config) and pool
``beta`` (``zone=z``, intends ``all-3g.40gb``) overlap on node ``n2``; ``gamma`` has no
labels. ``n1`` carries ``pool=a``, ``n2`` both, ``n3`` ``zone=z``, ``n4`` nothing. Every
node is on ``all-1g.10gb``. A second cluster has a pool ``beta`` and a node ``n2`` of its own.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from changes.planning import gather
from cluster.models import Cluster, ObservedNode
from cluster.scope import settings_cluster
from diagnostics.explainer import explainer_view
from fleet.membership import holds, holds_none, pool_of
from fleet.models import NodePool
from loop.drift import mig_layout_drift
from overview.selectors import Pools, fleet_nodes
from tests.factories import ObservedNodeFactory
from usage.sampling import pool_rows

pytestmark = pytest.mark.django_db
HELD = {"n1": "alpha", "n2": "alpha", "n3": "beta", "n4": None}
G1 = "nvidia.com/mig-1g.10gb"


@pytest.fixture
def fleet() -> Any:
    here = settings_cluster()
    for name, selector, config in (
        ("beta", {"zone": "z"}, "all-3g.40gb"),  # made first: the order of rows decides nothing
        ("alpha", {"pool": "a"}, ""),
        ("gamma", {}, "all-balanced"),
    ):
        NodePool.objects.create(cluster=here, name=name, node_selector=selector, mig_config=config)
    for name, labels in (
        ("n1", {"pool": "a", "gpu": "x"}),
        ("n2", {"pool": "a", "zone": "z"}),
        ("n3", {"zone": "z"}),
        ("n4", {}),
    ):
        ObservedNodeFactory(
            cluster=here,
            name=name,
            mig_config="all-1g.10gb",
            labels={**labels, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            allocatable={G1: "56"},
        )
    there = Cluster.objects.create(name="inference", display_name="Inference", connection="token")
    NodePool.objects.create(cluster=there, name="beta", node_selector={"zone": "z"})
    ObservedNodeFactory(cluster=there, name="n2", labels={"zone": "z"})
    return here


def test_in_memory(fleet: Any) -> None:
    pools = list(NodePool.objects.on(fleet))
    nodes = ObservedNode.objects.on(fleet)
    assert {n.name: getattr(pool_of(n.labels, pools), "name", None) for n in nodes} == HELD


def test_as_an_orm_filter(fleet: Any) -> None:
    pools = list(NodePool.objects.on(fleet))
    nodes = ObservedNode.objects.on(fleet)
    held: dict[str, str | None] = {}
    for pool in pools:
        for name in holds(nodes, pool, pools).values_list("name", flat=True):
            assert name not in held, f"{name} held twice"
            held[name] = pool.name
    for name in holds_none(nodes, pools).values_list("name", flat=True):
        held[name] = None
    assert held == HELD


@pytest.mark.parametrize("every_cluster", [False, True])
def test_as_sql(fleet: Any, every_cluster: bool) -> None:
    pools = Pools.load(None if every_cluster else fleet.pk)
    sql, params = pools.of_node('"fleet_observednode"')
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT "fleet_observednode".name, {sql} FROM "fleet_observednode" '
            'WHERE "fleet_observednode".cluster_id = %s',
            [*params, fleet.pk],
        )
        held = {name: pools.name_of(index) for name, index in cursor.fetchall()}
    assert held == {name: pool or "(no pool)" for name, pool in HELD.items()}


def test_the_fleet_page_lists_each_pools_nodes(fleet: Any) -> None:
    pools = Pools.load(fleet.pk)
    listed = {
        pools.name_of(i): sorted(n.name for n in fleet_nodes(pools, pool=i))
        for i in [-1, *range(len(pools.rows))]
    }
    assert listed == {"(no pool)": ["n4"], "alpha": ["n1", "n2"], "beta": ["n3"], "gamma": []}
    every = Pools.load(None)  # every cluster's: the other cluster's n2 is its beta's
    there = every.index("inference/beta")
    assert there is not None
    assert [n.name for n in fleet_nodes(every, pool=there)] == ["n2"]


def test_drift_the_explainer_usage_and_the_planner_agree(fleet: Any) -> None:
    assert {subject for _, subject, _ in mig_layout_drift(fleet.pk)} == {"n3"}
    view = explainer_view(fleet.pk)
    assert dict(view.intended) == {"n3": "all-3g.40gb"}
    samples = pool_rows(timezone.now(), fleet.pk)
    assert sorted((s.owner, s.capacity) for s in samples) == [  # 56 slices a node
        ("(no pool)", 56.0),
        ("alpha", 112.0),
        ("beta", 56.0),
    ]
    problem, _ = gather(fleet)
    assert {n.name: n.pool for n in problem.nodes} == {
        name: pool or "" for name, pool in HELD.items()
    }


def test_a_change_asked_for_a_pool_takes_the_nodes_it_holds(
    client: Any, team_a_admin: Any, fleet: Any
) -> None:
    client.force_login(team_a_admin)
    page = client.get("/changes/new/?pool=beta&cluster=default&target_config=all-3g.40gb")
    assert page.status_code == 200
    form = page.context["form"]
    assert form.initial["nodes"] == ["n3"]  # n2 is alpha's
