"""The explainer's view of the fleet is built again exactly when something it is built from
changed (the nodes, a pool, a MIG config, a change reconfiguring nodes, the open drift),
checked in one statement, and the home sends that statement with its own reads."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import diagnostics.selectors as selectors
from cluster.models import Drift, ObservedNode
from cluster.scope import settings_cluster_id
from fleet.models import MigConfig, NodePool
from tests.factories import (
    MigChangeRequestFactory,
    NamespaceFactory,
    ObservedNodeFactory,
    ObservedPodFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Each build of the view, counted; the process's view forgotten before and after."""
    built: list[int] = []
    build = selectors._build_explainer_view

    def counted(cluster_id: int) -> Any:
        built.append(1)
        return build(cluster_id)

    monkeypatch.setattr(selectors, "_build_explainer_view", counted)
    selectors._EXPLAINER.clear()
    yield built
    selectors._EXPLAINER.clear()


def node_changed() -> None:
    ObservedNode.objects.filter(name="gpu-node-a").update(last_changed=timezone.now())


def node_gone() -> None:
    ObservedNode.objects.filter(name="gpu-node-a").update(gone_since=timezone.now())


def node_added() -> None:
    ObservedNodeFactory(name="gpu-node-b", last_changed=timezone.now() - dt.timedelta(days=1))


def pool_config_changed() -> None:
    NodePool.objects.filter(name="train").update(mig_config="all-balanced")


def pool_selector_changed() -> None:
    NodePool.objects.filter(name="train").update(node_selector={"pool": "other"})


def config_devices_changed() -> None:
    MigConfig.objects.filter(name="custom").update(devices={"1g.10gb": 7})


def change_started() -> None:
    MigChangeRequestFactory(state="running")


def drift_opened() -> None:
    now = timezone.now()
    Drift.objects.create(
        kind="mig_layout",
        subject="gpu-node-a",
        field="nvidia.com/mig.config",
        desired="all-3g.40gb",
        observed="all-balanced",
        first_seen=now,
        last_seen=now,
    )


@pytest.mark.parametrize(
    "change",
    [
        node_changed,
        node_gone,
        node_added,
        pool_config_changed,
        pool_selector_changed,
        config_devices_changed,
        change_started,
        drift_opened,
    ],
)
def test_the_view_is_built_again_when_what_it_is_built_from_changes(
    builds: list[int], change: Callable[[], None]
) -> None:
    ObservedNodeFactory(name="gpu-node-a", labels={"pool": "train"})
    NodePool.objects.create(name="train", node_selector={"pool": "train"}, mig_config="all-3g.40gb")
    MigConfig.objects.create(name="custom", gpu_model="A100-80GB", devices={"3g.40gb": 2})
    first = selectors.explainer_view(settings_cluster_id())
    assert (
        selectors.explainer_view(settings_cluster_id()) is first and len(builds) == 1
    )  # nothing changed
    change()
    assert selectors.explainer_view(settings_cluster_id()) is not first and len(builds) == 2
    assert selectors.explainer_view(settings_cluster_id()) is not first and len(builds) == 2


def test_a_check_that_is_not_due_reads_nothing(builds: list[int], settings: Any) -> None:
    settings.QM_EXPLAINER_RECHECK_SECONDS = 600
    ObservedNodeFactory(name="gpu-node-a")
    cluster_id = settings_cluster_id()
    first = selectors.explainer_view(cluster_id)
    node_changed()
    with CaptureQueriesContext(connection) as queries:
        assert selectors.explainer_view(cluster_id) is first
    assert len(queries) == 0 and len(builds) == 1


def test_the_home_sends_the_check_with_its_own_reads(
    builds: list[int], client: Client, team_a_admin: Any
) -> None:
    """The home's Pending pod is explained against the view; the check of its version rides
    in the page's second round trip, so the home reads in the same number of round trips
    with the check due (every request here) as without it, and a changed node is seen."""
    NamespaceFactory(name="team-a", team=team_a_admin.memberships.get().team)
    client.force_login(team_a_admin)
    ObservedPodFactory(
        namespace="team-a",
        name="train-0",
        phase="Pending",
        pending_message="0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
    )
    ObservedNodeFactory(name="gpu-node-a")
    assert client.get("/").status_code == 200
    assert len(builds) == 1
    with CaptureQueriesContext(connection) as due:
        assert client.get("/").status_code == 200
    assert len(builds) == 1
    assert any("md5(array_agg" in query["sql"] for query in due.captured_queries)
    node_changed()
    assert client.get("/").status_code == 200
    assert len(builds) == 2
    selectors._EXPLAINER["checked"] = float("inf")  # as between two checks
    with CaptureQueriesContext(connection) as not_due:
        assert client.get("/").status_code == 200
    assert len(not_due) == len(due)
    assert not any("md5(array_agg" in query["sql"] for query in not_due.captured_queries)


def test_a_home_with_nothing_pending_takes_the_check_once_per_interval(
    builds: list[int], client: Client, team_a_admin: Any, settings: Any
) -> None:
    """A home that has no Pending pod does not need the view, but its check counts: the next
    home within the interval sends none (the check is not sent on every request of a process
    whose pages have nothing waiting), and no view is built for it."""
    settings.QM_EXPLAINER_RECHECK_SECONDS = 600
    NamespaceFactory(name="team-a", team=team_a_admin.memberships.get().team)
    client.force_login(team_a_admin)
    ObservedNodeFactory(name="gpu-node-a")

    def checks() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/").status_code == 200
        return sum("md5(array_agg" in query["sql"] for query in queries.captured_queries)

    assert checks() == 1
    assert checks() == 0
    assert builds == []
