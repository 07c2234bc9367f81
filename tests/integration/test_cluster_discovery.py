"""Discovery and the connection test against the demo cluster: serving Kueue v1beta2 and
v1beta1 (its default), v1beta2 only (Kueue 0.20), v1beta1 only (before 0.16), Volcano
without Kueue, or neither. Each poll records what the cluster serves on its Cluster row, the
portal renders the objects that cluster takes (they apply), and the Clusters page says it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.test import Client

import devcluster
from cluster.connection import check_connection, gateway_for
from cluster.models import AppliedObject, Cluster, Drift, ObservedObject, SyncRun
from cluster.services import save_cluster, settings_cluster
from devcluster import Served
from devcluster.__main__ import kubeconfig
from kube import Gateway, connect
from loop.apply import apply_desired_state
from loop.desired import collect_manifests
from loop.poll import poll_cluster
from queues.models import ClusterQueue, LocalQueue, ResourceFlavor
from tenants.models import Namespace, QuotaItem, Team
from tests.deploy.conftest import cluster_role

pytestmark = pytest.mark.django_db
SERVICE_ACCOUNT = "system:serviceaccount:quartermaster:quartermaster"


@pytest.mark.parametrize(
    ("served", "kueue", "volcano", "backend"),
    [
        (Served(), ["v1beta2", "v1beta1"], True, "kueue"),
        (Served(kueue=("v1beta2",), volcano=False), ["v1beta2"], False, "kueue"),
        (Served(kueue=("v1beta1",), volcano=False), ["v1beta1"], False, "kueue"),
        (Served(kueue=()), [], True, "volcano"),
        (Served(kueue=(), volcano=False), [], False, "kueue"),
    ],
    ids=["both", "v1beta2-only", "v1beta1-only", "volcano", "neither"],
)
def test_each_poll_discovers_what_the_cluster_serves_and_the_objects_follow(
    request: pytest.FixtureRequest,
    settings: Any,
    demo: None,
    served: Served,
    kueue: list[str],
    volcano: bool,
    backend: str,
) -> None:
    demo_cluster = devcluster.start(served=served)
    request.addfinalizer(demo_cluster.stop)
    gateway = connect(url=demo_cluster.url)
    settings.KUBE_URL = demo_cluster.url
    run = poll_cluster(gateway=gateway)
    assert run.error == ""
    cluster = settings_cluster()
    assert cluster.name == "default" and cluster.connection == "settings"
    assert cluster.kubernetes_version == "v1.36.2"
    assert cluster.kueue_versions == kueue
    assert cluster.volcano is volcano
    assert cluster.gpu_operator and cluster.mig_strategy == "mixed"  # from the GPU nodes
    assert cluster.discovered_at == run.started_at and cluster.discovery_error == ""

    manifests = collect_manifests(cluster=cluster)
    queues = {m["apiVersion"] for m in manifests if m["kind"] in ("ClusterQueue", "Queue")}
    if backend == "volcano":
        assert queues == {"scheduling.volcano.sh/v1beta1"}
    elif kueue:
        assert queues == {f"kueue.x-k8s.io/{kueue[0]}"}
    if kueue or volcano:
        for manifest in manifests:  # what the portal renders, the cluster takes
            gateway.apply(manifest)
    else:  # neither: the settings' choice, and the page says it cannot apply
        assert queues == {"kueue.x-k8s.io/v1beta2"}


def test_a_failed_discovery_keeps_the_facts_and_says_why(
    settings: Any, demo: None, demo_cluster: devcluster.DemoCluster, gateway: Gateway
) -> None:
    settings.KUBE_URL = demo_cluster.url
    first = poll_cluster(gateway=gateway)
    demo_cluster.pause()
    try:
        assert poll_cluster(gateway=gateway).error
    finally:
        demo_cluster.resume()
    cluster = settings_cluster()
    assert cluster.discovered_at == first.started_at  # what was known stays, with its time
    assert cluster.kueue_versions == ["v1beta2", "v1beta1"]
    assert "cannot reach the Kubernetes API" in cluster.discovery_error
    assert SyncRun.objects.count() == 2


def registered(admin: Any, url: str, token: str) -> Cluster:
    return save_cluster(
        actor=admin,
        cluster=Cluster(name="remote", display_name="Remote", connection="token", api_url=url),
        credential=token,
        source="web",
    )


@pytest.mark.demo_cluster(
    users=lambda: {
        "portal-token": (SERVICE_ACCOUNT, cluster_role()["rules"]),
        "reader-token": ("reader", frozenset({"get", "list"})),
    }
)
def test_the_connection_test_sets_what_the_portal_may_do_against_what_it_needs(
    platform_admin: Any, demo_cluster: devcluster.DemoCluster, client: Client
) -> None:
    cluster = registered(platform_admin, demo_cluster.url, "portal-token")
    result = check_connection(cluster)
    assert result.ok and result.version == "v1.36.2"
    assert result.checks and result.missing == []

    cluster.credential = ""
    reader = save_cluster(
        actor=platform_admin, cluster=cluster, credential="reader-token", source="web"
    )
    result = check_connection(reader)
    missing = {(c.group, c.resource): c.missing for c in result.missing}
    assert missing[("", "pods/eviction")] == ("create",)
    assert missing[("kueue.x-k8s.io", "clusterqueues")] == ("create", "patch", "delete")
    assert ("", "pods") not in missing  # list: granted

    client.force_login(platform_admin)
    page = client.post("/clusters/remote/test/", headers={"HX-Request": "true"})
    assert page.status_code == 200 and "HX-Request" in page["Vary"]
    text = page.content.decode()
    assert text.lstrip().startswith(f'<section class="card" id="cluster-{cluster.pk}-test">')
    assert (
        f"The portal lacks permissions on {len(result.missing)} of {len(result.checks)} "
        "resources it needs" in text
    )
    assert (
        '<code>pods/eviction</code></td><td>create</td><td><span class="tag bad">✘ missing: '
        "create</span>" in text
    )


@pytest.mark.demo_cluster(token="admin-token")
def test_a_wrong_token_or_an_unreachable_server_is_said_in_words(
    platform_admin: Any, demo_cluster: devcluster.DemoCluster, silent_port: int, client: Client
) -> None:
    wrong = registered(platform_admin, demo_cluster.url, "not-the-token")
    result = check_connection(wrong)
    assert not result.ok and "Unauthorized" in result.error
    wrong.api_url = "http://127.0.0.1:1"  # another endpoint: the token entered again
    save_cluster(actor=platform_admin, cluster=wrong, credential="not-the-token", source="web")
    result = check_connection(Cluster.objects.get(name="remote"))
    assert not result.ok and "cannot reach the Kubernetes API" in result.error
    client.force_login(platform_admin)
    page = client.post("/clusters/remote/test/").content.decode()  # without htmx: the page
    assert (
        "<h1>Remote" in page and "Cannot reach the cluster: cannot reach the Kubernetes API" in page
    )


@pytest.mark.demo_cluster(served=Served(kueue=("v1beta2",)))
def test_the_loop_follows_a_kueue_that_no_longer_serves_the_configured_version(
    settings: Any, demo: None, demo_cluster: devcluster.DemoCluster, gateway: Gateway
) -> None:
    """Kueue 0.20 serves no v1beta1: a portal set to render v1beta1 (for the Kueue it had)
    applies v1beta2 once a poll discovered it, reads its objects back through v1beta2, and
    finds no drift."""
    settings.KUBE_URL = demo_cluster.url
    settings.QM_KUEUE_API_VERSION = "v1beta1"
    before = apply_desired_state(gateway=gateway)  # nothing discovered yet: as configured
    kinds = {"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"}
    assert before.failed and {line.split()[0] for line in before.failed} == kinds
    poll_cluster(gateway=gateway)
    assert settings_cluster().kueue_versions == ["v1beta2"]
    report = apply_desired_state(gateway=gateway)
    assert not report.failed, report.failed
    kueue = AppliedObject.objects.filter(kind="ClusterQueue")
    assert kueue.exists() and {o.api_version for o in kueue} == {"kueue.x-k8s.io/v1beta2"}
    poll_cluster(gateway=gateway)
    assert ObservedObject.objects.filter(api_version="kueue.x-k8s.io/v1beta2").exists()
    assert not Drift.objects.filter(resolved_at__isnull=True, kind__in=["object", "missing"])


@pytest.mark.demo_cluster(token="admin-token")
def test_a_kubeconfig_stored_as_the_credential_connects_with_its_context(
    platform_admin: Any, demo_cluster: devcluster.DemoCluster
) -> None:
    two_contexts = yaml.safe_load(kubeconfig(demo_cluster.url, "admin-token"))
    wrong = {**two_contexts["contexts"][0], "name": "elsewhere"}
    wrong["context"] = {**wrong["context"], "user": "nobody"}
    two_contexts["contexts"].append(wrong)
    two_contexts["users"].append({"name": "nobody", "user": {"token": "not-the-token"}})
    cluster = save_cluster(
        actor=platform_admin,
        cluster=Cluster(
            name="kc", display_name="KC", connection="kubeconfig", kubeconfig_context="devcluster"
        ),
        credential=yaml.safe_dump(two_contexts),
        source="web",
    )
    tested = check_connection(cluster)
    assert tested.ok and tested.version == "v1.36.2" and tested.missing == []
    cluster.kubeconfig_context = "elsewhere"  # another context: the kubeconfig again
    save_cluster(
        actor=platform_admin, cluster=cluster, credential=yaml.safe_dump(two_contexts), source="web"
    )
    tested = check_connection(Cluster.objects.get(name="kc"))
    assert not tested.ok and "Unauthorized" in tested.error
    cluster.kubeconfig_context = "no-such-context"
    save_cluster(
        actor=platform_admin, cluster=cluster, credential=yaml.safe_dump(two_contexts), source="web"
    )
    tested = check_connection(Cluster.objects.get(name="kc"))
    assert not tested.ok and "the kubeconfig cannot be used" in tested.error


def some_queues(cluster: Cluster, team: Team) -> None:
    """A namespace with a quota and a LocalQueue, a flavor and a ClusterQueue on ``cluster``
    (the same names on every cluster)."""
    namespace = Namespace.objects.create(cluster=cluster, name="team-a", team=team)
    QuotaItem.objects.create(namespace=namespace, resource="requests.nvidia.com/gpu", hard="8")
    ResourceFlavor.objects.create(cluster=cluster, name="a100")
    groups = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}
            ],
        }
    ]
    queue = ClusterQueue.objects.create(cluster=cluster, name="cq-train", resource_groups=groups)
    LocalQueue.objects.create(namespace=namespace, name="train", cluster_queue=queue)


def test_clusters_discovered_differently_each_get_their_own_rendering_at_once(
    request: pytest.FixtureRequest, settings: Any, platform_admin: Any, team_a: Team
) -> None:
    """Three clusters in one portal: the settings' one serves Kueue v1beta1 only, "serve"
    v1beta2 only, "batch" Volcano and no Kueue. After one poll of each, each one's objects
    render (and apply) in what that cluster serves, side by side."""
    served = {
        "default": Served(kueue=("v1beta1",), volcano=False),
        "serve": Served(kueue=("v1beta2",), volcano=False),
        "batch": Served(kueue=()),
    }
    demo = {name: devcluster.start(served=s, scenario="none") for name, s in served.items()}
    for each in demo.values():
        request.addfinalizer(each.stop)
    settings.KUBE_URL = demo["default"].url
    clusters = {"default": settings_cluster()}
    for name in ("serve", "batch"):
        clusters[name] = save_cluster(
            actor=platform_admin,
            cluster=Cluster(
                name=name, display_name=name, connection="token", api_url=demo[name].url
            ),
            credential=f"{name}-token",
            source="web",
        )
    for cluster in clusters.values():
        some_queues(cluster, team_a)
        assert poll_cluster(gateway=gateway_for(cluster), cluster=cluster).error == ""
    clusters = {name: Cluster.objects.get(pk=c.pk) for name, c in clusters.items()}
    assert {n: (c.kueue_versions, c.volcano) for n, c in clusters.items()} == {
        "default": (["v1beta1"], False),
        "serve": (["v1beta2"], False),
        "batch": ([], True),
    }

    rendered = {
        name: {(m["kind"], m["apiVersion"]) for m in collect_manifests(cluster=c)}
        for name, c in clusters.items()
    }
    queues = {"ResourceFlavor", "ClusterQueue", "LocalQueue", "Queue"}
    assert {n: {k for k in r if k[0] in queues} for n, r in rendered.items()} == {
        "default": {
            ("ResourceFlavor", "kueue.x-k8s.io/v1beta1"),
            ("ClusterQueue", "kueue.x-k8s.io/v1beta1"),
            ("LocalQueue", "kueue.x-k8s.io/v1beta1"),
        },
        "serve": {
            ("ResourceFlavor", "kueue.x-k8s.io/v1beta2"),
            ("ClusterQueue", "kueue.x-k8s.io/v1beta2"),
            ("LocalQueue", "kueue.x-k8s.io/v1beta2"),
        },
        "batch": {("Queue", "scheduling.volcano.sh/v1beta1")},
    }
    for name, cluster in clusters.items():  # what each cluster is sent, it takes
        report = apply_desired_state(gateway=gateway_for(cluster), cluster=cluster)
        assert report.applied and not report.failed, (name, report.failed)
    applied = AppliedObject.objects.filter(kind__in=queues)
    assert {(o.cluster.name, o.kind, o.api_version) for o in applied} == {
        (name, kind, version) for name, objects in rendered.items() for kind, version in objects
        if kind in queues
    }  # fmt: skip
