"""The poll's workload rows: a Workload listed again at the version its row was decoded from,
at the same place in line, is not decoded or written again; any other is decoded, and its
row ends as a full decoding of the listing would have it (real Kueue v0.19.2's Workloads,
tests/data/kueue-samples, verbatim)."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from cluster import decode
from cluster.models import ObservedWorkload
from cluster.services import settings_cluster
from loop.write import write_workloads

pytestmark = pytest.mark.django_db
SAMPLES = Path(__file__).resolve().parents[2] / "data" / "kueue-samples"
NOW = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=1)
LATEST = NOW + dt.timedelta(minutes=2)
KEPT = ("decoded_from", "last_changed", "explained", "explained_digest")


def _recorded(name: str) -> dict[str, Any]:
    return json.loads((SAMPLES / name).read_text())  # type: ignore[no-any-return]


def _listing() -> list[dict[str, Any]]:
    return [_recorded("workload-pending.json"), _recorded("workload-admitted.json")]


def _rows() -> dict[str, dict[str, Any]]:
    return {
        row["name"]: row
        for row in ObservedWorkload.objects.values(
            *(f.attname for f in ObservedWorkload._meta.concrete_fields if f.attname != "id")
        )
    }


def _as_decoded(
    listing: list[dict[str, Any]], positions: dict[tuple[str, str], tuple[int, int]]
) -> dict[str, dict[str, Any]]:
    """Each listed Workload's row as a full decoding gives it (what the rows must equal)."""
    out = {}
    for item in listing:
        values = decode.workload_values(item)
        where = positions.get((values["namespace"], values["name"]), (None, None))
        values["position"], values["position_in_local_queue"] = where
        out[values["name"]] = values
    return out


def _decoded_part(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        name: {k: v for k, v in row.items() if k not in (*KEPT, "cluster_id")}
        for name, row in rows.items()
    }


def test_an_unchanged_workload_is_neither_decoded_nor_written_again() -> None:
    cluster = settings_cluster().pk
    listing = _listing()
    pending = listing[0]["metadata"]
    where = {(pending["namespace"], pending["name"]): (3, 1)}
    assert write_workloads(listing, cluster_id=cluster, now=NOW, positions=where) == 2
    first = _rows()
    assert all(
        row["decoded_from"].endswith(":" + row_rv)
        for row, row_rv in zip(
            (first[w["metadata"]["name"]] for w in listing),
            (w["metadata"]["resourceVersion"] for w in listing),
            strict=True,
        )
    )
    # The same versions at the same places: nothing written, the rows as they were.
    again = copy.deepcopy(listing)
    assert write_workloads(again, cluster_id=cluster, now=LATER, positions=dict(where)) == 0
    assert _rows() == first
    # Not decoded: what a Workload says at the version its row was decoded from is the row.
    again[0]["spec"]["queueName"] = "not-read"
    assert write_workloads(again, cluster_id=cluster, now=LATER, positions=dict(where)) == 0
    assert _rows() == first


def test_a_changed_workload_is_written_as_a_full_decoding_gives_it() -> None:
    cluster = settings_cluster().pk
    listing = _listing()
    pending, admitted = (w["metadata"] for w in listing)
    write_workloads(listing, cluster_id=cluster, now=NOW)
    # Admitted's new version with what the poll keeps unchanged (a field it does not read):
    # its source is noted, its last change stays.
    listing[1]["metadata"]["resourceVersion"] = "900"
    listing[1]["status"]["unread"] = True
    assert write_workloads(listing, cluster_id=cluster, now=LATER) == 0
    row = _rows()[admitted["name"]]
    assert row["decoded_from"].endswith(":900") and row["last_changed"] == NOW
    # Pending's new version with another reason, and admitted's place in line at the same
    # version (the visibility API says it apart): both written, as of now.
    listing[0]["metadata"]["resourceVersion"] = "901"
    reserved = next(c for c in listing[0]["status"]["conditions"] if c["type"] == "QuotaReserved")
    reserved["message"] = "couldn't assign flavors to pod set main: insufficient quota"
    where = {(pending["namespace"], pending["name"]): (0, 0)}
    assert write_workloads(listing, cluster_id=cluster, now=LATEST, positions=where) == 1
    rows = _rows()
    assert _decoded_part(rows) == _as_decoded(listing, where)
    assert rows[pending["name"]]["last_changed"] == LATEST
    assert rows[pending["name"]]["decoded_from"].endswith(":901")
    # Its place gone (the same version): written again without it.
    assert write_workloads(listing, cluster_id=cluster, now=LATEST, positions={}) == 1
    assert _decoded_part(_rows()) == _as_decoded(listing, {})
    # A Workload gone: its row goes.
    assert write_workloads(listing[:1], cluster_id=cluster, now=LATEST) == 1
    assert set(_rows()) == {pending["name"]}


def test_a_workload_without_a_version_is_always_decoded() -> None:
    cluster = settings_cluster().pk
    listing = _listing()[:1]
    del listing[0]["metadata"]["resourceVersion"]
    write_workloads(listing, cluster_id=cluster, now=NOW)
    listing[0]["spec"]["queueName"] = "elsewhere"
    assert write_workloads(listing, cluster_id=cluster, now=LATER) == 1
    assert _rows()[listing[0]["metadata"]["name"]]["queue_name"] == "elsewhere"


def test_rows_written_before_sources_were_kept_get_theirs_without_a_change() -> None:
    """After the upgrade every row's source is empty: the first poll decodes each Workload,
    writes its source and keeps the row's last change."""
    cluster = settings_cluster().pk
    write_workloads(_listing(), cluster_id=cluster, now=NOW)
    ObservedWorkload.objects.update(decoded_from="")
    assert write_workloads(_listing(), cluster_id=cluster, now=LATER) == 0
    rows = _rows().values()
    assert all(r["decoded_from"] and r["last_changed"] == NOW for r in rows)


def _many(count: int) -> list[dict[str, Any]]:
    """``count`` copies of the recorded pending Workload, each its own."""
    out = []
    for i in range(count):
        item = _recorded("workload-pending.json")
        item["metadata"]["name"] = f"job-{i}"
        item["metadata"]["uid"] = f"uid-{i}"
        out.append(item)
    return out


def _admitted(listing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each of ``listing`` at its next version, admitted as the recorded admitted one is."""
    status = _recorded("workload-admitted.json")["status"]
    out = copy.deepcopy(listing)
    for item in out:
        item["metadata"]["resourceVersion"] = str(int(item["metadata"]["resourceVersion"]) + 1)
        item["status"] = copy.deepcopy(status)
    return out


@pytest.mark.parametrize("count", [3, 40])
def test_workloads_admitted_at_once_are_written_in_as_many_statements_as_one(
    count: int, django_assert_max_num_queries: Any
) -> None:
    """A poll in which many workloads were admitted writes their rows together: as many
    statements for 40 as for 3 (one by one, each had a SELECT, a savepoint and an UPDATE),
    and every row ends as a full decoding of the listing gives it, stamped as of now."""
    cluster = settings_cluster().pk
    write_workloads(_many(count), cluster_id=cluster, now=NOW)
    admitted = _admitted(_many(count))
    with django_assert_max_num_queries(4):
        assert write_workloads(admitted, cluster_id=cluster, now=LATER) == count
    rows = _rows()
    assert _decoded_part(rows) == _as_decoded(admitted, {})
    assert {r["last_changed"] for r in rows.values()} == {LATER}
    assert all(r["admitted"] for r in rows.values())
