"""The first waiting workloads of some ClusterQueues (the Queues page with a cohort open,
``queues.observed.first_in_line`` with ``queues``) are those of every queue's line
(``queues=None``) for them: found through the LocalQueues pointing at them or by the queue
a reservation names, each on its own cluster, in Kueue's order, counted in all."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
from django.utils import timezone

from cluster.models import Cluster, ObservedWorkload
from cluster.scope import settings_cluster_id
from queues.models import ClusterQueue, LocalQueue
from queues.observed import first_in_line
from tenants.models import Namespace, Team

pytestmark = pytest.mark.django_db
NOW = timezone.now()
_names = itertools.count()


def world(cluster: Cluster) -> None:
    """On ``cluster``: cq-train (LocalQueues in two namespaces) and cq-dev, each with the
    same names as on the other cluster."""
    team = Team.objects.get_or_create(slug="team-a", defaults={"name": "Team A"})[0]
    train = ClusterQueue.objects.create(cluster=cluster, name="cq-train")
    dev = ClusterQueue.objects.create(cluster=cluster, name="cq-dev")
    for namespace in ("team-a", "team-b"):
        ns = Namespace.objects.create(cluster=cluster, name=namespace, team=team)
        LocalQueue.objects.create(namespace=ns, name="train", cluster_queue=train)
        LocalQueue.objects.create(namespace=ns, name="dev", cluster_queue=dev)


def workload(cluster: Cluster, namespace: str, queue: str, **fields: Any) -> str:
    name = f"w-{next(_names)}"
    minutes = fields.pop("minutes", 10)
    ObservedWorkload.objects.create(
        cluster=cluster,
        namespace=namespace,
        name=name,
        queue_name=queue,
        queued_at=NOW - dt.timedelta(minutes=minutes),
        created_at=NOW - dt.timedelta(minutes=minutes),
        last_changed=NOW,
        **fields,
    )
    return name


def line(found: dict[str, list[ObservedWorkload]]) -> dict[str, list[tuple[str, int]]]:
    return {q: [(w.name, w.waiting_in_queue) for w in ws] for q, ws in found.items()}  # type: ignore[attr-defined]


def test_some_queues_lines_are_every_queues_lines_for_them() -> None:
    here = Cluster.objects.get(pk=settings_cluster_id())
    there = Cluster.objects.create(name="cluster-b", connection="token", api_url="http://x:1")
    world(here)
    world(there)
    first = workload(here, "team-b", "train", position=0, minutes=1)
    second = workload(here, "team-a", "train", position=1, minutes=5)
    oldest = workload(here, "team-a", "train", minutes=90)
    workload(here, "team-b", "train", minutes=30)  # fourth: counted, not shown
    reserved = workload(here, "team-a", "train", cluster_queue="cq-dev", minutes=60)
    workload(here, "team-a", "train", admitted=True, cluster_queue="cq-train")
    workload(here, "team-a", "train", finished=True)
    workload(here, "team-a", "nowhere")  # no such LocalQueue
    dev = workload(here, "team-b", "dev", minutes=3)
    for _ in range(3):  # the other cluster's, same names, earlier in line
        workload(there, "team-a", "train", position=0, minutes=500)
    workload(there, "team-a", "dev", cluster_queue="cq-dev", minutes=500)
    some = first_in_line(3, cluster_id=here.pk, queues={"cq-train", "cq-dev"})
    assert line(some) == {
        "cq-train": [(first, 4), (second, 4), (oldest, 4)],
        "cq-dev": [(reserved, 2), (dev, 2)],
    }
    assert line(first_in_line(3, cluster_id=here.pk, queues={"cq-dev"})) == {
        "cq-dev": [(reserved, 2), (dev, 2)]
    }
    every = line(first_in_line(3, cluster_id=here.pk))
    assert line(some) == {q: every[q] for q in ("cq-train", "cq-dev")}
    assert first_in_line(3, cluster_id=here.pk, queues={"cq-none"}) == {}
    theirs = line(first_in_line(2, cluster_id=there.pk, queues={"cq-train", "cq-dev"}))
    assert [n for _, n in theirs["cq-train"]] == [3, 3] and [n for _, n in theirs["cq-dev"]] == [1]


@pytest.mark.django_db(transaction=True)
def test_the_lines_of_some_queues_are_never_a_prepared_statement() -> None:
    """Its generic plan (which PostgreSQL may keep for a statement prepared after five runs)
    scans every workload for the reserved ones: the read is planned for its queues each
    time, however often a process sends it."""
    from django.db import connection

    cluster = Cluster.objects.get(pk=settings_cluster_id())
    world(cluster)
    waiting = workload(cluster, "team-a", "train")
    answers = [first_in_line(3, cluster_id=cluster.pk, queues=["cq-train"]) for _ in range(8)]
    assert [line(answer) for answer in answers] == [{"cq-train": [(waiting, 1)]}] * 8
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert not any("row_number() OVER (PARTITION BY queue" in text for text in prepared)
