"""Kueue's events about Workloads, as the poll keeps them: decoded from what real Kueue
v0.19.2 wrote (tests/data/kueue-samples, verbatim), written when new or changed, bounded
per workload and per cluster, gone with their workload, and their preemptor named only
where the same poll saw it."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from cluster.decode import workload_event_values
from cluster.models import ObservedEvent, ObservedWorkload
from cluster.scope import settings_cluster_id
from loop import write

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "kueue-samples"


def recorded(name: str) -> Any:
    return json.loads((SAMPLES / name).read_text())


def story_recording() -> dict[str, Any]:
    return recorded("events-workload-story.json")  # type: ignore[no-any-return]


def decoded(events: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for event in events:
        values = workload_event_values(event)
        if values is not None:
            out[values["namespace"], values["name"]] = values
    return out


def test_real_kueues_events_decode_and_others_are_left_out() -> None:
    items = recorded("events-rc-team-a.json")["items"]
    values = decoded(items)
    assert sorted(v["reason"] for v in values.values()) == ["Admitted", "Pending", "QuotaReserved"]
    reserved = next(v for v in values.values() if v["reason"] == "QuotaReserved")
    assert reserved["workload_name"] == "job-rc-train-4gpu-b1845"
    assert reserved["message"].startswith("Quota reserved in ClusterQueue rc-cq-team-a")
    assert reserved["count"] == 1 and reserved["type"] == "Normal"
    # The events.k8s.io recorder leaves the old timestamps empty: its eventTime is the time.
    assert (
        reserved["first_seen"]
        == reserved["last_seen"]
        == dt.datetime(2026, 12, 1, 9, 26, 23, 893441, tzinfo=dt.UTC)
    )
    # A repeated event is one Event with a series (the API's core shape keeps it).
    again = copy.deepcopy(next(e for e in items if e["reason"] == "Pending"))
    again["series"] = {"count": 7, "lastObservedTime": "2026-12-01T10:00:00.000000Z"}
    repeated = workload_event_values(again)
    assert repeated is not None and repeated["count"] == 7
    assert repeated["last_seen"] == dt.datetime(2026, 12, 1, 10, tzinfo=dt.UTC)


def test_a_preemption_names_its_preemptor_by_uid_which_the_writer_resolves() -> None:
    recording = story_recording()
    values = decoded(recording["items"])
    preempted = [v for v in values.values() if v["reason"] == "Preempted"]
    assert preempted and all(v["preemptor_uid"] for v in preempted)
    uid = next(
        w["metadata"]["uid"]
        for w in recording["workloads"]
        if w["metadata"]["name"] == recording["preemptor"]
    )
    assert {v["preemptor_uid"] for v in preempted} == {uid}


@pytest.mark.django_db
def test_the_poll_writes_new_events_once_bounds_them_and_drops_a_gone_workloads() -> None:
    recording = story_recording()
    cluster = settings_cluster_id()
    now = timezone.now()
    workloads = recording["workloads"]
    for w in workloads:
        meta = w["metadata"]
        ObservedWorkload.objects.create(
            cluster_id=cluster, namespace=meta["namespace"], name=meta["name"], last_changed=now
        )
    events = decoded(recording["items"])
    assert write.write_events(events, workloads, cluster_id=cluster, now=now) == len(events)
    assert write.write_events(events, workloads, cluster_id=cluster, now=now) == 0  # unchanged
    rows = ObservedEvent.objects.on(cluster)
    victim = recording["victim"]
    assert {e.preemptor for e in rows.filter(workload_name=victim, reason="Preempted")} == {
        f"team-infer/{recording['preemptor']}"
    }
    # One workload's many: its newest EVENTS_PER_WORKLOAD kept, an older one not written again.
    base = next(v for v in events.values() if v["workload_name"] == victim)
    many = {
        (base["namespace"], f"many-{i}"): {
            **base,
            "name": f"many-{i}",
            "first_seen": now - dt.timedelta(minutes=100 - i),
            "last_seen": now - dt.timedelta(minutes=100 - i),
        }
        for i in range(write.EVENTS_PER_WORKLOAD + 5)
    }
    write.write_events({**events, **many}, workloads, cluster_id=cluster, now=now)
    kept = rows.filter(workload_name=victim)
    assert kept.count() == write.EVENTS_PER_WORKLOAD
    assert write.write_events({**events, **many}, workloads, cluster_id=cluster, now=now) == 0
    # Its workload gone: its events go with it.
    gone = [w for w in workloads if w["metadata"]["name"] != victim]
    write.write_events(events, gone, cluster_id=cluster, now=now)
    assert not rows.filter(workload_name=victim).exists()
    assert rows.exists()
