"""The run command's two demo clusters: each its own process on its own port, the inference
one behind the token the demo loader stores, both stopped with the portal; and the second
cluster the integration fixtures give (``inference_cluster``)."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import dev
from changes.models import MigPolicyChange
from cluster.models import Cluster, ObservedNode, ObservedWorkload
from cluster.services import settings_cluster
from demo.data import Endpoint
from demo.services import load_demo, load_demo_mig_policy
from fleet.models import NodePool
from kube import Gateway
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from portal.models import AuditEvent
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from tenants.models import Namespace, PriorityClass
from tests.integration.conftest import SecondCluster
from tests.support import wait_for

KUEUE = "kueue.x-k8s.io/v1beta2"


def node_names(url: str, token: str = "") -> list[str]:
    request = urllib.request.Request(f"{url}/api/v1/nodes")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return sorted(item["metadata"]["name"] for item in json.load(answer)["items"])


def test_the_run_command_starts_two_demo_clusters_and_stops_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QM_DEVCLUSTER_PORT", raising=False)
    monkeypatch.delenv("QM_DEVCLUSTER_INFERENCE_PORT", raising=False)
    env: dict[str, str] = {}
    demo_env: dict[str, str] = {}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        clusters = dev.start_demo_clusters(env, demo_env, tmp_path, processes)
        training, inference = (url for _, url in clusters)
        assert set(processes) == {"devcluster", "devcluster-inference"}
        assert processes["devcluster"].pid != processes["devcluster-inference"].pid
        assert training != inference and env["KUBE_URL"] == training
        assert demo_env["QM_DEMO_INFERENCE_URL"] == inference
        assert "QM_DEMO_INFERENCE_TOKEN" not in env  # web, worker and beat do not get it
        assert node_names(training)[0] == "gpu-a100-01"
        token = demo_env["QM_DEMO_INFERENCE_TOKEN"]
        assert {"infer-h100-01", "infer-a100-01"} <= set(node_names(inference, token))
        with pytest.raises(urllib.error.HTTPError, match="401"):
            node_names(inference)
        assert (tmp_path / "devcluster-inference.kubeconfig").read_text().count(token) == 1
        # One process ending (here a stand-in for web) stops the others, as Ctrl-C does.
        processes["web"] = subprocess.Popen(["true"])
        before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            assert dev.supervise(processes) == 1  # an exit nobody asked for
        finally:
            for number, handler in before.items():
                signal.signal(number, handler)
        assert processes["devcluster"].poll() == processes["devcluster-inference"].poll() == 0
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def test_the_second_clusters_row_reaches_it_with_its_stored_token(
    inference_cluster: SecondCluster, demo_cluster: Any
) -> None:
    assert inference_cluster.row.credential != inference_cluster.token  # encrypted
    nodes = [n["metadata"]["name"] for n in inference_cluster.gateway.list("v1", "Node")]
    # the H100 and L40S device-plugin pools, and the A100 pool served by the DRA driver
    assert nodes == [
        "infer-a100-01",
        "infer-a100-02",
        "infer-h100-01",
        "infer-h100-02",
        "infer-h100-03",
        "infer-l40s-01",
        "infer-l40s-02",
        "infer-l40s-03",
    ]
    assert inference_cluster.demo.url != demo_cluster.url


def selects(gateway: Gateway, labels: dict[str, str]) -> list[str]:
    selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
    return [n["metadata"]["name"] for n in gateway.list("v1", "Node", label_selector=selector)]


def test_the_demo_over_two_clusters_gives_each_cluster_its_own_objects(
    inference_cluster: SecondCluster, demo_cluster: Any, gateway: Gateway
) -> None:
    load_demo(Endpoint(inference_cluster.demo.url, inference_cluster.token))
    training, inference = settings_cluster(), Cluster.objects.get(name="inference")
    assert (training.purpose, inference.purpose) == ("training", "inference")

    def names(model: Any, cluster: Cluster) -> list[str]:
        return sorted(model.objects.filter(cluster=cluster).values_list("name", flat=True))

    assert names(Namespace, training) == ["team-a", "team-b", "team-dev"]
    assert names(Namespace, inference) == ["team-a-serve", "team-infer"]
    # team-a trains on one cluster and serves on the other
    assert {ns.cluster.name for ns in Namespace.objects.filter(team__slug="team-a")} == {
        training.name,
        "inference",
    }
    assert names(ClusterQueue, training) == ["cq-dev", "cq-train"]
    assert names(ClusterQueue, inference) == ["cq-infer"]
    assert ClusterQueue.objects.get(name="cq-infer").fair_sharing_weight == "20"
    assert names(Cohort, training) == ["ai-platform", "gpu-fleet"]
    assert names(Cohort, inference) == []
    queues = {lq.name: lq.namespace.cluster.name for lq in LocalQueue.objects.all()}
    assert queues == {
        "team-a-train": training.name,
        "team-b-train": training.name,
        "dev-test": training.name,
        "online-infer": "inference",
        "offline-batch": "inference",
    }
    assert names(ResourceFlavor, training) == ["a100-80gb-3g", "a100-80gb-balanced", "h100-80gb"]
    assert names(ResourceFlavor, inference) == ["h100-80gb", "h100-80gb-1g", "l40s", "l40s-shared"]
    assert not PriorityClass.objects.filter(clusters__isnull=False).exists()  # on both
    # Each cluster's flavors and pools pick nodes of that cluster's demo fleet.
    for cluster, api in ((training, gateway), (inference, inference_cluster.gateway)):
        for flavor in ResourceFlavor.objects.filter(cluster=cluster):
            assert selects(api, flavor.node_labels), (cluster.name, flavor.name)
        for pool in NodePool.objects.filter(cluster=cluster):
            picked = selects(api, pool.node_selector)
            assert picked, (cluster.name, pool.name)
            if pool.mig_config:
                configs = {
                    n["metadata"]["labels"]["nvidia.com/mig.config"]
                    for n in api.list(
                        "v1", "Node", label_selector=f"quartermaster.io/pool={pool.name}"
                    )
                }
                assert pool.name == "train" or configs == {pool.mig_config}, pool.name
    # Loading again (the next run) writes nothing.
    audited = AuditEvent.objects.count()
    load_demo(Endpoint(inference_cluster.demo.url, inference_cluster.token))
    assert AuditEvent.objects.count() == audited
    assert Namespace.objects.count() == 5


def test_a_database_of_one_cluster_moves_the_inference_objects_over(
    demo: None, inference_cluster: SecondCluster
) -> None:
    """A populated database of the one-cluster demo (the last run's): registering the
    inference cluster moves team-infer's namespace and cq-infer, their history kept."""
    before = Namespace.objects.get(name="team-infer")
    cq = ClusterQueue.objects.get(name="cq-infer")
    assert before.cluster == cq.cluster == settings_cluster()
    load_demo(Endpoint(inference_cluster.demo.url, inference_cluster.token))
    after = Namespace.objects.get(name="team-infer")
    assert (after.pk, after.cluster.name) == (before.pk, "inference")
    assert ClusterQueue.objects.get(name="cq-infer").pk == cq.pk
    assert LocalQueue.objects.get(name="online-infer").cluster_queue_id == cq.pk
    assert not Namespace.objects.filter(name="team-infer", cluster=settings_cluster()).exists()


def admitted(api: Gateway, namespace: str) -> dict[str, str]:
    """Each Kueue workload of ``namespace`` and the flavor of its first admitted pod set."""
    out = {}
    for workload in api.list("kueue.x-k8s.io/v1beta2", "Workload", namespace=namespace):
        admission = (workload.get("status") or {}).get("admission") or {}
        assignments = admission.get("podSetAssignments") or [{}]
        out[workload["metadata"]["name"]] = ",".join(
            sorted(set((assignments[0].get("flavors") or {}).values()))
        )
    return out


def test_the_demo_applied_to_both_clusters_runs_each_clusters_own_queues(
    settings: Any, inference_cluster: SecondCluster, demo_cluster: Any, gateway: Gateway
) -> None:
    settings.KUBE_URL = demo_cluster.url
    load_demo(Endpoint(inference_cluster.demo.url, inference_cluster.token))
    training, inference = settings_cluster(), inference_cluster.row
    second = inference_cluster.gateway
    for api, cluster in ((gateway, training), (second, inference)):
        poll_cluster(gateway=api, cluster=cluster)  # discovers what it serves
        report = apply_desired_state(gateway=api, cluster=cluster)
        assert (report.failed, report.conflicts) == ([], []), cluster.name
    queues = {
        cluster: sorted(q["metadata"]["name"] for q in api.list(KUEUE, "ClusterQueue"))
        for cluster, api in (("training", gateway), ("inference", second))
    }
    assert queues == {"training": ["cq-dev", "cq-train"], "inference": ["cq-infer"]}
    namespaces = {n["metadata"]["name"] for n in second.list("v1", "Namespace")}
    assert {"team-infer", "team-a-serve"} <= namespaces
    assert "team-infer" not in {n["metadata"]["name"] for n in gateway.list("v1", "Namespace")}
    # The inference cluster's Kueue admits its waiting workloads on its own flavors.
    wait_for(
        lambda: (
            admitted(second, "team-infer")
            == {"job-batch-embed": "h100-80gb", "job-canary-8b": "h100-80gb-1g"}
        ),
        what="team-infer's workloads admitted on the inference cluster",
    )
    poll_cluster(gateway=second, cluster=inference)
    assert ObservedNode.objects.filter(cluster=inference).count() == 8  # 2 of them DRA's A100s
    assert ObservedNode.objects.filter(cluster=training).count() == 5
    observed = ObservedWorkload.objects.filter(cluster=inference)
    assert sorted(observed.values_list("name", flat=True)) == ["job-batch-embed", "job-canary-8b"]


def test_the_demo_seeds_the_inference_clusters_mig_policy_once_its_gpus_are_read(
    inference_cluster: SecondCluster, demo_cluster: Any
) -> None:
    """As the run command does: the inference cluster synced, then its MIG policy seeded (the
    grants checked against the profiles its DRA driver publishes), proposed by the platform
    admin and approved by the approver; the loop applies one DeviceClass per granted profile
    and each governed namespace's quota to the demo cluster."""
    load_demo(Endpoint(inference_cluster.demo.url, inference_cluster.token))
    inference, second = inference_cluster.row, inference_cluster.gateway
    assert poll_cluster(gateway=second, cluster=inference).ok
    assert load_demo_mig_policy().endswith("of the inference cluster proposed and approved.")
    change = MigPolicyChange.objects.on(inference).get()
    assert (change.requested_by.username, change.decided_by.username) == ("admin", "approver")
    report = apply_desired_state(gateway=second, cluster=inference)
    assert (report.failed, report.conflicts) == ([], []), report
    classes = {c["metadata"]["name"] for c in second.list("resource.k8s.io/v1", "DeviceClass")}
    assert {"mig-1g.10gb.quartermaster.io", "mig-3g.40gb.quartermaster.io"} <= classes
    quota = next(
        q
        for q in second.list("v1", "ResourceQuota", namespace="team-a-serve")
        if q["metadata"]["name"] == "team-a-serve-mig-policy"
    )
    assert (
        quota["spec"]["hard"]["mig-1g.10gb.quartermaster.io.deviceclass.resource.k8s.io/devices"]
        == "2"
    )
    assert load_demo_mig_policy().endswith("left alone.")
