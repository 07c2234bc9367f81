"""The estimated wait read from the observed rows and the usage history: the API's field, the
home page's words, other teams' workloads counted in line but never named, an approved MIG
change a pod waits for, and a fixed number of queries whatever the history's size."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from changes.models import MigChangeRequest
from cluster.models import ObservedWorkload
from queues.models import ClusterQueue, Cohort
from tests.factories import (
    ClusterQueueFactory,
    LocalQueueFactory,
    MigChangeRequestFactory,
    NamespaceFactory,
    ObservedNodeFactory,
    ObservedPodFactory,
)
from tests.support import written
from usage.models import WorkloadRecord

pytestmark = pytest.mark.django_db
GPU = "nvidia.com/gpu"


def gpu_queue(name: str, nominal: str) -> ClusterQueue:
    return ClusterQueueFactory(
        name=name,
        resource_groups=[
            {
                "coveredResources": [GPU],
                "flavors": [
                    {"name": "h100", "resources": [{"name": GPU, "nominalQuota": nominal}]}
                ],
            }
        ],
    )


def history(queue: str, minutes: list[int], *, namespace: str = "team-a", start: int = 0) -> None:
    """Finished workloads of ``queue``, one per run time, ended in the last days."""
    now = timezone.now()
    WorkloadRecord.objects.bulk_create(
        WorkloadRecord(
            namespace=namespace,
            name=f"done-{start + i}",
            cluster_queue=queue,
            created_at=now - dt.timedelta(days=2, minutes=i),
            admitted_at=now - dt.timedelta(days=2, minutes=i),
            finished_at=now - dt.timedelta(days=2, minutes=i) + dt.timedelta(minutes=ran),
        )
        for i, ran in enumerate(minutes)
    )


def short_of(gpus: int, flavor: str = "h100") -> str:
    return (
        "couldn't assign flavors to pod set main: insufficient unused quota for "
        f"nvidia.com/gpu in flavor {flavor}, {gpus} more needed"
    )


def workload(
    namespace: str,
    name: str,
    queue: str,
    *,
    gpus: int,
    position: int | None = None,
    admitted_into: str = "",
    message: str | None = None,
) -> None:
    """An observed Kueue workload asking for ``gpus``: admitted just now into
    ``admitted_into``, or waiting (at ``position``, with Kueue's ``message``)."""
    now = timezone.now()
    ObservedWorkload.objects.create(
        namespace=namespace,
        name=name,
        queue_name=queue,
        cluster_queue=admitted_into,
        admitted=bool(admitted_into),
        admitted_at=now if admitted_into else None,
        reason="" if admitted_into else "Pending",
        message=message if message is not None else ("" if admitted_into else short_of(gpus)),
        requests={GPU: gpus},
        position=position,
        created_at=now - dt.timedelta(minutes=30 - (position or 0)),
        last_changed=now,
    )


def waiting(namespace: str, name: str, position: int, queue: str = "team-a-train") -> None:
    workload(namespace, name, queue, gpus=4, position=position)


@pytest.fixture
def line(team_a_admin: Any, team_b: Any) -> None:
    """cq-train (4 GPUs) runs team-b's job for 4 GPUs, just admitted; team-b's job is first
    in line, team-a's second, team-a's job-mine third."""
    cq = gpu_queue("cq-train", "4")
    team_a = team_a_admin.memberships.get().team
    LocalQueueFactory(
        name="team-a-train",
        namespace=NamespaceFactory(name="team-a", team=team_a),
        cluster_queue=cq,
    )
    LocalQueueFactory(
        name="team-b-train",
        namespace=NamespaceFactory(name="team-b", team=team_b),
        cluster_queue=cq,
    )
    workload("team-b", "job-b-running", "team-b-train", gpus=4, admitted_into="cq-train")
    waiting("team-b", "job-b-first", 0, "team-b-train")
    waiting("team-a", "job-a-second", 1)
    waiting("team-a", "job-mine", 2)
    history("cq-train", [50, 60, 70, 80, 90])


def test_the_api_gives_each_waiting_workload_its_estimate(
    client: Client, team_a_admin: Any, line: None
) -> None:
    client.force_login(team_a_admin)
    written()
    rows = {r["name"]: r for r in client.get("/api/v1/waiting/").json()}
    assert set(rows) == {"job-a-second", "job-mine"}  # team-b's are counted, not shown
    mine = rows["job-mine"]["estimate"]
    assert {k: mine[k] for k in ("summary", "basis")} == {
        "summary": "about 3–4 h",
        "basis": "3rd in line; the two ahead and the one running usually run 60–80 min "
        "(5 finished in cq-train)",
    }
    # the running one has run the second the request took: that much less is left of it
    assert 180 * 60 - 5 <= mine["low_s"] <= 180 * 60
    assert 240 * 60 - 5 <= mine["high_s"] <= 240 * 60
    # the moments, to 5 minutes: the earliest rounded down, the latest up
    earliest = dt.datetime.fromisoformat(mine["earliest"])
    latest = dt.datetime.fromisoformat(mine["latest"])
    assert earliest.minute % 5 == 0 == latest.minute % 5 and earliest.second == 0
    assert 0 <= (timezone.now() + dt.timedelta(hours=3) - earliest).total_seconds() <= 300 + 5
    # (the latest may be up to the same 5 s early: the running one's time spent, rounded up to
    # a 5-minute mark the request time had just reached)
    assert -5 <= (latest - timezone.now() - dt.timedelta(hours=4)).total_seconds() <= 300
    assert rows["job-a-second"]["estimate"]["summary"] == "about 2–3 h"


def test_the_schema_states_the_estimate(client: Client, team_a_admin: Any) -> None:
    client.force_login(team_a_admin)
    response = client.get("/api/schema/", headers={"Accept": "application/vnd.oai.openapi+json"})
    schema = json.loads(response.content)["components"]["schemas"]
    assert "estimate" in schema["Waiting"]["required"]
    fields = schema["Estimate"]["properties"]
    assert set(fields) == {"summary", "basis", "low_s", "high_s", "earliest", "latest"}
    assert fields["high_s"]["nullable"] is True


def test_the_home_page_shows_the_estimate_in_each_waiting_item(
    client: Client, team_a_admin: Any, line: None
) -> None:
    client.force_login(team_a_admin)
    written()
    page = client.get("/").content.decode()
    shown = [
        re.sub(r"<[^>]+>", "", p) for p in re.findall(r'<p class="small estimate".*?</p>', page)
    ]
    assert len(shown) == 2
    assert re.fullmatch(
        r"Estimated wait: about 3–4 h \(\d+ \w+, \d\d:\d\d to \d+ \w+, \d\d:\d\d\) — 3rd in line; "
        r"the two ahead and the one running usually run 60–80 min \(5 finished in cq-train\)",
        shown[1],
    ), shown
    assert '<time datetime="' in page  # the browser shows them in its own time zone
    assert "job-b-first" not in page and "job-b-running" not in page


def test_too_little_history_and_a_stopped_queue_say_so(
    client: Client, team_a_admin: Any, line: None
) -> None:
    WorkloadRecord.objects.all().delete()
    history("cq-train", [50, 60])
    client.force_login(team_a_admin)
    written()
    rows = {r["name"]: r["estimate"] for r in client.get("/api/v1/waiting/").json()}
    assert rows["job-mine"] == {
        "summary": "no estimate",
        "basis": "too few finished workloads to go by (2 in cq-train, 2 in namespace team-a; "
        "5 needed)",
        "low_s": None,
        "high_s": None,
        "earliest": None,
        "latest": None,
    }
    ClusterQueue.objects.filter(name="cq-train").update(stop_policy="Hold")
    written()
    rows = {r["name"]: r["estimate"] for r in client.get("/api/v1/waiting/").json()}
    assert rows["job-mine"]["basis"] == (
        "ClusterQueue cq-train is stopped (Hold): it admits nothing until a platform admin "
        "lets it run again"
    )


def test_a_workload_that_can_never_fit_says_why(client: Client, team_a_admin: Any) -> None:
    team_a = team_a_admin.memberships.get().team
    LocalQueueFactory(
        name="team-a-train",
        namespace=NamespaceFactory(name="team-a", team=team_a),
        cluster_queue=gpu_queue("cq-train", "8"),
    )
    workload(
        "team-a",
        "job-huge",
        "team-a-train",
        gpus=12,
        message="couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu "
        "in flavor h100, request > maximum capacity (12 > 8)",
    )
    client.force_login(team_a_admin)
    written()
    (row,) = client.get("/api/v1/waiting/").json()
    assert row["estimate"]["basis"] == (
        "it can never fit because it asks for more nvidia.com/gpu than queue team-a-train can "
        "ever give (at most 8)"
    )


def test_a_pod_waits_for_the_approved_mig_change_that_adds_its_profile(
    client: Client, team_a_admin: Any
) -> None:
    team_a = team_a_admin.memberships.get().team
    NamespaceFactory(name="team-a", team=team_a)
    ObservedNodeFactory(
        name="gpu-a100-03",
        mig_config="all-1g.10gb",
        allocatable={"nvidia.com/mig-1g.10gb": "56"},
    )
    MigChangeRequestFactory(
        team=team_a,
        nodes=["gpu-a100-03"],
        target_config="all-3g.40gb",
        state=MigChangeRequest.State.APPROVED,
        window_start=timezone.now() + dt.timedelta(minutes=42),
    )
    change = MigChangeRequest.objects.get()
    ObservedPodFactory(
        name="train-3g",
        phase="Pending",
        gpu_requests={"nvidia.com/mig-3g.40gb": 1},
        pending_message="0/1 nodes are available: 1 Insufficient nvidia.com/mig-3g.40gb.",
    )
    client.force_login(team_a_admin)
    written()
    (row,) = client.get("/api/v1/waiting/").json()
    assert row["estimate"]["summary"] == f"after MIG change #{change.pk}"
    assert row["estimate"]["basis"] == (
        "the approved change puts gpu-a100-03 on all-3g.40gb, which offers what it asks for, "
        "due to start in about 40 min"
    )
    assert (row["estimate"]["high_s"], row["estimate"]["latest"]) == (None, None)
    assert 41 * 60 < row["estimate"]["low_s"] <= 42 * 60


def test_a_pod_outside_kueue_gets_no_estimate(client: Client, team_a_admin: Any) -> None:
    NamespaceFactory(name="team-a", team=team_a_admin.memberships.get().team)
    ObservedNodeFactory(name="gpu-h100-01", allocatable={GPU: "8"})
    ObservedPodFactory(
        name="plain",
        phase="Pending",
        gpu_requests={GPU: 1},
        pending_message="0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
    )
    client.force_login(team_a_admin)
    written()
    page = client.get("/").content.decode()
    assert (
        'no estimate</span> <span class="muted">— it waits for room on the nodes outside any '
        "Kueue queue, and the portal keeps run times of Kueue workloads only</span>"
    ) in page


def queries(client: Client, path: str) -> int:
    written()
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return len(captured)


def explainer_queries() -> int:
    """The reads of the poll's explanation of what waits (its writes are one statement per
    500 rows whose words changed: a second more of waiting may change one)."""
    with CaptureQueriesContext(connection) as captured:
        written()
    return sum(q["sql"].lstrip().upper().startswith("SELECT") for q in captured.captured_queries)


def test_queries_do_not_grow_with_the_line_or_the_history(
    client: Client, team_a_admin: Any, line: None
) -> None:
    MigChangeRequestFactory(state=MigChangeRequest.State.APPROVED, nodes=["gpu-node-000"])
    ObservedNodeFactory(name="gpu-node-000")
    ObservedPodFactory(name="p-0", phase="Pending", gpu_requests={GPU: 1})
    client.force_login(team_a_admin)
    small = (queries(client, "/api/v1/waiting/"), queries(client, "/"), explainer_queries())
    for index in range(3, 40):
        waiting("team-a", f"job-more-{index}", index)
        ObservedPodFactory(name=f"p-{index}", phase="Pending", gpu_requests={GPU: 1})
    history("cq-train", list(range(30, 330)), start=100)
    history("cq-other", list(range(30, 90)), start=1000)
    large = (queries(client, "/api/v1/waiting/"), queries(client, "/"), explainer_queries())
    assert large == small
    rows = client.get("/api/v1/waiting/").json()
    last = next(r for r in rows if r["name"] == "job-more-39")
    assert last["estimate"]["basis"].startswith("40th in line; the 39 ahead and the one running")


def test_an_admitted_workload_has_no_estimate_its_stuck_pod_says_why(
    client: Client, team_a_admin: Any
) -> None:
    NamespaceFactory(name="team-a", team=team_a_admin.memberships.get().team)
    workload("team-a", "job-placed", "team-a-train", gpus=1, admitted_into="cq-train")
    ObservedPodFactory(
        name="job-placed-pod",
        phase="Pending",
        node_name="gpu-h100-01",
        queue_name="team-a-train",
        workload_name="job-placed",
    )
    client.force_login(team_a_admin)
    written()
    rows = {r["name"]: r for r in client.get("/api/v1/waiting/").json()}
    assert rows["job-placed"]["estimate"] is None
    assert rows["job-placed-pod"]["estimate"]["basis"] == (
        "Kueue admitted its workload job-placed; the nodes hold it, and the portal keeps no "
        "run times of what runs on them"
    )
    assert "Estimated wait:" in client.get("/").content.decode()


def test_a_queue_borrows_what_its_cohort_lends_and_no_more(
    client: Client, team_a_admin: Any
) -> None:
    """cq-train (4 GPUs, cohort training) and cq-infer (8, lending at most 2, 7 in use,
    cohort serving) share the cohort tree gpus: cq-train can hold 5 now, 6 at the most."""
    root = Cohort.objects.create(name="gpus")
    training = Cohort.objects.create(name="training", parent=root)
    serving = Cohort.objects.create(name="serving", parent=root)
    train = gpu_queue("cq-train", "4")
    infer = gpu_queue("cq-infer", "8")
    infer.resource_groups[0]["flavors"][0]["resources"][0]["lendingLimit"] = "2"
    ClusterQueue.objects.filter(pk=train.pk).update(cohort=training)
    ClusterQueue.objects.filter(pk=infer.pk).update(
        cohort=serving, resource_groups=infer.resource_groups
    )
    gpu_queue("cq-elsewhere", "100")  # in no cohort: lends nothing
    NamespaceFactory(name="team-b")
    LocalQueueFactory(
        name="team-a-train",
        namespace=NamespaceFactory(name="team-a", team=team_a_admin.memberships.get().team),
        cluster_queue=train,
    )
    workload("team-b", "job-serving", "online", gpus=7, admitted_into="cq-infer")
    history("cq-train", [50, 60, 70, 80, 90])
    client.force_login(team_a_admin)
    answers = {}
    for gpus in (5, 6, 7):
        ObservedWorkload.objects.filter(namespace="team-a").delete()
        # Kueue has not looked at the one that fits yet (it would admit it)
        message = "" if gpus == 5 else None
        workload("team-a", "job-a", "team-a-train", gpus=gpus, position=0, message=message)
        written()
        (row,) = client.get("/api/v1/waiting/").json()
        answers[gpus] = (row["estimate"]["summary"], row["estimate"]["basis"])
    assert answers[5][0] == "now, once Kueue looks at it"
    assert answers[6] == (
        "no estimate",
        "it waits for quota the other queues of cq-train's cohort use now (to lend it, or to "
        "the workload ahead that needs it), and their run times do not tell when they free it",
    )
    assert answers[7] == (
        "no estimate",
        "it can never fit because it asks for 7 nvidia.com/gpu and cq-train can hold at most 6, "
        "borrowing included",
    )


def test_what_another_member_borrows_is_not_free_and_the_estimate_agrees_with_kueue(
    client: Client, team_a_admin: Any
) -> None:
    """Finding 5: cq-train (12) and cq-dev (0, borrowing) in one cohort with cq-infer (4,
    idle): cq-dev borrows 4, team-a runs 8, so the cohort has 4 free and Kueue keeps
    team-a's 5-GPU workload waiting, "1 more needed". The estimate counted cq-infer's 4
    idle GPUs as cq-train's to borrow without what cq-dev borrows, and said "now"."""
    cohort = Cohort.objects.create(name="ai-platform")
    for name, nominal in (("cq-train", "12"), ("cq-infer", "4"), ("cq-dev", "0")):
        ClusterQueue.objects.filter(pk=gpu_queue(name, nominal).pk).update(cohort=cohort)
    LocalQueueFactory(
        name="team-a-train",
        namespace=NamespaceFactory(name="team-a", team=team_a_admin.memberships.get().team),
        cluster_queue=ClusterQueue.objects.get(name="cq-train"),
    )
    NamespaceFactory(name="team-dev")
    workload("team-dev", "job-dev", "dev-test", gpus=4, admitted_into="cq-dev")
    workload("team-a", "job-run", "team-a-train", gpus=8, admitted_into="cq-train")
    workload("team-a", "job-a", "team-a-train", gpus=5, position=0, message=short_of(1))
    history("cq-train", [50, 60, 70, 80, 90])
    written()
    client.force_login(team_a_admin)
    (row,) = client.get("/api/v1/waiting/").json()
    assert "1 more needed" in row["cause"]
    assert row["estimate"]["summary"] != "now, once Kueue looks at it", row["estimate"]
    assert row["estimate"]["low_s"] > 0, row["estimate"]
