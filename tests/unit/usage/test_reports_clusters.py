"""The usage reports per cluster and across clusters, computed by hand on rollups of two
clusters: team-a has namespaces on both (one of the same name on each), team-b on one; a
ClusterQueue cq-shared and a pool a100 exist on both. Across clusters a team's use is
summed, each cluster's part shown; a queue or pool is listed once per cluster, never summed
by name."""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import Cluster
from tenants.models import Namespace, Team
from usage import reports
from usage.exports import as_csv
from usage.models import Rollup, WorkloadRecord

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2026, 11, 2, 10, 0, tzinfo=dt.UTC)
HOUR = 3600
PERIOD = reports.Period(T0, T0 + dt.timedelta(hours=2))  # hourly buckets


def rollup(cluster: Cluster, hour: int, kind: str, owner: str, resource: str, **per: Any) -> Rollup:
    """One hour of ``kind`` ``owner``: every value in ``per`` held for the whole hour."""
    return Rollup(
        cluster=cluster,
        period="hour",
        start=T0 + dt.timedelta(hours=hour),
        kind=kind,
        owner=owner,
        scope=per.pop("scope", ""),
        flavor=per.pop("flavor", ""),
        resource=resource,
        covered_seconds=HOUR,
        **{f"{k}_seconds": v * HOUR for k, v in per.items()},
    )


def wait(cluster: Cluster, namespace: str, name: str, seconds: int) -> WorkloadRecord:
    return WorkloadRecord(
        cluster=cluster,
        namespace=namespace,
        name=name,
        cluster_queue="cq-shared",
        created_at=T0,
        admitted_at=T0 + dt.timedelta(seconds=seconds),
    )


@pytest.fixture
def clusters(team_a: Team, team_b: Team) -> tuple[Cluster, Cluster]:
    train = Cluster.objects.create(name="train", display_name="Train", connection="token")
    serve = Cluster.objects.create(name="serve", display_name="Serve", connection="token")
    Namespace.objects.create(cluster=train, name="team-a", team=team_a)
    Namespace.objects.create(cluster=train, name="team-b", team=team_b)
    Namespace.objects.create(cluster=serve, name="team-a", team=team_a)
    Namespace.objects.create(cluster=serve, name="team-a-serve", team=team_a)
    Namespace.objects.create(cluster=serve, name="team-b", team=team_a)  # team-a's, there
    gpu, mig = "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
    rows = []
    for hour in (0, 1):
        # train: team-a 2 GPUs of a quota of 4; cq-shared 3 of 8; pool a100 2 of 14 slices.
        rows += [
            rollup(train, hour, "team", "team-a", gpu, scope="team-a", used=2, gpu=2, capacity=4),
            rollup(
                train,
                hour,
                "queue",
                "cq-shared",
                gpu,
                scope="fleet",
                flavor="a100",
                used=3,
                gpu=3,
                capacity=8,
            ),
            rollup(train, hour, "pool", "a100", mig, used=2, capacity=14),
        ]
        # serve: team-a 1 GPU of 4 (and pods waiting for GPUs); cq-shared 1 of 4, borrowing
        # 1 (each cq-shared is in its cluster's cohort fleet); pool a100 7 of 7 slices.
        rows += [
            rollup(
                serve, hour, "team", "team-a", gpu, scope="team-a", used=1, gpu=1, capacity=4,
                pending=1,
            ),
            rollup(
                serve, hour, "queue", "cq-shared", gpu, scope="fleet", flavor="a100", used=1,
                gpu=1, capacity=4, borrowed=1,
            ),
            rollup(serve, hour, "pool", "a100", mig, used=7, capacity=7),
        ]  # fmt: skip
    # train, the first hour: team-b 1 GPU of 2. serve, the second: team-a-serve 7 slices
    # (one GPU's worth) of 7.
    rows.append(rollup(train, 0, "team", "team-b", gpu, scope="team-b", used=1, gpu=1, capacity=2))
    rows.append(
        rollup(serve, 1, "team", "team-a", mig, scope="team-a-serve", used=7, gpu=1, capacity=7)
    )
    Rollup.objects.bulk_create(rows)
    WorkloadRecord.objects.bulk_create(
        [
            wait(train, "team-a", "a1", 60),
            wait(train, "team-a", "a2", 120),
            wait(train, "team-b", "b1", 30),
            wait(serve, "team-a", "a3", 600),
            wait(serve, "team-b", "a4", 300),  # team-a's namespace team-b on serve
        ]
    )
    return train, serve


def test_a_teams_use_is_summed_over_its_clusters_each_part_shown(
    clusters: tuple[Cluster, Cluster],
) -> None:
    _, serve = clusters
    # team-a: train 2 GPUs x 2 h; serve 1 GPU x 2 h + 7 slices (1 GPU) x 1 h.
    assert reports.gpu_hours(PERIOD) == [
        {
            "team": "team-a",
            "gpu_hours": 7.0,
            "device_hours": 13.0,
            "clusters": [
                {"cluster": "serve", "gpu_hours": 3.0, "device_hours": 9.0},
                {"cluster": "train", "gpu_hours": 4.0, "device_hours": 4.0},
            ],
        },
        {
            "team": "team-b",
            "gpu_hours": 1.0,
            "device_hours": 1.0,
            "clusters": [{"cluster": "train", "gpu_hours": 1.0, "device_hours": 1.0}],
        },
    ]
    assert reports.gpu_hours(PERIOD, cluster=serve) == [
        {
            "team": "team-a",
            "gpu_hours": 3.0,
            "device_hours": 9.0,
            "clusters": [{"cluster": "serve", "gpu_hours": 3.0, "device_hours": 9.0}],
        }
    ]
    by_resource = reports.gpu_hours(PERIOD, by="resource", teams=["team-a"])
    assert [(r["resource"], r["gpu_hours"], len(r["clusters"])) for r in by_resource] == [
        ("nvidia.com/gpu", 6.0, 2),
        ("nvidia.com/mig-1g.10gb", 1.0, 1),
    ]
    # A namespace is on one cluster: team-a's two namespaces team-a are two rows.
    assert [
        (r["cluster"], r["namespace"], r["gpu_hours"])
        for r in reports.gpu_hours(PERIOD, by="namespace")
    ] == [
        ("serve", "team-a", 2.0),
        ("train", "team-a", 4.0),
        ("serve", "team-a-serve", 1.0),
        ("train", "team-b", 1.0),
    ]


def test_the_charts_sum_a_teams_namespaces_on_every_cluster_or_on_one(
    clusters: tuple[Cluster, Cluster],
) -> None:
    train, _ = clusters
    every = reports.usage_by_bucket(PERIOD, teams=["team-a"], resource="nvidia.com/gpu")
    assert [(r["average_used"], r["quota"], r["covered_hours"]) for r in every] == [
        (3.0, 8.0, 1.0),  # 2 + 1 in use, 4 + 4 quota, each hour
        (3.0, 8.0, 1.0),
    ]
    one = reports.usage_by_bucket(
        PERIOD, teams=["team-a"], resource="nvidia.com/gpu", cluster=train
    )
    assert [(r["average_used"], r["quota"]) for r in one] == [(2.0, 4.0), (2.0, 4.0)]


def test_a_queue_or_pool_of_the_same_name_on_two_clusters_is_two_rows(
    clusters: tuple[Cluster, Cluster],
) -> None:
    train, serve = clusters
    assert [(r["cluster"], r["cluster_queue"], r["gpu_hours"]) for r in reports.queue_gpu_hours(PERIOD)] == [
        ("serve", "cq-shared", 2.0),
        ("train", "cq-shared", 6.0),
    ]  # fmt: skip
    queues = [r for r in reports.quota_utilisation(PERIOD) if r["level"] != "namespace quota"]
    assert [(r["cluster"], r["owner"], r["utilisation"]) for r in queues] == [
        ("serve", "cq-shared (a100)", 0.25),
        ("train", "cq-shared (a100)", 0.375),
    ]
    namespaces = [r for r in reports.quota_utilisation(PERIOD) if r["level"] == "namespace quota"]
    assert [(r["cluster"], r["owner"], r["utilisation"]) for r in namespaces] == [
        ("serve", "team-a/team-a", 0.25),
        ("train", "team-a/team-a", 0.5),
        ("serve", "team-a/team-a-serve", 1.0),
        ("train", "team-b/team-b", 0.5),
    ]
    borrowed = reports.borrowing(PERIOD)
    assert [(r["cluster"], r["average_borrowed"], r["borrowed_hours"]) for r in borrowed] == [
        ("serve", 1.0, 2.0),
        ("train", 0.0, 0.0),
    ]
    idle = reports.idle_capacity(PERIOD)
    assert [(r["cluster"], r["pool"], r["idle_share"]) for r in idle] == [
        ("serve", "a100", 0.0),
        ("train", "a100", round(1 - 2 / 14, 4)),
    ]
    assert [r["cluster"] for r in reports.idle_capacity(PERIOD, cluster=train)] == ["train"]
    assert reports.borrowing(PERIOD, cluster=serve)[0]["average_borrowed"] == 1.0


def test_wait_times_are_per_queue_of_each_cluster_and_a_teams_namespaces_there(
    clusters: tuple[Cluster, Cluster],
) -> None:
    _, serve = clusters
    assert [(r["cluster"], r["admitted"], r["p50_s"]) for r in reports.wait_times(PERIOD)] == [
        ("serve", 2, 450.0),
        ("train", 3, 60.0),
    ]
    # team-b's namespace is on train only: serve's namespace team-b (team-a's) is not its.
    assert [
        (r["cluster"], r["admitted"], r["p50_s"])
        for r in reports.wait_times(PERIOD, teams=["team-b"])
    ] == [("train", 1, 30.0)]
    assert [
        (r["cluster"], r["admitted"], r["p50_s"])
        for r in reports.wait_times(PERIOD, teams=["team-a"], cluster=serve)
    ] == [("serve", 2, 450.0)]


def test_suggestions_name_the_cluster_and_compare_within_it(
    clusters: tuple[Cluster, Cluster],
) -> None:
    train, _ = clusters
    found = reports.suggestions(PERIOD)
    (unused,) = found.items  # team-a uses 25% of its 4 GPUs on serve
    assert unused["cluster"] == "serve"
    assert unused["text"].startswith("on serve: team-a/team-a used 25% of its 4 nvidia.com/gpu")
    assert unused["url"] == (
        "/quota/new/?team=team-a&namespace=team-a&resource=requests.nvidia.com%2Fgpu&cluster=serve"
    )
    # train's slices sat 86% idle, but the pods waiting for GPUs wait on serve: nothing to
    # suggest on train; once pods wait there too, the layout change is suggested.
    assert "2 MIG profiles in 2 pools" in found.checked
    Rollup.objects.filter(cluster=train, kind="team", owner="team-b").update(pending_seconds=HOUR)
    (idle,) = [
        i for i in reports.suggestions(PERIOD, cluster=train).items if i["kind"] != "unused quota"
    ]
    assert idle["text"] == (
        "nvidia.com/mig-1g.10gb sat 86% idle in pool a100 while pods waited for nvidia.com/gpu: "
        "change the pool's MIG layout."
    )  # fmt: skip
    assert idle["url"] == "/changes/new/?pool=a100&cluster=train"


def test_the_api_and_csv_give_one_cluster_or_all_and_refuse_an_unknown_one(
    clusters: tuple[Cluster, Cluster], approver: Any, client: Client
) -> None:
    client.force_login(approver)
    period = reports.Period(T0, T0 + dt.timedelta(days=1))
    rows = reports.gpu_hours(period)
    table = list(csv.reader(io.StringIO(as_csv(rows))))
    assert table == [
        [
            "team",
            "gpu_hours",
            "device_hours",
            "serve gpu_hours",
            "serve device_hours",
            "train gpu_hours",
            "train device_hours",
        ],
        ["team-a", "7", "13", "3", "9", "4", "4"],
        ["team-b", "1", "1", "0", "0", "1", "1"],
    ]
    refused = client.get("/api/v1/reports/gpu-hours/?cluster=nowhere")
    assert refused.status_code == 400
    assert "No cluster is named 'nowhere'." in str(refused.json())
    assert client.get("/reports/gpu-hours.csv?cluster=nowhere").status_code == 400
    # A day of the last week on each cluster's pool a100: 2 of 14 slices on train, 7 of 7
    # on serve.
    day = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0) - dt.timedelta(days=2)
    train, serve = clusters
    for cluster, used, capacity in ((train, 2, 14), (serve, 7, 7)):
        Rollup.objects.create(
            cluster=cluster,
            period="day",
            start=day,
            kind="pool",
            owner="a100",
            resource="nvidia.com/mig-1g.10gb",
            covered_seconds=86400,
            used_seconds=used * 86400,
            capacity_seconds=capacity * 86400,
        )
    one = client.get("/api/v1/reports/idle-capacity/?days=7&cluster=train").json()
    assert [(r["cluster"], r["pool"], r["idle_device_hours"]) for r in one] == [
        ("train", "a100", 12 * 24.0)
    ]
    every = client.get("/api/v1/reports/idle-capacity/?days=7&format=csv").content.decode()
    assert every.splitlines()[1:] == [
        "serve,a100,nvidia.com/mig-1g.10gb,7,7,0,0,0,0",
        "train,a100,nvidia.com/mig-1g.10gb,14,2,0.8571,288,0,0",
    ]


def test_the_csv_says_a_bucket_s_start_as_its_day_or_hour() -> None:
    """A bucket's start read "2026-11-02T00:00:00+00:00": it reads its day, or its hour."""
    rows = [{"start": T0.replace(hour=0)}, {"start": T0.isoformat()}, {"start": None}]
    text = as_csv(rows)
    assert [row["start"] for row in csv.DictReader(io.StringIO(text))] == [
        "2026-11-02",
        "2026-11-02 10:00 UTC",
        "",
    ]


def test_the_csv_says_flags_and_numbers_as_people_read_them() -> None:
    """A spreadsheet read "False" and "20.0": it reads no and 20."""
    text = as_csv([{"team": "team-a", "borrowing": False, "gpu_hours": 20.0, "share": 0.123456}])
    assert list(csv.DictReader(io.StringIO(text))) == [
        {"team": "team-a", "borrowing": "no", "gpu_hours": "20", "share": "0.1235"}
    ]
