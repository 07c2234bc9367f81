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
from cluster.models import ObservedEvent
from cluster.scope import settings_cluster_id
from loop import write
from loop.fetch import EVENTS_LOOKED_BACK, events_since, workload_events

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
    write.write_workloads(workloads, cluster_id=cluster, now=now)
    events = decoded(recording["items"])
    assert write.write_events(events, workloads, cluster_id=cluster, now=now) == len(events)
    assert write.write_events(events, workloads, cluster_id=cluster, now=now) == 0  # unchanged
    rows = ObservedEvent.objects.on(cluster)
    victim = recording["victim"]
    assert {e.preemptor for e in rows.filter(workload_name=victim, reason="Preempted")} == {
        f"team-infer/{recording['preemptor']}"
    }
    # A series said again: its count and last time written, nothing else.
    key = next(k for k, v in events.items() if v["count"] > 1)
    again = {key: {**events[key], "count": 3, "last_seen": now}}
    assert write.write_events(again, workloads, cluster_id=cluster, now=now) == 1
    assert rows.get(namespace=key[0], name=key[1]).count == 3
    # One workload's many, all older than the recorded ones (whenever the test runs): its
    # newest EVENTS_PER_WORKLOAD kept.
    base = next(v for v in events.values() if v["workload_name"] == victim)
    start = min(v["last_seen"] for v in events.values()) - dt.timedelta(minutes=200)
    many = {
        (base["namespace"], f"many-{i}"): {
            **base,
            "name": f"many-{i}",
            "first_seen": start + dt.timedelta(minutes=i),
            "last_seen": start + dt.timedelta(minutes=i),
        }
        for i in range(write.EVENTS_PER_WORKLOAD + 5)
    }
    had = rows.filter(workload_name=victim).count()
    write.write_events(many, workloads, cluster_id=cluster, now=now)
    kept = rows.filter(workload_name=victim)
    assert kept.count() == write.EVENTS_PER_WORKLOAD
    oldest_kept = len(many) - (write.EVENTS_PER_WORKLOAD - had)  # the recorded ones are newer
    assert min(e.last_seen for e in kept) == start + dt.timedelta(minutes=oldest_kept)
    # An event about a workload the poll did not see is left out.
    stray = {("team-a", "stray.1"): {**base, "name": "stray.1", "workload_name": "not-there"}}
    assert write.write_events(stray, workloads, cluster_id=cluster, now=now) == 0
    # Its workload gone: its events go with it.
    gone = [w for w in workloads if w["metadata"]["name"] != victim]
    write.write_workloads(gone, cluster_id=cluster, now=now)
    assert not rows.filter(workload_name=victim).exists()
    assert rows.exists()


class Pages:
    """A gateway that serves recorded Events in pages (only ``list_pages`` is asked)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def list_pages(self, *args: Any, **kwargs: Any) -> Any:
        assert kwargs["field_selector"] == "involvedObject.kind=Workload"
        yield self.items[:5]
        yield self.items[5:]


@pytest.mark.django_db
def test_a_steady_poll_looks_only_at_the_events_of_the_last_minutes() -> None:
    """Once events are kept, the poll decodes and compares only those said since
    EVENTS_LOOKED_BACK before the newest kept: not every Event the API server holds."""
    recording = story_recording()
    cluster = settings_cluster_id()
    assert events_since(cluster) == ""  # nothing kept: every Event
    found = workload_events(Pages(recording["items"]), events_since(cluster))  # type: ignore[arg-type]
    assert found is not None and len(found) == len(recording["items"])
    write.write_workloads(recording["workloads"], cluster_id=cluster, now=timezone.now())
    write.write_events(found, recording["workloads"], cluster_id=cluster, now=timezone.now())
    newest = max(v["last_seen"] for v in found.values())
    since = events_since(cluster)
    assert since == (newest - EVENTS_LOOKED_BACK).strftime("%Y-%m-%dT%H:%M:%SZ")
    old = copy.deepcopy(recording["items"][0])
    old["metadata"]["name"] = "older.1"
    old["eventTime"] = "2026-12-06T11:00:00.000000Z"  # an hour before the recording
    again = workload_events(Pages([*recording["items"], old]), since)  # type: ignore[arg-type]
    assert again is not None and ("team-a", "older.1") not in again
    assert len(again) == len(recording["items"])
