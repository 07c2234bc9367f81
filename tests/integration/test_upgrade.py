"""An installation of the release before the house was redrawn upgrades in place: rows of
the models that moved to cluster, changes and health are read back in their new apps, with
their relations and content types, and the former sync app's migrations count as run."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

from changes.models import AutoApprovalRule, MigChangeRequest, MigChangeStep, QuotaChangeRequest
from cluster.models import AppliedObject, Drift, ObservedNode, ObservedPod, SyncRun
from health.models import NodeHealth
from tests.support import scratch_database

# The test database (its scratch databases are made beside it; no transaction around the test:
# CREATE DATABASE cannot run in one).
pytestmark = pytest.mark.django_db(transaction=True)

ALIAS = "upgrade"
# Each app's last migration in that release; ``cluster.0001_initial`` replaces the sync
# app's two migrations and builds the same tables.
OLD_RELEASE = [
    ("portal", "0005_sso_grants"),
    ("tenants", "0003_sso_grants"),
    ("queues", "0001_initial"),
    ("fleet", "0008_queue_positions"),
    ("usage", "0001_initial"),
    ("cluster", "0001_initial"),
]
NOW = dt.datetime(2026, 11, 30, 10, 42, tzinfo=dt.UTC)
CONTRIB = {"admin", "auth", "contenttypes", "sessions"}


@pytest.fixture
def old_database(
    past_schema: dict[str, str], django_db_blocker: Any
) -> Iterator[MigrationExecutor]:
    """A database of its own (next to the test database) at the previous release's schema
    (``old_release``: a copy of the one the conftest's ``past_schema`` migrated)."""
    template = past_schema["upgrade"]
    with django_db_blocker.unblock(), scratch_database(ALIAS, template=template) as executor:
        yield executor


def old_release(executor: MigrationExecutor) -> list[tuple[str, str]]:
    contrib = [n for n in executor.loader.graph.leaf_nodes() if n[0] in CONTRIB]
    return [*contrib, *OLD_RELEASE]


def fill_old_release(executor: MigrationExecutor) -> dict[str, int]:
    """Rows as the previous release wrote them, through its own (historical) models."""
    old = executor.loader.project_state(old_release(executor)).apps
    db = ALIAS
    user = old.get_model("auth", "User").objects.using(db).create(username="lead-a")
    team = old.get_model("tenants", "Team").objects.using(db).create(slug="team-a", name="A")
    namespace = (
        old.get_model("tenants", "Namespace").objects.using(db).create(name="team-a", team=team)
    )
    pool = (
        old.get_model("fleet", "NodePool")
        .objects.using(db)
        .create(
            name="train", node_selector={"quartermaster.io/pool": "train"}, mig_config="all-3g.40gb"
        )
    )
    change = (
        old.get_model("fleet", "MigChangeRequest")
        .objects.using(db)
        .create(
            team=team,
            requested_by=user,
            nodes=["gpu-a100-03"],
            pool=pool,
            target_config="all-3g.40gb",
            reason="back to the pool's layout",
            state="pending",
            assessment={"verdict": "needs_drain"},
            verdict="needs_drain",
        )
    )
    old.get_model("fleet", "MigChangeStep").objects.using(db).create(
        request=change, node="gpu-a100-03", step="cordon", status="done", started_at=NOW
    )
    old.get_model("fleet", "ObservedNode").objects.using(db).create(
        name="gpu-a100-03",
        labels={"quartermaster.io/pool": "train"},
        allocatable={"nvidia.com/mig-1g.10gb": "16"},
        first_seen=NOW,
        last_changed=NOW,
    )
    old.get_model("fleet", "ObservedPod").objects.using(db).create(
        namespace="team-b", name="dev-test-1g", node_name="gpu-a100-03", last_changed=NOW
    )
    old.get_model("fleet", "Drift").objects.using(db).create(
        kind="mig_layout", subject="gpu-a100-03", first_seen=NOW, last_seen=NOW
    )
    old.get_model("fleet", "NodeHealth").objects.using(db).create(
        node="gpu-a100-03", observed_at=NOW, worst="critical"
    )
    rule = (
        old.get_model("tenants", "AutoApprovalRule")
        .objects.using(db)
        .create(
            name="small bursts",
            kind="namespace",
            resource="requests.nvidia.com/gpu",
            max_increase=4,
            max_days=7,
        )
    )
    old.get_model("tenants", "QuotaChangeRequest").objects.using(db).create(
        team=team,
        requested_by=user,
        kind="namespace",
        namespace=namespace,
        resource="requests.nvidia.com/gpu",
        previous="16",
        requested="20",
        reason="a burst",
        auto_rule=rule,
    )
    old.get_model("cluster", "SyncRun").objects.using(db).create(started_at=NOW, nodes=5)
    old.get_model("cluster", "AppliedObject").objects.using(db).create(
        api_version="v1", kind="Namespace", name="team-a", outcome="applied"
    )
    content_types = old.get_model("contenttypes", "ContentType").objects.using(db)
    moved = [
        ("fleet", "migchangerequest"),
        ("tenants", "quotachangerequest"),
        ("fleet", "observednode"),
        ("sync", "syncrun"),
        ("fleet", "nodehealth"),
    ]
    types = {f"{a}.{m}": content_types.create(app_label=a, model=m).pk for a, m in moved}
    # What the previous release recorded: the sync app's migrations, not their replacement.
    recorder = MigrationRecorder(connections[db])
    recorder.record_unapplied("cluster", "0001_initial")
    recorder.record_applied("sync", "0001_initial")
    recorder.record_applied("sync", "0002_who_changed")
    return types | {"change": change.pk}


def test_an_installation_of_the_previous_release_keeps_every_row(
    old_database: MigrationExecutor,
) -> None:
    ids = fill_old_release(old_database)
    call_command("migrate", database=ALIAS, interactive=False, verbosity=0)

    db = ALIAS
    change = MigChangeRequest.objects.using(db).select_related("team", "pool").get()
    assert (change.pk, change.team.slug, change.pool and change.pool.name) == (
        ids["change"],
        "team-a",
        "train",
    )
    assert change.reason == "back to the pool's layout" and change.verdict == "needs_drain"
    assert change.pool_name == "train"  # kept for when the pool is deleted
    assert list(MigChangeStep.objects.using(db).values_list("request_id", "step", "status")) == [
        (ids["change"], "cordon", "done")
    ]
    quota = QuotaChangeRequest.objects.using(db).select_related("auto_rule", "namespace").get()
    assert (quota.requested, quota.namespace.name, quota.auto_rule.name) == (
        "20",
        "team-a",
        "small bursts",
    )
    assert (quota.namespace_name, quota.cluster_queue_name, quota.auto_rule_name) == (
        "team-a",
        "",
        "small bursts",
    )  # the names stay when the namespace or the rule is deleted
    assert AutoApprovalRule.objects.using(db).count() == 1
    node = ObservedNode.objects.using(db).get()
    assert node.gpu_offer() == {"nvidia.com/mig-1g.10gb": 16}
    assert ObservedPod.objects.using(db).get().name == "dev-test-1g"
    assert Drift.objects.using(db).get().subject == "gpu-a100-03"
    assert NodeHealth.objects.using(db).get().worst == "critical"
    assert SyncRun.objects.using(db).get().nodes == 5
    assert AppliedObject.objects.using(db).get().name == "team-a"

    # Content types (and so permissions and admin history) followed their models.
    now_in = {
        "fleet.migchangerequest": "changes",
        "tenants.quotachangerequest": "changes",
        "fleet.observednode": "cluster",
        "sync.syncrun": "cluster",
        "fleet.nodehealth": "health",
    }
    types = ContentType.objects.using(db)
    for old_label, app in now_in.items():
        model = old_label.split(".")[1]
        assert types.get(app_label=app, model=model).pk == ids[old_label], old_label
    assert not types.filter(app_label="sync").exists()

    # The replaced sync migrations count as the cluster app's first; nothing is left to run.
    applied = MigrationRecorder(connections[db]).applied_migrations()
    assert ("cluster", "0001_initial") in applied and ("changes", "0001_initial") in applied
    executor = MigrationExecutor(connections[db])
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
