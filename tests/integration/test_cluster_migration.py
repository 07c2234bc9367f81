"""An installation from before clusters were objects, with data in it, becomes one cluster
named from QM_CLUSTER_NAME and connected as its settings say; nothing else changes, and
going back removes only that row (then forward makes it again, once)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.db.migrations.executor import MigrationExecutor

from tests.support import leaves_fitting, scratch_database

# The test database (its scratch databases are made beside it; no transaction around the test:
# CREATE DATABASE cannot run in one).
pytestmark = pytest.mark.django_db(transaction=True)

ALIAS = "before_clusters"
BEFORE = ("cluster", "0008_observed_node_labels_index")
SCHEMA = ("cluster", "0009_cluster")
AFTER = ("cluster", "0010_the_settings_cluster")
# The other apps as they were before their rows named a cluster (that step, from AFTER on,
# is test_cluster_rows_migration.py's).
OTHERS = {
    "tenants": "0004_requests_moved_to_changes",
    "queues": "0001_initial",
    "fleet": "0009_models_moved_out",
    "health": "0001_initial",
    "usage": "0002_workloadrecord_queued_at",
    "changes": "0006_queues_moved",
}
NOW = dt.datetime(2026, 11, 30, 10, 42, tzinfo=dt.UTC)
TABLES = [
    "tenants_team",
    "tenants_namespace",
    "fleet_observednode",
    "sync_syncrun",
    "sync_appliedobject",
]


@pytest.fixture
def database(past_schema: dict[str, str], django_db_blocker: Any) -> Iterator[MigrationExecutor]:
    """A database of its own next to the test database, just before clusters (``BEFORE``:
    a copy of the one the conftest's ``past_schema`` migrated)."""
    template = past_schema["clusters"]
    with django_db_blocker.unblock(), scratch_database(ALIAS, template=template) as executor:
        yield executor


def targets(executor: MigrationExecutor, cluster: tuple[str, str]) -> list[tuple[str, str]]:
    pinned = {**OTHERS, cluster[0]: cluster[1]}
    return [*leaves_fitting(executor, pinned), *pinned.items()]


def fill(executor: MigrationExecutor) -> None:
    old = executor.loader.project_state(targets(executor, BEFORE)).apps
    team = old.get_model("tenants", "Team").objects.using(ALIAS).create(slug="team-a", name="A")
    old.get_model("tenants", "Namespace").objects.using(ALIAS).create(name="team-a", team=team)
    old.get_model("cluster", "ObservedNode").objects.using(ALIAS).create(
        name="gpu-a100-03", first_seen=NOW, last_changed=NOW
    )
    old.get_model("cluster", "SyncRun").objects.using(ALIAS).create(
        started_at=NOW, finished_at=NOW, nodes=1
    )
    old.get_model("cluster", "AppliedObject").objects.using(ALIAS).create(
        api_version="v1", kind="Namespace", name="team-a", outcome="applied"
    )


def dump() -> dict[str, list[tuple[Any, ...]]]:
    with connections[ALIAS].cursor() as cursor:
        rows = {}
        for table in TABLES:
            cursor.execute(f'SELECT * FROM "{table}" ORDER BY id')
            rows[table] = cursor.fetchall()
        return rows


def clusters() -> list[tuple[str, str, str, str, str]]:
    with connections[ALIAS].cursor() as cursor:
        cursor.execute(
            "SELECT name, display_name, purpose, connection, credential FROM cluster_cluster"
        )
        return list(cursor.fetchall())


def test_an_existing_installation_becomes_the_one_cluster_its_settings_name(
    database: MigrationExecutor, settings: Any
) -> None:
    settings.QM_CLUSTER_NAME = "gpu-main"
    fill(database)
    before = dump()
    assert before["tenants_namespace"] and before["fleet_observednode"]

    database.loader.build_graph()
    database.migrate(targets(database, AFTER))
    assert clusters() == [("gpu-main", "Gpu main", "general", "settings", "")]
    assert dump() == before  # nothing else changed

    database.loader.build_graph()
    database.migrate([SCHEMA])  # back: only the row goes
    assert clusters() == []
    assert dump() == before
    database.loader.build_graph()
    database.migrate(targets(database, AFTER))
    database.loader.build_graph()
    database.migrate(targets(database, AFTER))  # twice: still one
    assert [c[0] for c in clusters()] == ["gpu-main"]
