"""A first poll copies its workload, PodGroup and refused-creation rows in at once: the rows
are the ones the ORM wrote one by one (``update_or_create`` each), on a generated world of
every kind of workload, and the next poll of the same listing finds nothing to write."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest

from cluster import decode
from cluster.models import ObservedCreateFailure, ObservedPodGroup, ObservedWorkload
from cluster.services import settings_cluster
from loop.write import write_column, write_create_failures, write_podgroups, write_workloads
from tests.generated import NOW, kueue_workloads, rows_of, stamp

pytestmark = pytest.mark.django_db
LATER = NOW + dt.timedelta(minutes=1)


def _one_by_one(model: Any, current: dict[tuple[Any, ...], dict[str, Any]],
                keys: tuple[str, ...], stamp: dict[str, Any], cluster_id: int) -> None:  # fmt: skip
    """The writer as it was: each row by ``update_or_create``."""
    for key, values in current.items():
        model.objects.update_or_create(
            cluster_id=cluster_id,
            **dict(zip(keys, key, strict=True)),
            defaults={**{k: v for k, v in values.items() if k not in keys}, **stamp},
        )


def test_a_first_poll_writes_the_workloads_the_orm_wrote_one_by_one() -> None:
    cluster = settings_cluster().pk
    workloads, positions = kueue_workloads(seed=39)
    assert write_workloads(workloads, positions=positions, cluster_id=cluster, now=NOW) == 300
    copied = rows_of(ObservedWorkload)
    assert write_workloads(workloads, positions=positions, cluster_id=cluster, now=LATER) == 0

    ObservedWorkload.objects.all().delete()
    current = {}
    for item in workloads:
        values = decode.workload_values(item)
        key = (values["namespace"], values["name"])
        values["position"], values["position_in_local_queue"] = positions.get(key, (None, None))
        values["decoded_from"] = decode.workload_source(item)
        current[key] = values
    _one_by_one(ObservedWorkload, current, ("namespace", "name"), {"last_changed": NOW}, cluster)
    assert rows_of(ObservedWorkload) == copied
    assert ObservedWorkload.objects.filter(explained__isnull=True).count() == 300


def _gangs_and_refusals(r: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    groups = [
        {"metadata": {"namespace": f"team-{i % 4}", "name": f"gang-{i}"},
         "spec": {"queue": "q", "minMember": r.randrange(1, 9),
                  "minResources": {"nvidia.com/gpu": str(r.randrange(1, 9))}},
         "status": {"phase": r.choice(["Pending", "Running", "Inqueue"]), "running": i % 3}}
        for i in range(40)
    ]  # fmt: skip
    events = [
        {"metadata": {"namespace": f"team-{i % 4}"}, "reason": "FailedCreate",
         "involvedObject": {"kind": r.choice(["Job", "ReplicaSet"]), "name": f"job-{i % 25}"},
         "message": f'pods "p-{i}" is forbidden: exceeded quota: q-{i % 3}, requested: ...',
         "count": r.randrange(1, 5), "lastTimestamp": stamp(r)}
        for i in range(60)
    ]  # fmt: skip
    return groups, events


def test_a_first_poll_writes_the_gangs_and_refusals_the_orm_wrote_one_by_one() -> None:
    cluster = settings_cluster().pk
    groups, events = _gangs_and_refusals(random.Random(6))
    assert write_podgroups(groups, cluster_id=cluster, now=NOW) == 40
    failures = write_create_failures(events, cluster_id=cluster, now=NOW)
    copied = rows_of(ObservedPodGroup), rows_of(ObservedCreateFailure)
    assert write_podgroups(groups, cluster_id=cluster, now=LATER) == 0
    assert write_create_failures(events, cluster_id=cluster, now=LATER) == 0

    ObservedPodGroup.objects.all().delete()
    ObservedCreateFailure.objects.all().delete()
    current = {}
    for item in groups:
        values = decode.podgroup_values(item)
        current[(values["namespace"], values["name"])] = values
    _one_by_one(ObservedPodGroup, current, ("namespace", "name"), {"last_changed": NOW}, cluster)
    refusals = decode.create_failure_values(events, now=NOW)
    assert len(refusals) == failures
    _one_by_one(ObservedCreateFailure, refusals, ("namespace", "kind", "name"), {}, cluster)
    assert (rows_of(ObservedPodGroup), rows_of(ObservedCreateFailure)) == copied


def test_a_later_poll_writes_the_changed_gangs_and_refusals_as_the_orm_did_in_a_few_statements(
    django_assert_max_num_queries: Any,
) -> None:
    """Every gang and refusal changed since the last poll (another phase, more running,
    another count and message): the rows end as ``update_or_create`` one by one left them,
    written in as many statements as for a few (one by one: a locking read, a savepoint and
    an UPDATE each)."""
    cluster = settings_cluster().pk
    groups, events = _gangs_and_refusals(random.Random(6))
    later_groups, later_events = _gangs_and_refusals(random.Random(6))
    for group in later_groups:
        group["status"] |= {"phase": "Running", "running": group["status"]["running"] + 1}
    for event in later_events:
        event["count"] += 10
        event["message"] = event["message"].replace("requested", "asked")
    write_podgroups(groups, cluster_id=cluster, now=NOW)
    write_create_failures(events, cluster_id=cluster, now=NOW)
    with django_assert_max_num_queries(4):
        assert write_podgroups(later_groups, cluster_id=cluster, now=LATER) == 40
    with django_assert_max_num_queries(4):
        assert write_create_failures(later_events, cluster_id=cluster, now=LATER) > 25
    written = rows_of(ObservedPodGroup), rows_of(ObservedCreateFailure)

    ObservedPodGroup.objects.all().delete()
    ObservedCreateFailure.objects.all().delete()
    for listing, now in ((groups, NOW), (later_groups, LATER)):
        current = {}
        for item in listing:
            values = decode.podgroup_values(item)
            current[(values["namespace"], values["name"])] = values
        _one_by_one(
            ObservedPodGroup, current, ("namespace", "name"), {"last_changed": now}, cluster
        )
    for listing, now in ((events, NOW), (later_events, LATER)):
        refusals = decode.create_failure_values(listing, now=now)
        _one_by_one(ObservedCreateFailure, refusals, ("namespace", "kind", "name"), {}, cluster)
    assert (rows_of(ObservedPodGroup), rows_of(ObservedCreateFailure)) == written


@pytest.mark.django_db(transaction=True)
def test_a_column_is_written_outside_a_transaction_too() -> None:
    """``write_column`` makes its own transaction where none is open (a bench explains what
    waits outside a poll): its temporary table lasts until its UPDATE is done."""
    cluster = settings_cluster().pk
    workloads, positions = kueue_workloads(seed=7, count=20)
    write_workloads(workloads, positions=positions, cluster_id=cluster, now=NOW)
    ids = sorted(ObservedWorkload.objects.values_list("pk", flat=True))
    write_column(ObservedWorkload, "explained", {pk: {"why": None, "row": pk} for pk in ids[:10]})
    stored = dict(ObservedWorkload.objects.values_list("pk", "explained"))
    assert stored == {pk: {"why": None, "row": pk} if pk in ids[:10] else None for pk in ids}
