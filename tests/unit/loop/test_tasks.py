"""The loop's tasks per cluster: a change to desired state queues the apply of the cluster
it belongs to (both, for a row moved; every cluster when that is not known), beat's tasks
fan out one task per cluster, and a task for a cluster that is gone or not configured does
nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from cluster.models import Cluster, SyncRun
from cluster.services import settings_cluster
from loop import tasks
from portal.audit.record import SYSTEM
from portal.models import OutboxMessage
from portal.services import move_to_cluster
from queues.services import save_cluster_queue
from tenants.models import Namespace
from tenants.services import delete_namespace, save_team, set_namespace_quota
from tests.factories import ClusterQueueFactory, LocalQueueFactory, NamespaceFactory, TeamFactory

pytestmark = pytest.mark.django_db

APPLY = "cluster.tasks.apply_desired_state_task"
APPLY_ALL = "cluster.tasks.apply_all_clusters_task"


@pytest.fixture
def other() -> Cluster:
    return Cluster.objects.create(
        name="infer", display_name="Infer", connection="token", api_url="http://127.0.0.1:1"
    )


def queued() -> list[tuple[str, list[Any]]]:
    return list(OutboxMessage.objects.order_by("pk").values_list("task", "args"))


def test_a_namespace_quota_queues_the_apply_of_its_cluster_only(other: Cluster) -> None:
    namespace = NamespaceFactory(cluster=other)
    set_namespace_quota(
        actor=SYSTEM, namespace=namespace, source="cli", hard={"requests.nvidia.com/gpu": "4"}
    )
    assert queued() == [(APPLY, [other.pk])]


def test_a_cluster_queue_moved_queues_both_clusters_once_each(other: Cluster) -> None:
    """The one move there is (the demo loader's re-homing; no door edits a cluster away)."""
    home = settings_cluster()
    queue = ClusterQueueFactory(cluster=home)
    with transaction.atomic():
        move_to_cluster(queue, cluster=other, actor=SYSTEM, source="cli")
        queue.namespace_selector = {"matchLabels": {"team": "a"}}
        save_cluster_queue(actor=SYSTEM, cluster_queue=queue, source="cli")
    assert sorted(args[0] for _, args in queued()) == sorted([home.pk, other.pk])


def test_a_local_queue_belongs_to_its_namespaces_cluster(other: Cluster) -> None:
    local = LocalQueueFactory(
        namespace=NamespaceFactory(cluster=other), cluster_queue=ClusterQueueFactory(cluster=other)
    )
    assert tasks.clusters_concerned([local]) == [other.pk]


def test_a_deleted_namespace_still_names_its_cluster(other: Cluster) -> None:
    namespace = NamespaceFactory(cluster=other)
    delete_namespace(actor=SYSTEM, namespace=Namespace.objects.get(pk=namespace.pk), source="cli")
    assert queued() == [(APPLY, [other.pk])]


def test_a_team_concerns_every_cluster(other: Cluster) -> None:
    team = TeamFactory()
    team.name = "Renamed"
    save_team(actor=SYSTEM, team=team, source="cli")
    assert queued() == [(APPLY_ALL, [])]
    assert tasks.clusters_concerned([]) is None


def test_the_loop_runs_for_every_cluster_and_the_settings_one_when_configured(
    other: Cluster, settings: Any
) -> None:
    settings.KUBE_URL = ""
    assert tasks.loop_cluster_ids() == [other.pk]
    assert tasks.loop_cluster(None) is None  # nothing configured: nothing to poll
    settings.KUBE_URL = "http://127.0.0.1:1"
    assert tasks.loop_cluster_ids() == sorted(
        [other.pk, settings_cluster().pk],
        key=lambda pk: Cluster.objects.get(pk=pk).name,
    )
    assert tasks.loop_cluster(None) == settings_cluster()
    assert tasks.loop_cluster(other.pk + 1000) is None  # deleted since it was queued


def test_beat_fans_out_one_task_per_cluster(
    other: Cluster, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.KUBE_URL = "http://127.0.0.1:1"
    sent: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    for task in (tasks.poll_cluster_task, tasks.apply_desired_state_task):
        monkeypatch.setattr(
            task,
            "apply_async",
            lambda args=(), kwargs=None, name=task.name, **options: sent.append(
                (name, tuple(args), {**(kwargs or {}), **options})
            ),
        )
    assert tasks.poll_all_clusters_task() == 2
    assert tasks.apply_all_clusters_task(full=True) == 2
    ids = set(Cluster.objects.values_list("pk", flat=True))
    polls = [s for s in sent if s[0] == tasks.poll_cluster_task.name]
    assert {args[0] for _, args, _ in polls} == ids
    assert {options["expires"] for *_, options in polls} == {float(settings.QM_POLL_SECONDS)}
    applies = [s for s in sent if s[0] == tasks.apply_desired_state_task.name]
    assert {args[0] for _, args, _ in applies} == ids
    assert all(options == {"full": True} for *_, options in applies)


def test_a_poll_whose_gateway_cannot_be_made_is_recorded_as_failed(other: Cluster) -> None:
    other.credential = "not a fernet token"
    other.save()
    tasks.poll_cluster_task(other.pk)
    run = SyncRun.objects.get(cluster=other)
    assert run.finished_at is not None and "cannot be decrypted" in run.error
    assert not SyncRun.objects.exclude(cluster=other).exists()
