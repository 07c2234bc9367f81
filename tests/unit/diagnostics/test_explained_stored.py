"""The explanations a poll stores are written in a fixed number of statements
(``loop.write.write_column``): on a generated world, what is stored is what Django's
``bulk_update`` stored, and a second explanation at the same moment writes nothing."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db.models import Q

from cluster.models import ObservedCreateFailure, ObservedPod, ObservedWorkload
from cluster.scope import settings_cluster_id
from diagnostics.explainer import (
    REFUSALS_KEPT,
    UNREAD_OF_PODS,
    _undercharged,
    admitted_of,
    explain,
    explain_cluster,
    json_digest,
    to_json,
)
from loop.write import write_create_failures, write_workloads
from tests.factories import ObservedNodeFactory, ObservedPodFactory
from tests.generated import NOW, kueue_workloads, rows_of

pytestmark = pytest.mark.django_db
GPU = "nvidia.com/gpu"


def _world(cluster_id: int) -> None:
    """300 workloads, nodes half full, Pending pods (some a workload's, some too big for
    any node) and refused creations."""
    workloads, positions = kueue_workloads(seed=25)
    write_workloads(workloads, positions=positions, cluster_id=cluster_id, now=NOW)
    for index in range(4):
        ObservedNodeFactory(allocatable={GPU: "8"}, allocated={GPU: 2 * index})
    for index in range(60):
        ObservedPodFactory(
            namespace=f"team-{index % 7}",
            phase="Pending",
            gpu_requests={GPU: 1 + index % 12},
            pending_message=f"0/4 nodes are available: {index % 4} Insufficient {GPU}.",
            workload_name=f"job-{index:04d}" if index % 3 else "",
            queue_name=f"lq-{index % 3}",
        )
    events = [
        {"metadata": {"namespace": f"team-{i % 7}"}, "reason": "FailedCreate",
         "involvedObject": {"kind": "Job", "name": f"batch-{i}"},
         "message": f'pods "p-{i}" is forbidden: exceeded quota: q-{i % 2}, requested: gpu=1',
         "lastTimestamp": (NOW - dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
        for i in range(30)
    ]  # fmt: skip
    write_create_failures(events, cluster_id=cluster_id, now=NOW)


def _stored_as_before(cluster_id: int, now: dt.datetime) -> None:
    """The explainer's store as it was: each changed row by ``bulk_update``, 500 a batch."""
    workloads = list(
        ObservedWorkload.objects.on(cluster_id).filter(finished=False)
        .order_by("admitted", "namespace", "created_at")
    )  # fmt: skip
    pods = list(
        ObservedPod.objects.on(cluster_id).filter(phase="Pending").defer(*UNREAD_OF_PODS)
        .order_by("namespace", "name")
    )  # fmt: skip
    failures = list(
        ObservedCreateFailure.objects.on(cluster_id).filter(last_seen__gte=now - REFUSALS_KEPT)
        .order_by("namespace", "kind", "name")
    )  # fmt: skip
    held = _undercharged([w for w in workloads if w.admitted], cluster_id)
    admitted = admitted_of(cluster_id)
    explain(workloads, pods, failures, cluster_id=cluster_id, now=now, held=held, admitted=admitted)
    for model, rows in ((ObservedWorkload, workloads), (ObservedPod, pods),
                        (ObservedCreateFailure, failures)):  # fmt: skip
        changed = []
        for row in rows:
            stored: Any = to_json(row)
            if stored != row.explained:
                row.explained = stored
                changed.append(row)
        model.objects.bulk_update(changed, ["explained"], batch_size=500)


def test_the_explanations_stored_are_the_ones_bulk_update_stored() -> None:
    cluster = settings_cluster_id()
    _world(cluster)
    now = NOW + dt.timedelta(seconds=30)
    assert explain_cluster(cluster, now) > 300
    stored = [rows_of(m) for m in (ObservedWorkload, ObservedPod, ObservedCreateFailure)]
    assert explain_cluster(cluster, now) == 0
    assert ObservedWorkload.objects.filter(finished=True, explained__isnull=False).count() == 0
    # the refusals of the last 15 minutes are explained, the older ones are history
    assert ObservedCreateFailure.objects.filter(~Q(explained=None)).count() == 15

    for model in (ObservedWorkload, ObservedPod, ObservedCreateFailure):
        model.objects.update(explained=None)
    _stored_as_before(cluster, now)
    assert [rows_of(m) for m in (ObservedWorkload, ObservedPod, ObservedCreateFailure)] == stored


def test_each_stored_explanation_carries_its_digest_which_decides_what_is_written() -> None:
    cluster = settings_cluster_id()
    _world(cluster)
    now = NOW + dt.timedelta(seconds=30)
    explain_cluster(cluster, now)
    for model in (ObservedWorkload, ObservedPod, ObservedCreateFailure):
        pairs = list(model.objects.values_list("explained", "explained_digest"))
        assert any(explained is not None for explained, _ in pairs)
        for explained, digest in pairs:
            assert digest == (None if explained is None else json_digest(explained))
    # the digest is the value's, whatever order its dicts were built in
    assert json_digest({"a": 1, "b": [1, {"c": None, "d": "2"}]}) == json_digest(
        {"b": [1, {"d": "2", "c": None}], "a": 1}
    )
    assert json_digest({"a": 1}) != json_digest({"a": "1"})
    # a row stored before digests (none): written again once, then kept
    waiting = ObservedWorkload.objects.filter(admitted=False, explained__isnull=False)
    assert waiting[:3].count() == 3
    ObservedWorkload.objects.filter(pk__in=waiting.values("pk")[:3]).update(explained_digest=None)
    assert explain_cluster(cluster, now) == 3
    assert explain_cluster(cluster, now) == 0
