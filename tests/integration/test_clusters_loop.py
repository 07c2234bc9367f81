"""Two clusters, each its own loop: the settings' demo cluster and a second demo cluster in
a process of its own, reached by a token connection. Each cluster's apply sends only its
objects; a ClusterQueue named the same on both is two rows and two objects; with the second
cluster stopped the first one's poll and apply go on, the second says since when it is
unreachable, and it catches up when it is back; a real worker polls and applies both."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

import devcluster
from cluster.models import AppliedObject, Cluster, Drift, ObservedNode, SyncRun
from cluster.selectors import api_status, cluster_statuses
from cluster.services import save_cluster, settings_cluster
from kube import Gateway, NotFound, ObjectRef, RetryableKubeError, connect
from loop import tasks
from portal.audit.record import SYSTEM
from queues.models import ClusterQueue
from queues.services import save_cluster_queue
from tenants.models import Namespace
from tests.factories import (
    ClusterQueueFactory,
    LocalQueueFactory,
    NamespaceFactory,
    ResourceFlavorFactory,
    TeamFactory,
)
from tests.support import Worker, wait_for

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "second-cluster-token"
GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"
CQ = ObjectRef(KUEUE, "ClusterQueue", "cq-shared")

pytestmark = pytest.mark.django_db(transaction=True)  # the worker reads what the test wrote


class DemoProcess:
    """A demo cluster (the seed scenario) in a process of its own that wants a bearer token;
    stopped and started again on the same port (with a fresh state, as after a rebuild)."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "devcluster",
                "--port",
                str(self.port),
                "--token",
                TOKEN,
                "--mig-delay",
                "0.2",
                "--retry-seconds",
                "0.3",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline().split()[-1].rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.fixture
def second() -> Iterator[DemoProcess]:
    demo = DemoProcess()
    demo.start()
    yield demo
    demo.stop()


@pytest.fixture
def clusters(
    settings: Any, demo_cluster: devcluster.DemoCluster, second: DemoProcess, platform_admin: Any
) -> tuple[Cluster, Cluster]:
    """The settings' cluster (the demo cluster) and ``infer`` (the second, by token), each
    with a namespace of its own and a ClusterQueue ``cq-shared`` of its own quota."""
    settings.KUBE_URL = demo_cluster.url
    train = settings_cluster()
    infer = save_cluster(
        actor=platform_admin,
        cluster=Cluster(
            name="infer", display_name="Inference", connection="token", api_url=second.url
        ),
        credential=TOKEN,
        source="cli",
    )
    team = TeamFactory(slug="team-x")
    for cluster, namespace, gpus in ((train, "train-x", "8"), (infer, "serve-x", "2")):
        ResourceFlavorFactory(cluster=cluster, name="gpu")
        queue = ClusterQueueFactory(
            cluster=cluster,
            name="cq-shared",
            namespace_selector={},
            resource_groups=[
                {
                    "coveredResources": [GPU],
                    "flavors": [
                        {"name": "gpu", "resources": [{"name": GPU, "nominalQuota": gpus}]}
                    ],
                }
            ],
        )
        LocalQueueFactory(
            name="main",
            namespace=NamespaceFactory(cluster=cluster, name=namespace, team=team),
            cluster_queue=queue,
        )
    return train, infer


def gateways(second: DemoProcess, demo_cluster: devcluster.DemoCluster) -> tuple[Gateway, Gateway]:
    return connect(url=demo_cluster.url, token="any"), connect(url=second.url, token=TOKEN)


def exists(gateway: Gateway, ref: ObjectRef) -> bool:
    try:
        gateway.get(ref)
    except NotFound:
        return False
    return True


def nominal(gateway: Gateway) -> str:
    return str(
        gateway.get(CQ)["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    )


def test_each_clusters_apply_sends_only_its_own_objects(
    clusters: tuple[Cluster, Cluster], second: DemoProcess, demo_cluster: devcluster.DemoCluster
) -> None:
    train, infer = clusters
    to_train, to_infer = gateways(second, demo_cluster)
    assert tasks.apply_desired_state_task(train.pk)["failed"] == 0
    assert exists(to_train, ObjectRef("v1", "Namespace", "train-x"))
    assert not exists(to_infer, ObjectRef("v1", "Namespace", "train-x"))
    assert not exists(to_infer, CQ)  # nothing reached the second cluster yet
    assert tasks.apply_desired_state_task(infer.pk)["failed"] == 0
    assert exists(to_infer, ObjectRef("v1", "Namespace", "serve-x"))
    assert not exists(to_train, ObjectRef("v1", "Namespace", "serve-x"))
    assert exists(to_infer, ObjectRef(KUEUE, "LocalQueue", "main", "serve-x"))
    assert not exists(to_infer, ObjectRef(KUEUE, "LocalQueue", "main", "train-x"))
    names = {
        cluster.name: sorted(
            AppliedObject.objects.filter(cluster=cluster).values_list("kind", "name")
        )
        for cluster in clusters
    }
    assert ("Namespace", "serve-x") in names["infer"] and ("Namespace", "train-x") not in names[
        "infer"
    ]
    assert ("Namespace", "train-x") in names[train.name]


def test_a_cluster_queue_named_the_same_on_both_is_two_rows_and_two_objects(
    clusters: tuple[Cluster, Cluster], second: DemoProcess, demo_cluster: devcluster.DemoCluster
) -> None:
    train, infer = clusters
    to_train, to_infer = gateways(second, demo_cluster)
    assert ClusterQueue.objects.filter(name="cq-shared").count() == 2
    for cluster in clusters:
        tasks.apply_desired_state_task(cluster.pk)
    assert (nominal(to_train), nominal(to_infer)) == ("8", "2")
    # A change to one of them is applied to its cluster only.
    queue = ClusterQueue.objects.get(cluster=infer, name="cq-shared")
    queue.resource_groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "3"
    save_cluster_queue(actor=SYSTEM, cluster_queue=queue, source="cli")
    assert tasks.apply_desired_state_task(infer.pk)["applied"] == 1
    assert tasks.apply_desired_state_task(train.pk)["applied"] == 0
    assert (nominal(to_train), nominal(to_infer)) == ("8", "3")


def test_a_stopped_cluster_holds_nobody_up_says_since_when_and_catches_up(
    clusters: tuple[Cluster, Cluster],
    second: DemoProcess,
    demo_cluster: devcluster.DemoCluster,
    settings: Any,
    platform_admin: Any,
) -> None:
    train, infer = clusters
    settings.QM_API_PROBE_SECONDS = 2
    for cluster in clusters:
        tasks.apply_desired_state_task(cluster.pk)
        tasks.poll_cluster_task(cluster.pk)
    assert ObservedNode.objects.filter(cluster=infer, name="gpu-a100-03").exists()
    assert ObservedNode.objects.filter(cluster=train, name="gpu-a100-03").exists()  # two rows

    second.stop()
    began = time.monotonic()
    tasks.poll_cluster_task(infer.pk)
    tasks.poll_cluster_task(infer.pk)
    with pytest.raises(RetryableKubeError, match="cannot reach the Kubernetes API"):
        tasks.apply_desired_state_task(infer.pk)  # the worker retries it (with backoff)
    assert time.monotonic() - began < 10  # refused at once, not after the lists' timeouts
    # The first cluster's loop goes on: a change there is applied, its poll is fresh.
    to_train, _ = gateways(second, demo_cluster)
    queue = ClusterQueue.objects.get(cluster=train, name="cq-shared")
    queue.resource_groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "12"
    save_cluster_queue(actor=SYSTEM, cluster_queue=queue, source="cli")
    assert tasks.apply_desired_state_task(train.pk)["applied"] == 1
    assert nominal(to_train) == "12"
    tasks.poll_cluster_task(train.pk)
    assert api_status(train).ok and api_status(settings_cluster()).ok

    first_failed = SyncRun.objects.filter(cluster=infer).exclude(error="").earliest("started_at")
    statuses = {s.cluster.name: s for s in cluster_statuses()}
    assert statuses[train.name].ok
    away = statuses["infer"]
    assert (away.state, away.since) == ("unreachable", first_failed.started_at)
    assert "cannot reach the Kubernetes API" in away.message
    assert away.last_ok_at is not None and away.last_ok_at < first_failed.started_at
    # The pages keep showing both: the first cluster's fresh data, the other's as of its last
    # poll, said to be unreachable since its first failed poll.
    client = Client()
    client.force_login(platform_admin)
    for page in ("/fleet/?cluster=all", "/queues/?cluster=all", "/"):
        response = client.get(page)
        assert response.status_code == 200, page
        text = " ".join(response.content.decode().split())
        assert 'Inference</strong> <span class="tag bad">unreachable</span> since' in text, page
    queues = " ".join(client.get("/queues/?cluster=all").content.decode().split())
    assert queues.count("cq-shared") >= 2  # each cluster's queue, the stopped one's as last seen

    second.start()  # the same port, a fresh state: the portal's objects are gone there
    tasks.poll_cluster_task(infer.pk)
    assert api_status(infer).ok
    missing = Drift.objects.filter(cluster=infer, kind="missing", resolved_at=None)
    assert "ClusterQueue cq-shared" in set(missing.values_list("subject", flat=True))
    assert tasks.apply_desired_state_task(infer.pk)["applied"] >= 3  # what the poll found gone
    _, to_infer = gateways(second, demo_cluster)
    assert nominal(to_infer) == "2" and exists(to_infer, ObjectRef("v1", "Namespace", "serve-x"))
    assert not exists(to_infer, ObjectRef("v1", "Namespace", "train-x"))


def test_a_worker_polls_and_applies_each_cluster(
    clusters: tuple[Cluster, Cluster],
    second: DemoProcess,
    demo_cluster: devcluster.DemoCluster,
    worker: Worker,
) -> None:
    train, infer = clusters
    _, to_infer = gateways(second, demo_cluster)
    tasks.poll_all_clusters_task.delay()
    for cluster in clusters:
        wait_for(
            lambda c=cluster: ObservedNode.objects.filter(cluster=c).exists(),
            what=f"the worker's poll of {cluster.name}",
        )
    # A change on the second cluster queues its apply only, which the worker runs.
    queue = ClusterQueue.objects.get(cluster=infer, name="cq-shared")
    queue.resource_groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "5"
    save_cluster_queue(actor=SYSTEM, cluster_queue=queue, source="cli")
    wait_for(lambda: nominal(to_infer) == "5", what="the change applied to the second cluster")
    assert not AppliedObject.objects.filter(cluster=train).exists()  # nothing sent there
    assert Namespace.objects.get(name="serve-x").cluster_id == infer.pk
