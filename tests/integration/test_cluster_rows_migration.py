"""An installation from before rows named their cluster, with a row in every table that gets
one, migrates forward onto the one cluster its settings name (QM_CLUSTER_NAME): every row
is on it, nothing is lost, an open MIG change still holds its node (a second claim of that
node is refused), and going back restores the tables as they were."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import IntegrityError, connections, transaction
from django.db.migrations.executor import MigrationExecutor

from tests.support import leaves_fitting, scratch_database

# The test database (its scratch databases are made beside it; no transaction around the test:
# CREATE DATABASE cannot run in one).
pytestmark = pytest.mark.django_db(transaction=True)

ALIAS = "before_cluster_rows"
# Each app's last migration before its rows named their cluster.
BEFORE = {
    "cluster": "0010_the_settings_cluster",
    "tenants": "0004_requests_moved_to_changes",
    "queues": "0001_initial",
    "fleet": "0009_models_moved_out",
    "health": "0001_initial",
    "usage": "0002_workloadrecord_queued_at",
    "changes": "0006_queues_moved",
}
NOW = dt.datetime(2026, 11, 30, 10, 42, tzinfo=dt.UTC)
# Every table whose rows get a cluster, and the ones that follow a namespace's.
TABLES = [
    "tenants_namespace",
    "tenants_quotaitem",
    "tenants_priorityclass",
    "queues_resourceflavor",
    "queues_cohort",
    "queues_clusterqueue",
    "queues_localqueue",
    "fleet_nodepool",
    "fleet_observednode",
    "fleet_observedpod",
    "fleet_observedworkload",
    "fleet_observedpodgroup",
    "fleet_observedcreatefailure",
    "sync_observedobject",
    "sync_appliedobject",
    "sync_syncrun",
    "fleet_drift",
    "fleet_nodehealth",
    "fleet_migchangerequest",
    "changes_nodeclaim",
    "tenants_quotachangerequest",
    "usage_sample",
    "usage_rollup",
    "usage_workloadrecord",
]
WITH_CLUSTER = [t for t in TABLES if t not in ("tenants_quotaitem", "tenants_priorityclass")]
WITH_CLUSTER.remove("queues_localqueue")  # a LocalQueue follows its namespace's cluster


def targets(executor: MigrationExecutor) -> list[tuple[str, str]]:
    return [*leaves_fitting(executor, BEFORE), *BEFORE.items()]


@pytest.fixture
def database(
    past_schema: dict[str, str], django_db_blocker: Any, settings: Any
) -> Iterator[MigrationExecutor]:
    """The scratch database at BEFORE: its one cluster (0010's) named from QM_CLUSTER_NAME
    (a copy of the one the conftest's ``past_schema`` migrated with that name)."""
    settings.QM_CLUSTER_NAME = "gpu-main"
    template = past_schema["cluster_rows"]
    with django_db_blocker.unblock(), scratch_database(ALIAS, template=template) as executor:
        yield executor


def fill(executor: MigrationExecutor) -> None:
    """One row (or two) in every table, with the models as they were."""
    old = executor.loader.project_state(targets(executor)).apps

    def make(label: str, **fields: Any) -> Any:
        return old.get_model(label).objects.using(ALIAS).create(**fields)

    user = make("auth.User", username="lead")
    team = make("tenants.Team", slug="team-a", name="A")
    namespace = make("tenants.Namespace", name="team-a", team=team)
    make("tenants.QuotaItem", namespace=namespace, resource="requests.nvidia.com/gpu", hard="8")
    make("tenants.PriorityClass", name="batch", value=100)
    make("queues.ResourceFlavor", name="a100")
    cohort = make("queues.Cohort", name="research")
    queue = make("queues.ClusterQueue", name="cq-train", cohort=cohort)
    make("queues.LocalQueue", name="train", namespace=namespace, cluster_queue=queue)
    pool = make("fleet.NodePool", name="a100", node_selector={"pool": "a100"})
    for node in ("gpu-a100-01", "gpu-a100-02"):
        make("cluster.ObservedNode", name=node, first_seen=NOW, last_changed=NOW)
    make("cluster.ObservedPod", namespace="team-a", name="p", last_changed=NOW)
    make("cluster.ObservedWorkload", namespace="team-a", name="w", last_changed=NOW)
    make("cluster.ObservedPodGroup", namespace="team-a", name="g", last_changed=NOW)
    make(
        "cluster.ObservedCreateFailure",
        namespace="team-a",
        kind="Job",
        name="j",
        message="quota",
        last_seen=NOW,
    )
    make("cluster.ObservedObject", api_version="v1", kind="Namespace", name="a", last_seen=NOW)
    make("cluster.AppliedObject", api_version="v1", kind="Namespace", name="team-a")
    make("cluster.SyncRun", started_at=NOW, finished_at=NOW, nodes=2)
    make("cluster.Drift", kind="mig_layout", subject="gpu-a100-01", first_seen=NOW, last_seen=NOW)
    make("health.NodeHealth", node="gpu-a100-01", observed_at=NOW)
    change = make(
        "changes.MigChangeRequest",
        team=team,
        requested_by=user,
        nodes=["gpu-a100-01"],
        pool=pool,
        state="executing",
    )
    make("changes.NodeClaim", node="gpu-a100-01", request=change)
    make(
        "changes.QuotaChangeRequest",
        team=team,
        requested_by=user,
        kind="namespace",
        namespace=namespace,
        resource="requests.nvidia.com/gpu",
        requested="16",
    )
    make("usage.Sample", time=NOW, kind="team", owner="team-a", resource="nvidia.com/gpu", used=2)
    make(
        "usage.Rollup",
        period="hour",
        start=NOW,
        kind="team",
        owner="team-a",
        resource="nvidia.com/gpu",
        used_seconds=7200,
    )
    make("usage.WorkloadRecord", namespace="team-a", name="w", created_at=NOW)


# Columns later migrations add (not this one's business).
LATER_COLUMNS = {
    *("decoded_from", "explained", "explained_digest", "queue_name", "finished_at"),
    *("end_held", "end_note"),
    *("conditions", "resource_claims", "idle_period_minutes", "idle_threshold_percent"),
    "budget_hold",
}


def dump(*, without: str = "") -> dict[str, list[tuple[Any, ...]]]:
    """Every row of TABLES, each without its ``without`` column (and without the claim's new
    id and columns added since), in a stable order."""
    rows = {}
    with connections[ALIAS].cursor() as cursor:
        for table in TABLES:
            cursor.execute(f'SELECT * FROM "{table}"')
            names = [c.name for c in cursor.description]
            skip = {without, "cluster_id", *LATER_COLUMNS}
            keep = [i for i, n in enumerate(names) if n not in skip]
            if table == "changes_nodeclaim":
                keep = [i for i in keep if names[i] != "id"]
            rows[table] = sorted(tuple(row[i] for i in keep) for row in cursor.fetchall())
    return rows


def on_cluster(table: str) -> list[Any]:
    with connections[ALIAS].cursor() as cursor:
        cursor.execute(f'SELECT DISTINCT c.name FROM "{table}" t JOIN cluster_cluster c ON c.id = t.cluster_id')  # fmt: skip
        return [name for (name,) in cursor.fetchall()]


def test_every_row_moves_onto_the_settings_cluster_and_back(
    database: MigrationExecutor, settings: Any
) -> None:
    fill(database)
    before = dump()
    assert all(before.values()), [t for t, rows in before.items() if not rows]

    database.loader.build_graph()
    leaves = database.loader.graph.leaf_nodes()
    database.migrate(leaves)
    after = dump()
    assert after == before  # nothing lost, nothing else changed
    for table in WITH_CLUSTER:
        assert on_cluster(table) == ["gpu-main"], table
    with connections[ALIAS].cursor() as cursor:
        cursor.execute(
            "SELECT ns.cluster_id = cq.cluster_id FROM queues_localqueue lq"
            " JOIN tenants_namespace ns ON ns.id = lq.namespace_id"
            " JOIN queues_clusterqueue cq ON cq.id = lq.cluster_queue_id"
        )
        assert cursor.fetchall() == [(True,)]
        cursor.execute("SELECT count(*) FROM tenants_priorityclass_clusters")
        assert cursor.fetchone() == (0,)  # none named: applied to every cluster, as before

    new = database.loader.project_state(leaves).apps
    claims = new.get_model("changes", "NodeClaim").objects.using(ALIAS)
    (held,) = claims.all()
    assert (held.node, held.request.state) == ("gpu-a100-01", "executing")
    other = (
        new.get_model("changes", "MigChangeRequest")
        .objects.using(ALIAS)
        .create(
            team_id=held.request.team_id,
            requested_by_id=held.request.requested_by_id,
            nodes=["gpu-a100-01"],
            cluster_id=held.cluster_id,
        )
    )
    with pytest.raises(IntegrityError, match="one_claim_per_node"), transaction.atomic(ALIAS):
        claims.create(node="gpu-a100-01", request=other, cluster_id=held.cluster_id)
    claims.create(node="gpu-a100-02", request=other, cluster_id=held.cluster_id)  # another node
    claims.filter(request=other).delete()
    other.delete()

    database.loader.build_graph()
    database.migrate(targets(database))  # back: the tables as they were
    assert dump() == before
    with connections[ALIAS].cursor() as cursor:
        cursor.execute("SELECT name FROM cluster_cluster")
        assert cursor.fetchall() == [("gpu-main",)]  # 0010's row stays (its test: part 1's)
