"""The Queues page of a cluster of many ClusterQueues: a line per cohort (its subtree's
queues, GPU quota and use, workloads admitted and pending) and one cohort's queues open at
a time (``?cohort=``), a lead still seeing no other team's workload by name, an unknown
cohort answered 404 with the list, and a fixed number of queries; a small cluster keeps
every queue open."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from cluster.models import Cluster, ObservedWorkload
from cluster.scope import settings_cluster
from queues.models import ClusterQueue, Cohort, LocalQueue
from tenants.models import Namespace
from tests.conftest import Snapshot, restore_demo, take_snapshot
from tests.unit.overview.test_queues_page import observe, table_rows, usage, waiting

pytestmark = pytest.mark.django_db

GPU = "nvidia.com/gpu"
MIG_3G = "nvidia.com/mig-3g.40gb"


def groups(*quotas: tuple[str, str, int]) -> list[dict[str, Any]]:
    """One resource group per (flavor, resource, nominal)."""
    return [
        {
            "coveredResources": [resource],
            "flavors": [{"name": flavor, "resources": [{"name": resource, "nominalQuota": n}]}],
        }
        for flavor, resource, n in quotas
    ]


def status(admitted: int, pending: int, *used: tuple[str, str, int]) -> dict[str, Any]:
    usage: dict[str, list[dict[str, str]]] = {}
    for flavor, resource, total in used:
        usage.setdefault(flavor, []).append({"name": resource, "total": str(total)})
    flavors = [{"name": f, "resources": r} for f, r in usage.items()]
    return {
        "admittedWorkloads": admitted,
        "pendingWorkloads": pending,
        "flavorsUsage": flavors,
        "flavorsReservation": flavors,
    }


def research() -> None:
    """Cohort research (a root) with r-a and r-b, research-vision in it with v-a, and solo
    in no cohort (not polled yet); r-a takes team-a's and team-b's LocalQueues."""
    root = Cohort.objects.create(name="research")
    vision = Cohort.objects.create(name="research-vision", parent=root)
    queues = {
        "r-a": (root, groups(("h100-80gb", GPU, 8))),
        "r-b": (root, groups(("h100-80gb", GPU, 4), ("a100-80gb-3g", MIG_3G, 2))),
        "v-a": (vision, groups(("h100-80gb", GPU, 2))),
        "solo": (None, groups(("h100-80gb", GPU, 1))),
    }
    for name, (cohort, quota) in queues.items():
        ClusterQueue.objects.create(name=name, cohort=cohort, resource_groups=quota)
    observe("ClusterQueue", "r-a", status(3, 2, ("h100-80gb", GPU, 6)))
    observe("ClusterQueue", "r-b", status(0, 0))
    observe("ClusterQueue", "v-a", status(1, 5, ("h100-80gb", GPU, 1)))
    r_a = ClusterQueue.objects.get(name="r-a")
    for team in ("team-a", "team-b"):
        namespace = Namespace.objects.get(name=team)
        LocalQueue.objects.create(name=f"{team}-research", namespace=namespace, cluster_queue=r_a)


@pytest.fixture
def many(monkeypatch: pytest.MonkeyPatch, demo: None) -> None:
    """The demo with research's queues, on a page that counts them as many."""
    monkeypatch.setattr("overview.views.ALL_OPEN_UP_TO", 2)
    research()


def get(username: str, url: str, status_code: int = 200) -> str:
    client = Client()
    client.force_login(User.objects.get(username=username))
    response = client.get(url)
    assert response.status_code == status_code, url
    return response.content.decode()


def lines(page: str) -> dict[str, list[str]]:
    """The cohort lines' cells' text, by the first cell."""
    table = page[page.index('aria-label="Cohorts"') :]
    body = table[table.index("<tbody>") : table.index("</tbody>")]
    rows = [
        [
            re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    ]
    return {row[0]: row[1:] for row in rows}


def test_many_queues_show_a_line_per_cohort_and_no_queue_until_one_is_opened(many: None) -> None:
    page = get("lead-a", "/queues/")
    found = lines(page)
    assert found["Cohort research"] == [
        "3",  # its own two and research-vision's
        f"{GPU} 14, 7 in use; {MIG_3G} 2, 0 in use",
        "4",
        "7",
    ]
    assert found["Cohort research-vision in research"] == ["1", f"{GPU} 2, 1 in use", "1", "5"]
    assert found["Not in a cohort"] == ["1", f"{GPU} 1", "—", "—"]  # never polled
    assert "Cohort ai-platform in gpu-fleet" in found
    assert 'id="cluster-queue-' not in page  # no queue drawn
    assert 'class="tree"' not in page  # nor every queue's name in the tree
    assert 'href="?cohort=research#cohort-research"' in page
    assert 'href="?cohort=-#cohort-none"' in page


def test_a_cohort_opens_alone_and_stays_in_the_url(many: None) -> None:
    page = get("lead-a", "/queues/?cohort=research")
    assert re.findall(r'id="cluster-queue-([\w-]+)-title"', page) == ["r-a", "r-b"]
    assert 'href="?cohort=research#cohort-research" aria-current="true"' in page
    assert 'href="?cohort=#cohorts">Close cohort research</a>' in page
    assert lines(page)["Cohort research"][0] == "3"  # the lines stay
    # A cohort that only holds another: its link opens that one.
    fleet = get("lead-a", "/queues/?cohort=gpu-fleet")
    assert 'href="?cohort=ai-platform#cohort-ai-platform">ai-platform</a>, the only' in fleet
    alone = get("lead-a", "/queues/?cohort=-")
    assert re.findall(r'id="cluster-queue-([\w-]+)-title"', alone) == ["solo"]


def test_a_lead_sees_no_other_teams_workload_or_local_queue_in_an_open_cohort(
    many: None,
) -> None:
    waiting("team-b", "job-b-first", "team-b-research", position=0, minutes=5)
    waiting("team-a", "job-a-second", "team-a-research", position=1, minutes=3)
    waiting("team-a", "job-a-elsewhere", "team-a-train", position=0, minutes=3)  # cq-train
    reserved = ObservedWorkload.objects.get(name="job-a-second")
    reserved.pk, reserved.name, reserved.queue_name = None, "job-a-reserved", "gone-lq"
    reserved.cluster_queue, reserved.position = "r-a", 2  # holds quota, admission checks run
    reserved.save()
    lead = get("lead-a", "/queues/?cohort=research")
    line = lead[lead.index('id="cluster-queue-r-a-waiting"') :]
    line = line[: line.index("</div>")]
    assert "another team's workload" in line and "<code>team-a/job-a-second</code>" in line
    assert "3 workloads wait" in line and "<code>team-a/job-a-reserved</code>" in line
    assert "job-a-elsewhere" not in lead  # another cohort's queue, not open
    assert "job-b-first" not in lead and "team-b-research" not in lead
    assert 'href="?cohort=research#cluster-queue-r-a-title"><code>r-a</code>' in lead
    approver = get("approver", "/queues/?cohort=research")
    assert "<code>team-b/job-b-first</code>" in approver
    # Every team's LocalQueues for an approver: those of the open cohort's queues.
    assert "team-b-research" in approver and "team-a-train" not in approver
    assert "Open a cohort to see the LocalQueues" in get("approver", "/queues/")


def test_an_unknown_cohort_is_answered_404_with_the_list(many: None) -> None:
    page = get("lead-a", "/queues/?cohort=nope", 404)
    assert "There is no cohort named <code>nope</code> on this cluster" in page
    assert "Cohort research" in lines(page)
    assert 'id="cluster-queue-' not in page
    research_only = ClusterQueue.objects.filter(cohort=None)
    research_only.update(cohort=Cohort.objects.get(name="research"))
    assert "Every ClusterQueue is in a cohort" in get("lead-a", "/queues/?cohort=-", 404)


def test_a_small_cluster_keeps_every_queue_open(demo: None) -> None:
    research()  # 7 ClusterQueues: few
    page = get("lead-a", "/queues/")
    assert 'aria-label="Cohorts"' not in page and 'class="tree"' in page
    drawn = re.findall(r'id="cluster-queue-([\w-]+)-title"', page)
    assert sorted(drawn) == ["cq-dev", "cq-infer", "cq-train", "r-a", "r-b", "solo", "v-a"]
    # A cohort asked for opens alone there too.
    one = get("lead-a", "/queues/?cohort=research-vision")
    assert re.findall(r'id="cluster-queue-([\w-]+)-title"', one) == ["v-a"]


def grow(size: int, start: int) -> None:
    """``size`` more cohorts under research, three polled queues each, a LocalQueue of
    team-a and team-b in each queue and two workloads waiting in each."""
    parent = Cohort.objects.get(name="research")
    team_a, team_b = (Namespace.objects.get(name=t) for t in ("team-a", "team-b"))
    for index in range(start, start + size):
        cohort = Cohort.objects.create(name=f"grown-{index}", parent=parent)
        for q in range(3):
            name = f"grown-{index}-{q}"
            cq = ClusterQueue.objects.create(
                name=name, cohort=cohort, resource_groups=groups(("h100-80gb", GPU, 2))
            )
            observe("ClusterQueue", name, status(1, 2, ("h100-80gb", GPU, 1)))
            for namespace in (team_a, team_b):
                LocalQueue.objects.create(name=f"{name}-lq", namespace=namespace, cluster_queue=cq)
                waiting(namespace.name, f"{name}-w", f"{name}-lq", position=None, minutes=1)


@pytest.fixture(scope="module")
def grown(demo_snapshot: Snapshot, django_db_blocker: Any) -> tuple[Snapshot, Snapshot]:
    """Research's queues and two grown cohorts on the demo, and 25 more grown cohorts on
    those, as rows: written once for the module (some 500 rows, which each of the six
    query-count tests had written) and put back for each test that asks."""
    with django_db_blocker.unblock(), transaction.atomic():
        restore_demo(demo_snapshot)
        two = take_snapshot(lambda: (research(), grow(2, 0)))
        restore_demo(two)
        more = take_snapshot(lambda: grow(25, 2))
        transaction.set_rollback(True)
    return two, more


@pytest.mark.parametrize("username", ["lead-a", "admin"])
@pytest.mark.parametrize("url", ["/queues/", "/queues/?cohort=research", "/queues/?cohort=grown-0"])
def test_the_cohort_view_takes_the_same_queries_whatever_the_cohorts(
    demo: None,
    grown: tuple[Snapshot, Snapshot],
    monkeypatch: pytest.MonkeyPatch,
    username: str,
    url: str,
) -> None:
    def count() -> int:
        client = Client()
        client.force_login(User.objects.get(username=username))
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    monkeypatch.setattr("overview.views.ALL_OPEN_UP_TO", 2)  # as ``many``
    two, more = grown
    restore_demo(two)  # research() and grow(2, 0)
    small = count()
    restore_demo(more)  # grow(25, 2)
    assert count() == small


def test_with_every_cluster_shown_a_cohort_opens_in_the_clusters_that_have_it(
    many: None,
) -> None:
    """The cluster switcher's choice stays as it is (no cluster is chosen by opening a
    cohort): each shown cluster's section opens the cohort if it has one of that name."""
    other = Cluster.objects.create(name="inference", display_name="Inference", connection="token")
    vision = Cohort.objects.create(name="vision", cluster=other)
    for name in ("w-a", "w-b", "w-c"):
        ClusterQueue.objects.create(
            name=name, cluster=other, cohort=vision, resource_groups=groups(("l4", GPU, 1))
        )
    page = get("approver", "/queues/?cohort=vision")
    assert re.findall(r'id="c\d+-cluster-queue-([\w-]+)-title"', page) == ["w-a", "w-b", "w-c"]
    assert page.count('aria-label="Cohorts of cluster') == 2  # each cluster's lines
    assert (
        "Cohort <strong>research</strong>" in page
    )  # the other cluster's lines, nothing open there
    nowhere = get("approver", "/queues/?cohort=nope", 404)
    assert "There is no cohort named <code>nope</code> in the clusters shown" in nowhere
    chosen = settings_cluster().name
    one = get("approver", f"/queues/?cluster={chosen}&cohort=vision", 404)  # not on that one
    assert "on this cluster" in one


def test_a_queue_drawn_before_is_drawn_anew_when_what_it_shows_moves(many: None) -> None:
    """An open cohort's queues are kept drawn in the process between requests
    (``overview/templatetags/queues_page.py``), under everything they show: a new status, a
    workload in line, a viewer who edits queues each draw the queue anew."""

    def title(page: str) -> str:
        start = page.index('id="cluster-queue-r-a-title"')
        return page[start : page.index("</h3>", start)]

    before = get("approver", "/queues/?cohort=research")
    assert "3 admitted, 2 pending" in title(before) and "Edit quotas" not in title(before)
    assert "cluster-queue-r-a-waiting" not in before
    observe("ClusterQueue", "r-a", status(4, 1, ("h100-80gb", GPU, 7)))
    waiting("team-b", "job-b-first", "team-b-research", position=0, minutes=5)
    after = get("approver", "/queues/?cohort=research")
    assert "4 admitted, 1 pending" in title(after)
    assert table_rows(after, "Quota of ClusterQueue r-a")[0][5] == "7"  # in use
    assert "<code>team-b/job-b-first</code>" in after and "queued 5 min ago" in after
    assert "Edit quotas" in title(get("admin", "/queues/?cohort=research"))
    lead = get("lead-a", "/queues/?cohort=research")  # the same queue, another team's workload
    assert "job-b-first" not in lead and "another team's workload" in lead
    observe("ClusterQueue", "r-a", usage(10, borrowed=2))  # above its nominal 8
    borrowing = get("approver", "/queues/?cohort=research")
    assert '<td data-label="Borrowed"><span class="tag warn">2</span></td>' in borrowing
    assert '<td data-label="Borrow limit">unlimited</td><td data-label="Lend limit">all</td>' in (
        borrowing
    )
