"""The Queues page shows fairness: each queue's weight and Kueue's share where the cluster
reports one, cohort totals (nominal, in use, borrowed, lent), the cohorts as a tree when
they nest, and the first workloads in line per queue (another team's never named), in a
number of queries that does not grow with cohorts, queues or waiting workloads."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.models import ObservedObject, ObservedWorkload
from queues.models import ClusterQueue, Cohort, LocalQueue
from tenants.models import Namespace

pytestmark = pytest.mark.django_db

GPU = "nvidia.com/gpu"


def page_of(username: str) -> str:
    client = Client()
    client.force_login(User.objects.get(username=username))
    response = client.get("/queues/")
    assert response.status_code == 200
    return response.content.decode()


def observe(kind: str, name: str, status: dict[str, Any], namespace: str = "") -> None:
    ObservedObject.objects.update_or_create(
        kind=kind,
        namespace=namespace,
        name=name,
        defaults={
            "api_version": "kueue.x-k8s.io/v1beta2",
            "status": status,
            "last_seen": timezone.now(),
        },
    )


def usage(total: int, borrowed: int = 0, flavor: str = "h100-80gb") -> dict[str, Any]:
    used = [{"name": GPU, "total": str(total), "borrowed": str(borrowed)}]
    return {
        "pendingWorkloads": 0,
        "admittedWorkloads": 1,
        "flavorsUsage": [{"name": flavor, "resources": used}],
        "flavorsReservation": [{"name": flavor, "resources": used}],
    }


def table_rows(page: str, label: str) -> list[list[str]]:
    """The cells' text of each body row of the table labelled ``label``."""
    table = page[page.index(f'aria-label="{label}"') :]
    body = table[table.index("<tbody>") : table.index("</tbody>")]
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def waiting(namespace: str, name: str, queue: str, *, position: int | None, minutes: int) -> None:
    ObservedWorkload.objects.create(
        namespace=namespace,
        name=name,
        queue_name=queue,
        requests={GPU: 4},
        position=position,
        queued_at=timezone.now() - dt.timedelta(minutes=minutes),
        reason="Pending",
        message="couldn't assign flavors to pod set main: insufficient unused quota",
        last_changed=timezone.now(),
    )


def test_weights_shares_totals_and_the_tree_as_the_cluster_reports_them(demo: None) -> None:
    # Fair sharing on: cq-dev borrows 2 H100 GPUs of the 16 its cohort can lend, weight 5.
    observe("ClusterQueue", "cq-train", {**usage(12), "fairSharing": {"weightedShare": 0}})
    observe("ClusterQueue", "cq-infer", {**usage(0), "fairSharing": {"weightedShare": 0}})
    observe("ClusterQueue", "cq-dev", {**usage(2, 2), "fairSharing": {"weightedShare": 25}})
    observe("Cohort", "ai-platform", {"fairSharing": {"weightedShare": 0}})
    observe("Cohort", "gpu-fleet", {"fairSharing": {"weightedShare": 0}})
    page = page_of("lead-a")
    assert 'id="fair-sharing-off"' not in page
    # The tree: gpu-fleet > ai-platform > its three queues.
    tree = page[page.index('<ul class="tree"') : page.index("</section>", page.index("tree"))]
    assert re.search(r"gpu-fleet.*<ul>.*ai-platform.*<ul>.*cq-dev.*cq-infer.*cq-train", tree, re.S)
    assert re.search(r"cq-dev</code></a> <span[^>]*>weight 5</span> <span[^>]*>share 25<", tree)
    assert 'Cohort ai-platform <span class="small muted">in gpu-fleet</span>' in page
    assert "its totals are those of cohort" in page  # gpu-fleet adds nothing of its own
    dev = page[page.index('id="cluster-queue-cq-dev-title"') :]
    assert re.match(
        r'[^>]*>ClusterQueue <code>cq-dev</code>\s*<span class="tag"[^>]*>weight 5</span> <span class="tag warn"[^>]*>share 25</span>',
        dev,
    )
    train = page[page.index('id="cluster-queue-cq-train-title"') :]
    assert 'weight 80</span> <span class="tag ok"' in train[:400]
    # ai-platform's H100 totals: 16 nominal (12 + 4 + 0), 14 in use, 2 borrowed, 4 lent (cq-infer's idle 4)
    assert table_rows(page, "Totals of cohort ai-platform")[3] == [
        "h100-80gb",
        "nvidia.com/gpu",
        "16",
        "14",
        "2",
        "4",
    ]
    assert table_rows(page, "Quota of ClusterQueue cq-dev")[3] == [
        "h100-80gb",
        "nvidia.com/gpu",
        "0",
        "10",
        "all",
        "2",
        "2",
        "2",
        "0",
    ]


def test_without_fair_sharing_the_page_says_weights_do_not_count(demo: None, settings: Any) -> None:
    observe("ClusterQueue", "cq-train", usage(12))
    page = page_of("admin")
    assert 'id="fair-sharing-off"' in page and "weights do not count" in page
    assert "share " not in re.sub(r"<[^>]+>", "", page[page.index("cq-train-title") :])[:200]
    settings.QM_QUEUE_BACKEND = "volcano"  # Volcano has no such status: nothing to explain
    assert 'id="fair-sharing-off"' not in page_of("admin")


def test_a_queue_of_weight_0_that_borrows_has_an_infinite_share(demo: None) -> None:
    observe("ClusterQueue", "cq-dev", {**usage(2, 2), "fairSharing": {"weightedShare": 2**63 - 1}})
    dev = page_of("lead-a")
    dev = dev[dev.index('id="cluster-queue-cq-dev-title"') :]
    assert "share ∞ (weight 0, borrowing)" in dev[:600]


def test_the_first_in_line_per_queue_and_another_teams_workload_unnamed(demo: None) -> None:
    observe("ClusterQueue", "cq-train", {**usage(12), "pendingWorkloads": 5})
    # team-a and team-b share cq-train; the visibility API's order first, then the oldest.
    waiting("team-b", "job-b-first", "team-b-train", position=0, minutes=5)
    waiting("team-a", "job-a-second", "team-a-train", position=1, minutes=50)
    waiting("team-a", "job-a-no-place", "team-a-train", position=None, minutes=90)
    waiting("team-a", "job-a-fourth", "team-a-train", position=None, minutes=10)
    waiting("team-b", "job-b-last", "team-b-train", position=None, minutes=1)
    waiting("team-a", "job-nowhere", "no-such-queue", position=None, minutes=1)
    ObservedWorkload.objects.create(
        namespace="team-a",
        name="job-admitted",
        queue_name="team-a-train",
        admitted=True,
        cluster_queue="cq-train",
        last_changed=timezone.now(),
    )
    lead = page_of("lead-a")
    line = lead[lead.index('id="cluster-queue-cq-train-waiting"') :]
    line = line[: line.index("</div>")]
    assert "5 workloads wait</strong>; the first 3 in line:" in line
    items = re.findall(r"<li>(.*?)</li>", line, re.S)
    assert len(items) == 3
    assert "another team's workload" in items[0] and "job-b-first" not in lead
    assert (
        "<code>team-a/job-a-second</code>" in items[1]
        and "4 <code>nvidia.com/gpu</code>" in items[1]
    )
    assert "<code>team-a/job-a-no-place</code>" in items[2] and "queued 1 h 30 min ago" in items[2]
    assert "insufficient unused quota" in items[1]
    assert "job-a-fourth" not in lead and "job-admitted" not in lead and "job-nowhere" not in lead
    approver = page_of("approver")
    assert "<code>team-b/job-b-first</code>" in approver  # approvers see every team's
    # Each LocalQueue's own counts, as Kueue reports them; a dash before the first poll.
    observe("LocalQueue", "team-a-train", {"admittedWorkloads": 1, "pendingWorkloads": 3}, "team-a")
    rows = {r[2]: r[5:] for r in table_rows(page_of("approver"), "LocalQueues")}
    assert (rows["team-a-train"], rows["team-b-train"]) == (["1", "3"], ["—", "—"])


def grow(size: int, start: int) -> None:
    """``size`` more cohorts, each nested in the one before, each with a ClusterQueue seen
    by the poll (fair sharing on), a LocalQueue in team-a and four workloads waiting."""
    parent = Cohort.objects.filter(name=f"grown-cohort-{start - 1}").first()
    parent = parent or Cohort.objects.get(name="ai-platform")
    team_a = Namespace.objects.get(name="team-a")
    for index in range(start, start + size):
        cohort = Cohort.objects.create(name=f"grown-cohort-{index}", parent=parent)
        groups = [
            {
                "coveredResources": [GPU],
                "flavors": [
                    {"name": "h100-80gb", "resources": [{"name": GPU, "nominalQuota": "4"}]}
                ],
            }
        ]
        cq = ClusterQueue.objects.create(
            name=f"grown-cq-{index}", cohort=cohort, resource_groups=groups
        )
        LocalQueue.objects.create(name=f"grown-lq-{index}", namespace=team_a, cluster_queue=cq)
        observe("ClusterQueue", cq.name, {**usage(4), "fairSharing": {"weightedShare": index}})
        observe("Cohort", cohort.name, {"fairSharing": {"weightedShare": 0}})
        for n in range(4):
            waiting("team-a", f"grown-{index}-{n}", f"grown-lq-{index}", position=n, minutes=n)
        parent = cohort


def queries(username: str, shows: str) -> int:
    client = Client()
    client.force_login(User.objects.get(username=username))
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/queues/")
    assert shows in response.content.decode()
    return len(captured)


@pytest.mark.parametrize("username", ["lead-a", "admin"])
def test_the_query_count_does_not_grow_with_cohorts_queues_or_waiting_workloads(
    demo: None, username: str
) -> None:
    grow(2, 0)
    small = queries(username, "grown-1-2")
    grow(30, 2)
    large = queries(username, "grown-31-2")
    assert large == small, (small, large)
    page = page_of(username)
    assert "grown-31-3" not in page  # the fourth in line is counted, not named
    assert "grown-cohort-0 \u203a grown-cohort-1" in page  # the path of a deeply nested one


def test_the_queues_page_says_kueues_words_not_its_codes(client: Client, demo: None) -> None:
    """An unset borrowing limit is unlimited in Kueue (the page said "none"), and a stop
    policy reads as what it does (the page said "None")."""
    client.force_login(User.objects.get(username="admin"))
    page = client.get("/queues/").content.decode()
    assert '<td data-label="Borrow limit">unlimited</td>' in page
    assert '<td data-label="Borrow limit">none</td>' not in page
    assert '<td data-label="Stop policy">None (admitting)</td>' in page
    assert '<td data-label="Stop policy">None</td>' not in page
    edit = client.get("/queues/cluster-queues/cq-train/edit/").content.decode()
    assert '<option value="None" selected>None (admitting)</option>' in edit


def test_a_lead_reads_only_their_own_teams_among_those_a_priority_class_allows(
    demo: None,
) -> None:
    """Another team's name never reaches a lead: the catalog says how many other teams a
    class allows, not which; platform admins and approvers read every team."""
    from tenants.models import PriorityClass, Team

    pc = PriorityClass.objects.order_by("-value").first()
    assert pc is not None
    for slug in ("team-a", "team-b"):
        Team.objects.get(slug=slug).allowed_priority_classes.add(pc)

    def teams_cell(page: str) -> str:
        catalog = page[page.index('id="pc-title"') :]
        row = catalog[catalog.index(f"<code>{pc.name}</code>") :]
        row = row[: row.index("</tr>")]  # from the name's cell on
        return re.findall(r"<td[^>]*>(.*?)</td>", row)[2]

    lead = teams_cell(page_of("lead-a"))
    assert "team-a" in lead and "team-b" not in lead
    others = pc.teams.exclude(slug="team-a").count()
    assert f"and {others} other team" in lead
    approver = teams_cell(page_of("approver"))
    assert "team-a" in approver and "team-b" in approver and "other team" not in approver
