"""The gauges /metrics reports of the fleet, the queues, the waiting workloads, MIG changes
and GPU health, on the demo scenario applied to the demo cluster and polled once (the
figures the dashboards under deploy/grafana draw)."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from changes.models import MigChangeRequest
from cluster.services import settings_cluster
from health.services import collect_gpu_health
from tests.factories import MigChangeRequestFactory, ObservedNodeFactory

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: Client) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    samples: Samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def of(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_fleet_queue_wait_change_and_health_gauges_of_the_demo(
    client: Client, portal_cluster: Any, settings: Any
) -> None:
    settings.QM_METRICS_PUBLIC = True
    settings.QM_DCGM_SOURCE = "proxy"
    collect_gpu_health(portal_cluster)  # the demo's Xid 79 node: critical, a drain suggested
    MigChangeRequestFactory(state=MigChangeRequest.State.FAILED)
    MigChangeRequestFactory(state=MigChangeRequest.State.SUCCEEDED)
    samples = scrape(client)
    c = settings_cluster().name

    # Fleet: two H100 nodes of 8 GPUs, three A100 nodes sliced; what pods hold.
    assert (
        of(
            samples,
            "quartermaster_gpu_allocatable",
            cluster=c,
            pool="h100",
            resource="nvidia.com/gpu",
        )
        == 16
    )
    assert (
        of(
            samples,
            "quartermaster_gpu_allocated",
            cluster=c,
            pool="h100",
            resource="nvidia.com/gpu",
        )
        == 8
    )
    three_g = {"cluster": c, "pool": "train", "resource": "nvidia.com/mig-3g.40gb"}
    assert of(samples, "quartermaster_gpu_allocatable", **three_g) == 32
    assert of(samples, "quartermaster_gpu_allocated", **three_g) == 32
    assert of(samples, "quartermaster_gpu_nodes", cluster=c, pool="train", condition="ready") == 3
    assert of(samples, "quartermaster_gpu_nodes", cluster=c, pool="h100", condition="cordoned") == 0

    # Queues: Kueue's usage and workload counts, the nominal quota as the cluster has it.
    train = {
        "cluster": c,
        "cluster_queue": "cq-train",
        "flavor": "h100-80gb",
        "resource": "nvidia.com/gpu",
    }
    assert of(samples, "quartermaster_queue_usage", **train) == 12
    assert of(samples, "quartermaster_queue_borrowed", **train) == 0
    assert of(samples, "quartermaster_queue_nominal_quota", **train) > 0
    assert (
        of(
            samples,
            "quartermaster_queue_workloads",
            cluster=c,
            cluster_queue="cq-train",
            state="pending",
        )
        == 1
    )

    # Waiting: the one workload Kueue has not admitted, counted in its LocalQueue's
    # ClusterQueue (a waiting workload names none yet); one wait, so sum = the longest.
    queue = {"cluster": c, "cluster_queue": "cq-train"}
    assert of(samples, "quartermaster_workload_wait_seconds_count", **queue) == 1
    assert of(samples, "quartermaster_workload_wait_seconds_bucket", **queue, le="+Inf") == 1
    longest = of(samples, "quartermaster_workload_oldest_wait_seconds", **queue)
    assert longest > 0
    assert abs(of(samples, "quartermaster_workload_wait_seconds_sum", **queue) - longest) < 1
    assert of(samples, "quartermaster_workload_wait_seconds_bucket", **queue, le="60.0") == 0

    # MIG changes by kind and state: the suggested drain waits, one change failed, one not.
    assert of(samples, "quartermaster_mig_changes", cluster=c, kind="drain", state="pending") == 1
    assert of(samples, "quartermaster_mig_changes", cluster=c, kind="mig", state="failed") == 1
    assert of(samples, "quartermaster_mig_changes", cluster=c, kind="mig", state="succeeded") == 1
    assert of(samples, "quartermaster_mig_changes", cluster=c, kind="mig", state="rolled_back") == 0

    # GPU health: one node critical (its finding advises a drain), four fine, all read.
    assert of(samples, "quartermaster_gpu_health_nodes", cluster=c, worst="critical") == 1
    assert of(samples, "quartermaster_gpu_health_nodes", cluster=c, worst="ok") == 4
    drain = {"cluster": c, "severity": "critical", "needs_drain": "true"}
    assert of(samples, "quartermaster_gpu_health_findings", **drain) == 1
    assert of(samples, "quartermaster_gpu_health_unread_nodes", cluster=c) == 0
    assert of(samples, "quartermaster_gpu_health_age_seconds", cluster=c) < 300


def test_no_series_names_a_pod_workload_or_node(
    client: Client, portal_cluster: Any, settings: Any
) -> None:
    settings.QM_METRICS_PUBLIC = True
    labels = {name for _, pairs in scrape(client) for name, _ in pairs}
    assert not labels & {"pod", "workload", "node", "namespace", "team"}


def test_the_scrape_costs_the_same_queries_whatever_the_fleet(
    client: Client, fleet: None, settings: Any
) -> None:
    settings.QM_METRICS_PUBLIC = True
    with CaptureQueriesContext(connection) as few:
        client.get("/metrics")
    ObservedNodeFactory.create_batch(5)
    MigChangeRequestFactory.create_batch(3)
    with CaptureQueriesContext(connection) as more:
        samples = scrape(client)
    assert len(more) == len(few)
    c = settings_cluster().name
    three_g = {"cluster": c, "pool": "", "resource": "nvidia.com/mig-3g.40gb"}
    assert of(samples, "quartermaster_gpu_allocatable", **three_g) == 5 * 16
