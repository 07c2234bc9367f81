"""A team lead's home: what runs (new since the last visit marked), each queue's use, one card
per problem, and every number from the same observation, in a fixed number of queries."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from changes.models import MigChangeRequest
from cluster.models import ObservedCreateFailure, ObservedObject, ObservedWorkload, SyncRun
from overview.models import HomeVisit
from tenants.models import QuotaItem
from tests.factories import (
    ClusterQueueFactory,
    LocalQueueFactory,
    MigChangeRequestFactory,
    NamespaceFactory,
    ObservedPodFactory,
)
from tests.support import written

pytestmark = pytest.mark.django_db

REFUSAL = (
    'Error creating: pods "train-2-abcde" is forbidden: exceeded quota: team-a-gpu-quota, '
    "requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=12, "
    "limited: requests.nvidia.com/gpu=16"
)
GROUPS = [
    {
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [
            {"name": "h100-80gb", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}
        ],
    }
]


def observed(kind: str, name: str, status: dict[str, Any], namespace: str = "") -> None:
    ObservedObject.objects.create(
        api_version="v1",
        kind=kind,
        namespace=namespace,
        name=name,
        status=status,
        last_seen=timezone.now(),
    )


def running(name: str, node: str, gpus: dict[str, int], ago: dt.timedelta, **more: Any) -> None:
    """A running GPU pod of team-a that started ``ago``."""
    ObservedPodFactory(
        namespace="team-a",
        name=name,
        node_name=node,
        gpu_requests=gpus,
        started_at=timezone.now() - ago,
        **more,
    )


def pending(name: str, **more: Any) -> None:
    """A Pending pod of team-a that no node can take."""
    ObservedPodFactory(
        namespace="team-a",
        name=name,
        phase="Pending",
        pending_message="0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
        **more,
    )


def card_of(page: str, marker: str) -> str:
    """The list item (one card) that starts at ``marker``."""
    card = page[page.index(marker) :]
    return card[: card.index("</li>")]


def workload(name: str, ago: dt.timedelta, gpus: int) -> None:
    """An admitted workload of team-a in the queue team-a-train."""
    ObservedWorkload.objects.create(
        namespace="team-a",
        name=name,
        queue_name="team-a-train",
        admitted=True,
        admitted_at=timezone.now() - ago,
        requests={"nvidia.com/gpu": gpus, "cpu": 8},
        last_changed=timezone.now(),
    )


def text(page: str) -> str:
    """The page's words without its tags, spaces collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


@pytest.fixture
def lead(client: Client, team_a_admin: Any, team_b: Any) -> Any:
    team_a = team_a_admin.memberships.get().team
    NamespaceFactory(name="team-a", team=team_a)
    NamespaceFactory(name="team-b", team=team_b)
    client.force_login(team_a_admin)
    return team_a_admin


def test_the_home_lists_running_gpu_work_with_what_it_holds_since_when_and_where(
    client: Client, lead: Any
) -> None:
    workload("job-train-1", dt.timedelta(hours=2, minutes=5), gpus=4)
    for i, node in enumerate(["gpu-h100-01", "gpu-h100-02"]):
        gpus = {"nvidia.com/gpu": 2}
        running(f"train-1-{i}", node, gpus, dt.timedelta(hours=2), workload_name="job-train-1")
    running("notebook", "gpu-a100-03", {"nvidia.com/mig-3g.40gb": 1}, dt.timedelta(minutes=12))
    ObservedPodFactory(namespace="team-a", name="cpu-only", node_name="cpu-01")
    ObservedPodFactory(
        namespace="team-b", name="secret-run", gpu_requests={"nvidia.com/gpu": 1}, node_name="x"
    )
    page = text(client.get("/").content.decode())
    assert "Running GPU work" in page
    assert (
        "Pod notebook : 1 MIG 3g.40gb slice, since " in page
        and "(12 min ago) on gpu-a100-03" in page
    )
    assert "Workload job-train-1 : 4 GPUs in team-a-train" in page
    assert "(2 h 5 min ago) on gpu-h100-01 , gpu-h100-02 (2 pods running)" in page
    # newest first; no CPU-only pod, nothing of another team
    assert page.index("notebook") < page.index("job-train-1")
    assert "cpu-only" not in page and "secret-run" not in page
    # the pods of the admitted workload are told on its line, not once more each
    assert "train-1-0" not in page


def test_work_that_started_since_the_last_visit_is_marked_new_once(
    client: Client, lead: Any
) -> None:
    now = timezone.now()
    running("old-run", "n1", {"nvidia.com/gpu": 1}, dt.timedelta(hours=3))
    running("fixed-run", "n2", {"nvidia.com/mig-3g.40gb": 1}, dt.timedelta(minutes=5))
    # the first visit marks nothing (nothing was seen before) and remembers this one
    first = client.get("/").content.decode()
    assert 'title="It started after your last visit"' not in first
    assert "Your last visit" not in first
    seen = HomeVisit.objects.get(user=lead).seen_at
    assert now <= seen <= timezone.now()

    # an hour ago was the last visit: the pod that started since is new, the old one not
    HomeVisit.objects.filter(user=lead).update(seen_at=now - dt.timedelta(hours=1))
    page = client.get("/").content.decode()
    marked = re.findall(r'started after your last visit">new</span> Pod <code>([^<]+)</code>', page)
    assert marked == ["fixed-run"]
    assert "Your last visit showed the cluster as of <time" in page
    # and only once: the visit moved the mark forward
    assert 'title="It started after your last visit"' not in client.get("/").content.decode()


def test_a_visit_is_recorded_as_of_the_poll_the_page_showed_and_never_moved_back(
    client: Client, lead: Any
) -> None:
    """While the API is unreachable the page shows the last good poll: work the cluster
    starts meanwhile is new on the first visit after it is back."""
    now = timezone.now()
    good = now - dt.timedelta(minutes=10)
    SyncRun.objects.create(started_at=good, finished_at=good + dt.timedelta(seconds=1))
    SyncRun.objects.create(started_at=now - dt.timedelta(minutes=1), error="connection refused")
    assert client.get("/").status_code == 200
    assert HomeVisit.objects.get(user=lead).seen_at == good
    # a visit recorded later (another tab, after the API came back) is not moved back
    later = now - dt.timedelta(seconds=5)
    HomeVisit.objects.filter(user=lead).update(seen_at=later)
    assert client.get("/").status_code == 200
    assert HomeVisit.objects.get(user=lead).seen_at == later


def test_a_job_that_cannot_create_pods_and_its_pending_pod_are_one_card_counted_from_the_last_poll(
    client: Client, lead: Any
) -> None:
    now = timezone.now()
    team_a = NamespaceFactory._meta.model.objects.get(name="team-a")
    QuotaItem.objects.create(namespace=team_a, resource="requests.nvidia.com/gpu", hard="16")
    observed(
        "ResourceQuota",
        "team-a-gpu-quota",
        {"hard": {"requests.nvidia.com/gpu": "16"}, "used": {"requests.nvidia.com/gpu": "24"}},
        namespace="team-a",
    )
    ObservedCreateFailure.objects.create(
        namespace="team-a", kind="Job", name="train-2", message=REFUSAL, count=7, last_seen=now
    )
    pending(
        "train-2-xyz12",
        owner_kind="Job",
        owner_name="train-2",
        gpu_requests={"nvidia.com/gpu": 4},
    )
    pending(
        "other-pending",
        owner_kind="Job",
        owner_name="another-job",
    )
    written()
    page = client.get("/").content.decode()
    card = card_of(page, 'id="create-failure-')
    assert "Its pod <code>train-2-xyz12</code> was created and waits too" in card
    assert "5 Insufficient nvidia.com/gpu" in card
    # one card: the Job's pod is not a second one under Pending pods
    assert page.count("train-2-xyz12") == 1
    assert 'id="pending-pod-' in page and "other-pending" in page
    # the sentence counts what the bar counts (the poll's 24 of 16), not the event's 12
    assert "16 requests.nvidia.com/gpu in team-a, 24 are in use" in card
    assert "24 of 16" in page
    assert "12 are in use" not in page
    assert "used: requests.nvidia.com/gpu=12" in card  # the cluster's words, as it said them


def test_an_admitted_workloads_stuck_pod_is_told_on_the_workloads_card(
    client: Client, lead: Any
) -> None:
    workload("job-llm", dt.timedelta(minutes=20), gpus=8)
    pending(
        "job-llm-pod-0",
        workload_name="job-llm",
        queue_name="team-a-train",
    )
    written()
    page = client.get("/").content.decode()
    card = card_of(page, 'id="workload-')
    assert "but its pod job-llm-pod-0 does not run" in card
    assert 'id="pending-pod-' not in page  # not a second card
    assert "Running GPU work" not in page  # admitted, but nothing of it runs


def test_each_local_queue_shows_its_workloads_and_its_cluster_queues_use_and_borrowing(
    client: Client, lead: Any
) -> None:
    team_a = NamespaceFactory._meta.model.objects.get(name="team-a")
    cq = ClusterQueueFactory(name="team-a-cq", resource_groups=GROUPS)
    LocalQueueFactory(name="team-a-train", namespace=team_a, cluster_queue=cq)
    LocalQueueFactory(name="team-a-new", namespace=team_a, cluster_queue=cq)
    observed(
        "LocalQueue",
        "team-a-train",
        {"admittedWorkloads": 3, "pendingWorkloads": 1200},
        namespace="team-a",
    )
    observed(
        "ClusterQueue",
        "team-a-cq",
        {
            "flavorsUsage": [
                {
                    "name": "h100-80gb",
                    "resources": [{"name": "nvidia.com/gpu", "total": "12", "borrowed": "4"}],
                }
            ]
        },
    )
    page = client.get("/").content.decode()
    words = text(page)
    assert "3 admitted, 1,200 pending" in words
    assert "ClusterQueue uses 12 of 8 nvidia.com/gpu (h100-80gb) borrows 4" in words
    assert 'aria-label="12 of 8 nvidia.com/gpu used"' in page
    assert "not polled yet" in words  # team-a-new has no status yet


def grow(size: int, start: int) -> None:
    now = timezone.now()
    for i in range(start, start + size):
        workload(f"wl-{i}", dt.timedelta(0), gpus=1)
        running(
            f"wl-{i}-pod", f"n-{i}", {"nvidia.com/gpu": 1}, dt.timedelta(0), workload_name=f"wl-{i}"
        )
        running(f"run-{i}", f"n-{i}", {"nvidia.com/gpu": 1}, dt.timedelta(0))
        ObservedCreateFailure.objects.create(
            namespace="team-a", kind="Job", name=f"job-{i}", message=REFUSAL, last_seen=now
        )
        ObservedPodFactory(
            namespace="team-a",
            name=f"job-{i}-pod",
            phase="Pending",
            owner_kind="Job",
            owner_name=f"job-{i}",
            pending_message="0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
        )
        waiting_workload(f"waits-{i}")
        pending(f"sweep-{i}", gpu_requests={"nvidia.com/gpu": 1})


def test_the_homes_query_count_does_not_grow_with_running_and_waiting_work(
    client: Client, lead: Any
) -> None:
    team_a = NamespaceFactory._meta.model.objects.get(name="team-a")
    LocalQueueFactory(name="q", namespace=team_a, cluster_queue=ClusterQueueFactory(name="cq"))

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/").status_code == 200
        return len(captured)

    grow(1, 0)
    written()
    queries()  # the explainer builds its view of the fleet once, then checks it is current
    small = queries()
    grow(40, 1)
    written()
    large = queries()
    assert large == small <= 10, (small, large)
    assert client.get("/").content.decode().count("Running GPU work") == 1


def test_the_changes_of_other_teams_that_hit_the_team_are_told_while_open_and_three_days_after(
    client: Client, lead: Any, team_b: Any
) -> None:
    team_a = lead.memberships.get().team
    evicting = {"verdict": "needs_drain", "evictions": [{"team": "team-a"}, {"team": "team-a"}]}

    def change(state: str, team: Any = team_b, ago: dt.timedelta = dt.timedelta(0)) -> Any:
        made = MigChangeRequestFactory(team=team, state=state, assessment=evicting)
        made.teams_hit.add(team_a)
        MigChangeRequest.objects.filter(pk=made.pk).update(updated_at=timezone.now() - ago)
        return made

    assert "Changes that hit this team" not in client.get("/").content.decode()
    change("rejected")
    change("cancelled")
    change("succeeded", ago=dt.timedelta(days=4))
    change("pending", team=team_a)  # its own
    assert "Changes that hit this team" not in client.get("/").content.decode()
    open_one = change("pending")
    ran = change("succeeded", ago=dt.timedelta(days=2))
    page = text(client.get("/").content.decode())
    told = page[page.index("Changes that hit this team") :]
    assert told.index(f"#{ran.pk} of team-b") < told.index(f"#{open_one.pk} of team-b")  # newest
    assert "(succeeded): evicted 2 pods of yours" in told
    assert "(pending approval): would evict 2 pods of yours" in told
    assert page.count(" of team-b on ") == 2


def test_namespaces_on_several_clusters_are_read_together_each_on_its_own_cluster(
    client: Client, lead: Any, team_b: Any, settings: Any
) -> None:
    """The home reads what it shows of every cluster in one round trip: the same number of
    queries with one cluster or three, and each namespace shows its own cluster's rows only
    (another team has a namespace of the same name on a third cluster)."""
    from cluster.models import Cluster

    team_a = lead.memberships.get().team

    def waiting_on(cluster: Any, suffix: str) -> None:
        on = {"cluster": cluster} if cluster is not None else {}
        ObservedPodFactory(
            namespace="team-a",
            name=f"pod-{suffix}",
            phase="Pending",
            pending_message="0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
            **on,
        )
        ObservedCreateFailure.objects.create(
            namespace="team-a",
            kind="Job",
            name=f"job-{suffix}",
            message=REFUSAL,
            last_seen=timezone.now(),
            **on,
        )

    def queries() -> tuple[int, str]:
        with CaptureQueriesContext(connection) as captured:
            page = client.get("/").content.decode()
        return len(captured), page

    waiting_on(None, "default")
    queries()  # the explainer builds its view of the fleet once
    one, _ = queries()
    infer, spare = (
        Cluster.objects.create(name=name, display_name=name, connection="token")
        for name in ("infer", "spare")
    )
    NamespaceFactory(name="team-a", team=team_a, cluster=infer)
    NamespaceFactory(name="team-a", team=team_b, cluster=spare)
    waiting_on(infer, "infer")
    waiting_on(spare, "spare")
    queries()  # and its view of the new cluster's fleet, once
    three, page = queries()
    assert three == one, (one, three)
    assert "pod-default" in page and "pod-infer" in page and "job-infer" in page
    assert "pod-spare" not in page and "job-spare" not in page  # team-b's, on its cluster


def test_pending_pods_that_wait_alike_are_one_card_naming_them(client: Client, lead: Any) -> None:
    """Twenty-three pods the scheduler refuses for one reason are one card (twenty names, the
    rest counted); a pod that waits for another reason has a card of its own."""
    for index in range(23):
        pending(f"sweep-{index:02d}", gpu_requests={"nvidia.com/gpu": 1})
    ObservedPodFactory(
        namespace="team-a",
        name="odd-one",
        phase="Pending",
        pending_message="0/5 nodes are available: 5 node(s) didn't match Pod's node affinity.",
    )
    written()
    page = client.get("/").content.decode()
    assert page.count('id="pending-pod-') == 2
    first = card_of(page, 'id="pending-pod-')
    second = card_of(page[page.index(first) + len(first) :], 'id="pending-pod-')
    odd, alike = (first, second) if "odd-one" in first else (second, first)
    assert "23 pods wait for the same reason:" in alike
    assert "sweep-00" in alike and "sweep-19" in alike and "sweep-20" not in alike
    assert "and 3 more" in alike
    assert alike.count('class="why-box"') == 1 and "Insufficient nvidia.com/gpu" in alike
    assert "odd-one" not in alike
    assert "odd-one" in odd and "same reason" not in odd and "node affinity" in odd


def test_a_namespaces_tables_are_drawn_again_when_what_they_show_moves(
    client: Client, lead: Any
) -> None:
    """The quota and limits tables are kept per process under what they show: the next poll's
    use, a new hard limit or a new default is on the next page, never the kept drawing."""
    from tenants.models import LimitRangeItem

    team_a = NamespaceFactory._meta.model.objects.get(name="team-a")
    item = QuotaItem.objects.create(namespace=team_a, resource="requests.nvidia.com/gpu", hard="16")
    limit = LimitRangeItem.objects.create(namespace=team_a, resource="memory", default="8Gi")

    def quota_used(used: str) -> None:
        ObservedObject.objects.update_or_create(
            kind="ResourceQuota",
            namespace="team-a",
            name="team-a-gpu-quota",
            defaults={
                "api_version": "v1",
                "status": {"used": {"requests.nvidia.com/gpu": used}},
                "last_seen": timezone.now(),
            },
        )

    quota_used("4")
    first = text(client.get("/").content.decode())
    assert "4 of 16" in first and "8 GiB" in first
    assert text(client.get("/").content.decode()).count("4 of 16") == first.count("4 of 16")
    quota_used("6")
    assert "6 of 16" in text(client.get("/").content.decode())
    QuotaItem.objects.filter(pk=item.pk).update(hard="32")
    LimitRangeItem.objects.filter(pk=limit.pk).update(default="16Gi")
    page = text(client.get("/").content.decode())
    assert "6 of 32" in page and "16 GiB" in page and "4 of 16" not in page


def test_the_pending_pods_are_drawn_again_when_a_pod_or_its_reason_moves(
    client: Client, lead: Any
) -> None:
    """The pending pods' cards are kept per process under the pods and what each card says:
    a new pod, or a pod that now waits for another reason, is on the next page."""
    from cluster.models import ObservedPod

    pending("sweep-0", gpu_requests={"nvidia.com/gpu": 1})
    written()
    assert "sweep-0" in client.get("/").content.decode()
    pending("sweep-1", gpu_requests={"nvidia.com/gpu": 1})
    written()
    page = client.get("/").content.decode()
    assert "2 pods wait for the same reason:" in page and "sweep-1" in page
    ObservedPod.objects.filter(name="sweep-1").update(
        pending_message="0/5 nodes are available: 5 node(s) didn't match Pod's node affinity."
    )
    written()
    page = client.get("/").content.decode()
    assert "same reason" not in page and page.count('id="pending-pod-') == 2
    assert "node affinity" in page


def test_each_team_shows_its_priority_classes_highest_first_drawn_again_when_one_moves(
    client: Client, lead: Any
) -> None:
    from tenants.models import PriorityClass

    team_a = lead.memberships.get().team
    assert "Priority classes allowed: none (the cluster default applies)" in text(
        client.get("/").content.decode()
    )
    low = PriorityClass.objects.create(name="batch-low", value=1000)
    high = PriorityClass.objects.create(name="train-high", value=100000)
    team_a.allowed_priority_classes.set([low, high])
    page = text(client.get("/").content.decode())
    assert "Priority classes allowed: train-high (100,000), batch-low (1,000)" in page
    PriorityClass.objects.filter(pk=low.pk).update(value=2000)  # the same order, a new value
    page = text(client.get("/").content.decode())
    assert "Priority classes allowed: train-high (100,000), batch-low (2,000)" in page


def test_the_running_work_and_the_waiting_workloads_are_drawn_again_when_they_move(
    client: Client, lead: Any
) -> None:
    """Both lists are kept per process under what they show: work that starts, an older
    start, and another workload waiting are on the next page."""
    from cluster.models import ObservedPod

    running("notebook", "gpu-a100-03", {"nvidia.com/gpu": 1}, dt.timedelta(minutes=12))
    waiting_workload("job-a")
    written()
    page = text(client.get("/").content.decode())
    assert "(12 min ago) on gpu-a100-03" in page and "job-a" in page
    ObservedPod.objects.filter(name="notebook").update(
        started_at=timezone.now() - dt.timedelta(minutes=30)
    )
    running("sweep", "gpu-a100-04", {"nvidia.com/gpu": 2}, dt.timedelta(minutes=3))
    waiting_workload("job-b")
    written()
    page = text(client.get("/").content.decode())
    assert "(30 min ago) on gpu-a100-03" in page and "12 min ago" not in page
    assert "Pod sweep : 2 GPUs" in page and "job-a" in page and "job-b" in page


def waiting_workload(name: str, message: str = "") -> None:
    """A workload of team-a that waits in the queue team-a-train (evicted once)."""
    now = timezone.now()
    ObservedWorkload.objects.create(
        namespace="team-a",
        name=name,
        queue_name="team-a-train",
        message=message,
        evictions=1,
        evicted_reason="PodsReadyTimeout",
        evicted_at=now - dt.timedelta(seconds=20),
        created_at=now - dt.timedelta(hours=1),
        last_changed=now,
    )


def test_a_waiting_workloads_card_drawn_for_who_sees_every_team_is_not_shown_to_a_lead(
    client: Client, lead: Any, platform_admin: Any
) -> None:
    """The cards are kept under what they say as redacted for the viewer: a platform admin of
    the same team reads another team's pod named, its lead on the next request does not."""
    from tests.factories import MembershipFactory

    MembershipFactory(user=platform_admin, team=lead.memberships.get().team, role="member")
    waiting_workload("job-a", "Exceeded the PodsReady timeout team-b/job-of-b")
    written()
    admin = Client()
    admin.force_login(platform_admin)
    assert "team-b/job-of-b" in admin.get("/").content.decode()
    page = client.get("/").content.decode()
    assert "job-a" in page and "job-of-b" not in page
    assert "another team&#x27;s pod" in page
