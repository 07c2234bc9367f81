"""The pages with two clusters: the switcher (kept in the session, ``?cluster=`` choosing,
every cluster at once where it makes sense, an unknown name told), Fleet, Queues and the
inboxes filtered by it, a team's home grouped by cluster, each cluster's freshness on every
page, and the admin forms of cluster-scoped objects."""

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

from changes.models import MigChangeRequest, QuotaChangeRequest
from cluster.models import Cluster, ObservedCreateFailure, ObservedObject, SyncRun
from cluster.selectors import cluster_statuses
from cluster.services import settings_cluster
from fleet.models import NodePool
from queues.models import ClusterQueue, LocalQueue
from tenants.models import Namespace
from tests.factories import (
    ClusterQueueFactory,
    LocalQueueFactory,
    MigChangeRequestFactory,
    NamespaceFactory,
    ObservedNodeFactory,
    ObservedPodFactory,
)
from tests.support import written

pytestmark = pytest.mark.django_db

GROUPS = [
    {
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [
            {"name": "h100-80gb", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}
        ],
    }
]


def text(page: str) -> str:
    """The page's words without its tags, spaces collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


@pytest.fixture
def clusters(db: Any) -> tuple[Cluster, Cluster]:
    """The settings' cluster (training) and a second one (inference)."""
    train = settings_cluster()
    infer = Cluster.objects.create(
        name="inference", display_name="Inference", connection="in_cluster"
    )
    return train, infer


@pytest.fixture
def fleets(clusters: tuple[Cluster, Cluster]) -> tuple[Cluster, Cluster]:
    """A pool "gpu" on each cluster (the same name, the same labels), and a pool of its own
    on each; a node "shared-01" on both."""
    train, infer = clusters
    for cluster, own in ((train, "train-only"), (infer, "infer-only")):
        NodePool.objects.create(cluster=cluster, name="gpu", node_selector={"pool": "gpu"})
        NodePool.objects.create(cluster=cluster, name=own, node_selector={"pool": own})
        ObservedNodeFactory(cluster=cluster, name=f"{own}-01", labels={"pool": own})
        ObservedNodeFactory(cluster=cluster, name=f"{cluster.name}-gpu-01", labels={"pool": "gpu"})
        ObservedNodeFactory(cluster=cluster, name="shared-01", labels={"pool": "gpu"})
    return train, infer


def test_one_cluster_shows_no_switcher_and_the_pages_as_before(
    client: Client, platform_admin: Any
) -> None:
    settings_cluster()
    client.force_login(platform_admin)
    for url in ("/fleet/", "/queues/", "/reports/", "/changes/", "/quota/"):
        page = client.get(url).content.decode()
        assert 'id="cluster-switcher"' not in page, url
        assert 'class="cluster-title"' not in page, url


def test_the_switcher_shows_one_clusters_pools_and_remembers_it(
    client: Client, platform_admin: Any, fleets: tuple[Cluster, Cluster]
) -> None:
    client.force_login(platform_admin)
    every = text(client.get("/fleet/").content.decode())
    assert "Pool train-only" in every and "Pool infer-only" in every
    assert "Cluster Inference" in every and every.count("Pool gpu") == 2

    chosen = client.get("/fleet/?cluster=inference").content.decode()
    assert "Pool infer-only" in text(chosen) and "Pool train-only" not in text(chosen)
    assert '<option value="inference" selected>' in chosen
    assert client.session["qm_cluster"] == "inference"
    again = text(client.get("/fleet/").content.decode())  # kept in the session
    assert "Pool infer-only" in again and "Pool train-only" not in again

    client.get("/fleet/?cluster=all")
    assert "Pool train-only" in text(client.get("/fleet/").content.decode())


def test_an_unknown_cluster_is_told_and_changes_nothing(
    client: Client, platform_admin: Any, fleets: tuple[Cluster, Cluster]
) -> None:
    client.force_login(platform_admin)
    client.get("/fleet/?cluster=inference")
    response = client.get("/fleet/?cluster=nope")
    page = response.content.decode()
    assert response.status_code == 200
    assert "There is no cluster named “nope”. Showing Inference." in text(page)
    assert 'aria-invalid="true"' in page
    assert client.session["qm_cluster"] == "inference"
    for url in ("/queues/?cluster=nope", "/changes/?cluster=nope", "/reports/?cluster=nope"):
        assert "There is no cluster named “nope”." in text(client.get(url).content.decode()), url


def test_a_pool_name_two_clusters_share_needs_the_cluster(
    client: Client, platform_admin: Any, fleets: tuple[Cluster, Cluster]
) -> None:
    client.force_login(platform_admin)
    ambiguous = client.get("/fleet/nodes/?pool=gpu")
    assert ambiguous.status_code == 400
    assert "Pool gpu is on the clusters default, inference: choose the cluster." in text(
        ambiguous.content.decode()
    )
    nodes = text(client.get("/fleet/nodes/?pool=gpu&cluster=inference").content.decode())
    assert "inference-gpu-01" in nodes and "shared-01" in nodes
    assert "default-gpu-01" not in nodes
    # every cluster's nodes, each named with its cluster
    client.get("/fleet/?cluster=all")
    both = client.get("/fleet/nodes/?pool=inference/gpu").content.decode()
    assert "inference-gpu-01" in both and "default-gpu-01" not in both
    fleet = client.get("/fleet/nodes/?q=shared").content.decode()
    assert text(fleet).count("shared-01") == 2
    assert "/fleet/nodes/shared-01/?cluster=inference" in fleet


def test_a_node_of_the_same_name_on_two_clusters_is_two_pages(
    client: Client, platform_admin: Any, fleets: tuple[Cluster, Cluster]
) -> None:
    client.force_login(platform_admin)
    ObservedPodFactory(
        cluster=fleets[1], namespace="team-a", name="server-0", node_name="shared-01"
    )
    first = text(client.get("/fleet/nodes/shared-01/").content.decode())
    assert "A node of the cluster Default" in first and "server-0" not in first
    other = text(client.get("/fleet/nodes/shared-01/?cluster=inference").content.decode())
    assert "A node of the cluster Inference" in other and "server-0" in other


def test_a_node_only_another_cluster_has_is_found_whatever_the_chosen_cluster(
    client: Client, platform_admin: Any, fleets: tuple[Cluster, Cluster]
) -> None:
    """The Fleet's drift rows, the workspace and the planner link a node by name alone."""
    client.force_login(platform_admin)
    client.get("/fleet/?cluster=inference")
    page = client.get("/fleet/nodes/train-only-01/")
    assert page.status_code == 200
    assert "A node of the cluster Default" in text(page.content.decode())
    shared = text(client.get("/fleet/nodes/shared-01/").content.decode())
    assert "A node of the cluster Inference; a node of this name is on Default too" in shared
    assert client.get("/fleet/nodes/nowhere-01/").status_code == 404


def queues_on(clusters: tuple[Cluster, Cluster], team_a: Any, team_b: Any) -> None:
    """cq-train on both clusters (8 GPUs on one, 16 on the other); a LocalQueue of team-a on
    each, and one of team-b on the inference cluster."""
    train, infer = clusters
    for cluster, nominal in ((train, 8), (infer, 16)):
        groups = [{**GROUPS[0], "flavors": [{**GROUPS[0]["flavors"][0]}]}]  # type: ignore[dict-item]
        groups[0]["flavors"][0]["resources"] = [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]
        cq = ClusterQueueFactory(cluster=cluster, name="cq-train", resource_groups=groups)
        ns = NamespaceFactory(cluster=cluster, name=f"a-{cluster.name}", team=team_a)
        LocalQueueFactory(namespace=ns, name=f"lq-{cluster.name}", cluster_queue=cq)
    LocalQueueFactory(
        namespace=NamespaceFactory(cluster=infer, name="b-serve", team=team_b),
        name="lq-b",
        cluster_queue=ClusterQueue.objects.get(cluster=infer),
    )


def test_queues_show_each_cluster_as_its_own_section_or_the_chosen_one(
    client: Client, team_a_admin: Any, team_b: Any, clusters: tuple[Cluster, Cluster]
) -> None:
    queues_on(clusters, team_a_admin.memberships.get().team, team_b)
    client.force_login(team_a_admin)
    every = text(client.get("/queues/").content.decode())
    assert "Cluster Default" in every and "Cluster Inference" in every
    assert every.count("ClusterQueue cq-train") == 2
    assert "lq-default" in every and "lq-inference" in every
    assert "lq-b" not in every  # a lead sees their own teams' LocalQueues only
    one = text(client.get("/queues/?cluster=inference").content.decode())
    assert one.count("ClusterQueue cq-train") == 1 and "16" in one
    assert "lq-inference" in one and "lq-default" not in one and "lq-b" not in one


def test_the_inbox_shows_the_chosen_clusters_requests_or_each_with_its_cluster(
    client: Client, approver: Any, clusters: tuple[Cluster, Cluster]
) -> None:
    train, infer = clusters
    MigChangeRequestFactory(cluster=train, nodes=["train-node"])
    MigChangeRequestFactory(cluster=infer, nodes=["infer-node"])
    client.force_login(approver)
    every = client.get("/changes/").content.decode()
    inbox = every[every.index('id="inbox-title"') : every.index("<h2>Requests</h2>")]
    assert "train-node" in inbox and "infer-node" in inbox
    assert '<span class="tag" title="cluster">Inference</span>' in inbox  # as the pages name it
    assert (
        '<th scope="col">Cluster</th>' in every
        and '<td data-label="Cluster">Inference</td>' in every
    )
    one = client.get("/changes/?cluster=inference").content.decode()
    assert "infer-node" in one and "train-node" not in one
    assert '<th scope="col">Cluster</th>' not in one
    assert MigChangeRequest.objects.count() == 2


def test_a_teams_home_groups_its_namespaces_by_cluster(
    client: Client, team_a_admin: Any, team_b: Any, clusters: tuple[Cluster, Cluster]
) -> None:
    train, infer = clusters
    team_a = team_a_admin.memberships.get().team
    queues_on(clusters, team_a, team_b)
    for cluster, used in ((train, 3), (infer, 5)):
        ObservedObject.objects.create(
            cluster=cluster,
            api_version="v1",
            kind="LocalQueue",
            namespace=f"a-{cluster.name}",
            name=f"lq-{cluster.name}",
            status={"admittedWorkloads": used, "pendingWorkloads": 0},
            last_seen=timezone.now(),
        )
        # the same namespace name on both clusters: each one's pods are its own
        NamespaceFactory(cluster=cluster, name="shared", team=team_a)
        ObservedPodFactory(
            cluster=cluster,
            namespace="shared",
            name=f"pod-on-{cluster.name}",
            node_name="n1",
            gpu_requests={"nvidia.com/gpu": 1},
            started_at=timezone.now(),
        )
    client.force_login(team_a_admin)
    page = text(client.get("/").content.decode())
    assert page.index("Cluster Default") < page.index("a-default") < page.index("Cluster Infer")
    assert page.index("Cluster Inference") < page.index("a-inference")
    assert "3 admitted" in page and "5 admitted" in page
    default_part = page[page.index("Cluster Default") : page.index("Cluster Inference")]
    assert "pod-on-default" in default_part and "pod-on-inference" not in default_part
    client.force_login(team_b.memberships.create(user=_user("lead-b"), role="lead").user)
    only_b = text(client.get("/").content.decode())  # a team on one cluster: no section
    assert "Cluster Inference" not in only_b and "b-serve" in only_b


def _user(name: str) -> Any:
    return User.objects.create_user(username=name, password="not-used-here")


def test_the_homes_query_count_with_two_clusters_does_not_grow_with_work(
    client: Client, team_a_admin: Any, team_b: Any, clusters: tuple[Cluster, Cluster]
) -> None:
    queues_on(clusters, team_a_admin.memberships.get().team, team_b)
    client.force_login(team_a_admin)

    def grow(count: int) -> None:
        for cluster in clusters:
            for i in range(count):
                ObservedPodFactory(
                    cluster=cluster,
                    namespace=f"a-{cluster.name}",
                    name=f"p-{cluster.pk}-{i}-{ObservedPodFactory._meta.model.objects.count()}",
                    phase="Pending",
                    pending_message="0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
                )

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/").status_code == 200
        return len(captured)

    grow(1)
    queries()
    small = queries()
    grow(30)
    assert queries() == small


def test_every_page_tells_each_clusters_freshness(
    client: Client, team_a_admin: Any, platform_admin: Any, clusters: tuple[Cluster, Cluster]
) -> None:
    train, infer = clusters
    for cluster in clusters:  # team-a works on both: its lead may see both
        NamespaceFactory(
            name=f"team-a-{cluster.name}", team=team_a_admin.memberships.get().team, cluster=cluster
        )
    now = timezone.now()
    SyncRun.objects.create(cluster=train, started_at=now, finished_at=now)
    SyncRun.objects.create(cluster=infer, started_at=now - dt.timedelta(minutes=9), finished_at=now)
    for minutes in (5, 3):
        SyncRun.objects.create(
            cluster=infer,
            started_at=now - dt.timedelta(minutes=minutes),
            finished_at=now,
            error="connection refused",
        )
    statuses = {s.cluster.name: s for s in cluster_statuses(now=now)}
    assert statuses["default"].ok and statuses["default"].since is None
    assert not statuses["inference"].ok
    assert statuses["inference"].since == now - dt.timedelta(minutes=5)
    assert statuses["inference"].last_ok_at == now - dt.timedelta(minutes=9)
    for user, told_why in ((team_a_admin, False), (platform_admin, True)):
        client.force_login(user)
        for url in ("/", "/fleet/", "/queues/", "/reports/", "/changes/"):
            page = text(client.get(url).content.decode())
            assert "Default fresh" in page, url
            assert "Inference unreachable since" in page, url
            # what answered at the API's address is the platform admins' to read
            assert ("connection refused" in page) is told_why, (url, user)


def test_cluster_statuses_are_two_queries_for_any_number_of_clusters(
    clusters: tuple[Cluster, Cluster], django_assert_num_queries: Any
) -> None:
    for i in range(5):
        cluster = Cluster.objects.create(name=f"c{i}", display_name=f"C{i}", connection="token")
        SyncRun.objects.create(cluster=cluster, started_at=timezone.now())
    with django_assert_num_queries(2):
        assert len(cluster_statuses()) == 7


@pytest.fixture
def superuser(db: Any) -> Any:
    return User.objects.create_superuser("root", password="not-used-here")


def test_the_admin_refuses_a_name_taken_on_the_same_cluster_on_the_name_field(
    client: Client, superuser: Any, team_a: Any, clusters: tuple[Cluster, Cluster]
) -> None:
    train, infer = clusters
    NamespaceFactory(cluster=train, name="ml", team=team_a)
    client.force_login(superuser)
    form = {
        "name": "ml",
        "team": team_a.pk,
        "cluster": train.pk,
        "description": "",
        **{f"{p}-{k}": v for p in ("quota_items", "limit_items") for k, v in MGMT.items()},
    }
    response = client.post("/admin/tenants/namespace/add/", form)
    assert response.status_code == 200
    assert "The cluster default already has a namespace ml." in text(response.content.decode())
    assert Namespace.objects.filter(name="ml").count() == 1
    response = client.post("/admin/tenants/namespace/add/", {**form, "cluster": infer.pk})
    assert response.status_code == 302, text(response.content.decode())[-2000:]
    assert Namespace.objects.filter(name="ml").count() == 2
    # a node pool too, and the form starts at the cluster the pages show
    client.get("/fleet/?cluster=inference")
    add = client.get("/admin/fleet/nodepool/add/").content.decode()
    assert re.search(rf'<option value="{infer.pk}" selected>', add)
    NodePool.objects.create(cluster=infer, name="serve", node_selector={"pool": "serve"})
    refused = client.post(
        "/admin/fleet/nodepool/add/",
        {"name": "serve", "cluster": infer.pk, "node_selector": "{}", "purpose": "serve"},
    )
    assert "The cluster inference already has a node pool serve." in text(refused.content.decode())


MGMT = {"TOTAL_FORMS": "0", "INITIAL_FORMS": "0", "MIN_NUM_FORMS": "0", "MAX_NUM_FORMS": "1000"}


def test_a_local_queue_must_point_at_a_cluster_queue_of_its_namespaces_cluster(
    client: Client, superuser: Any, team_a: Any, clusters: tuple[Cluster, Cluster]
) -> None:
    train, infer = clusters
    ns = NamespaceFactory(cluster=train, name="ml", team=team_a)
    elsewhere = ClusterQueueFactory(cluster=infer, name="cq-serve")
    client.force_login(superuser)
    form = {"name": "lq", "namespace": ns.pk, "cluster_queue": elsewhere.pk, "stop_policy": "None"}
    response = client.post("/admin/queues/localqueue/add/", form)
    assert "ClusterQueue cq-serve is on another cluster than namespace ml" in text(
        response.content.decode()
    )
    assert not LocalQueue.objects.exists()
    here = ClusterQueueFactory(cluster=train, name="cq-serve")
    response = client.post("/admin/queues/localqueue/add/", {**form, "cluster_queue": here.pk})
    assert response.status_code == 302
    assert LocalQueue.objects.get().cluster_queue == here


def test_the_quota_form_names_each_choices_cluster_and_never_mixes_two(
    client: Client, team_a_admin: Any, team_b: Any, clusters: tuple[Cluster, Cluster]
) -> None:
    team_a = team_a_admin.memberships.get().team
    queues_on(clusters, team_a, team_b)
    client.force_login(team_a_admin)
    form = client.get("/quota/new/").content.decode()
    for label in ("a-default (default)", "a-inference (inference)"):
        assert re.search(rf'<option value="\d+">{re.escape(label)}</option>', form), label
    for cluster in ("default", "inference"):
        assert f">cq-train ({cluster})</option>" in form
    here = Namespace.objects.get(name="a-default")
    elsewhere = ClusterQueue.objects.get(cluster=clusters[1])
    asked = {
        "team": team_a.pk,
        "kind": "queue",
        "namespace": here.pk,
        "cluster_queue": elsewhere.pk,
        "flavor": "h100-80gb",
        "resource": "nvidia.com/gpu",
        "requested": "20",
        "reason": "more GPUs",
    }
    for kind in ("queue", "namespace"):
        refused = client.post("/quota/new/", {**asked, "kind": kind})
        assert refused.status_code == 200
        page = refused.content.decode()
        errors = page[page.index('id="id_cluster_queue_error"') :]
        assert (
            "ClusterQueue cq-train is on the cluster inference, namespace a-default on default: "
            "choose both on one cluster." in errors[: errors.index("</div>")]
        ), kind
    assert not QuotaChangeRequest.objects.exists()
    same = client.post("/quota/new/", {**asked, "namespace": ""})  # the queue alone is fine
    assert same.status_code == 302
    assert QuotaChangeRequest.objects.get().cluster == clusters[1]


def test_with_one_cluster_the_quota_form_names_no_cluster(
    client: Client, team_a_admin: Any, team_b: Any
) -> None:
    cluster = settings_cluster()
    NamespaceFactory(cluster=cluster, name="a-serve", team=team_a_admin.memberships.get().team)
    client.force_login(team_a_admin)
    form = client.get("/quota/new/").content.decode()
    assert re.search(r'<option value="\d+">a-serve</option>', form)
    assert "(default)" not in form


def test_a_homes_ask_for_quota_opens_the_form_on_the_namespace_it_is_next_to(
    client: Client, team_a_admin: Any, clusters: tuple[Cluster, Cluster]
) -> None:
    team_a = team_a_admin.memberships.get().team
    refusal = (
        'Error creating: pods "train-2-abcde" is forbidden: exceeded quota: gpu-quota, '
        "requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=12, "
        "limited: requests.nvidia.com/gpu=16"
    )
    for cluster in clusters:  # the same namespace name on both clusters
        NamespaceFactory(cluster=cluster, name="team-a-serve", team=team_a)
    ObservedCreateFailure.objects.create(
        cluster=clusters[1],
        namespace="team-a-serve",
        kind="Job",
        name="train-2",
        message=refusal,
        last_seen=timezone.now(),
    )
    client.force_login(team_a_admin)
    written()
    page = client.get("/").content.decode()
    link = "/quota/new/?team=team-a&amp;namespace=team-a-serve&amp;cluster=inference"
    assert f'href="{link}">Ask for quota</a>' in page
    form = client.get(link.replace("&amp;", "&")).content.decode()
    on_inference = Namespace.objects.get(cluster=clusters[1])
    assert f'<option value="{on_inference.pk}" selected>team-a-serve (inference)</option>' in form
    assert '<option value="namespace" selected>' in form
    # without the cluster the name is two namespaces: none is chosen for you
    unsure = client.get("/quota/new/?team=team-a&namespace=team-a-serve").content.decode()
    assert "selected>team-a-serve" not in unsure


def test_a_lead_is_offered_only_the_clusters_their_teams_are_on(
    client: Client, team_a_admin: Any, approver: Any, platform_admin: Any
) -> None:
    """team-a works on the settings' cluster only: its lead's pages name no other cluster
    (no switcher, no section, no freshness line), and ``?cluster=`` of the other is answered
    as a name no cluster has; approvers and platform admins are offered both."""
    NamespaceFactory(name="team-a-work", team=team_a_admin.memberships.get().team)
    Cluster.objects.create(name="hidden-gpu", display_name="Hidden GPU", connection="in_cluster")
    for url in ("/", "/fleet/", "/queues/"):
        client.force_login(team_a_admin)
        page = client.get(url).content.decode()
        assert "hidden-gpu" not in page and "Hidden GPU" not in page, url
        assert 'id="cluster-switcher"' not in page, url
        for user in (approver, platform_admin) if url != "/" else ():  # their home: no team
            client.force_login(user)
            page = client.get(url).content.decode()
            assert 'value="hidden-gpu"' in page and "Hidden GPU" in page, (url, user)
    client.force_login(team_a_admin)
    for asked in ("hidden-gpu", "no-such-gpu"):
        page = text(client.get(f"/fleet/?cluster={asked}").content.decode())
        assert f"There is no cluster named “{asked}”. Showing Default." in page, asked
    assert client.session.get("qm_cluster", "") == ""
    # A node of the hidden cluster is no node to them; beside one of theirs it goes unnamed.
    hidden = Cluster.objects.get(name="hidden-gpu")
    ObservedNodeFactory(cluster=hidden, name="only-on-hidden")
    ObservedNodeFactory(cluster=hidden, name="gpu-twin")
    ObservedNodeFactory(cluster=Cluster.objects.get(name="default"), name="gpu-twin")
    assert client.get("/fleet/nodes/only-on-hidden/").status_code == 404
    twin = client.get("/fleet/nodes/gpu-twin/").content.decode()
    assert "hidden-gpu" not in twin and "Hidden GPU" not in twin
    client.force_login(platform_admin)
    assert "Hidden GPU" in client.get("/fleet/nodes/gpu-twin/").content.decode()
