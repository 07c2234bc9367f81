"""GPU health from the demo cluster's DCGM exporters (through the API server's pod proxy or
a Prometheus), and the Xid 79 GPU turned into a reviewed cordon-and-drain request."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User

import devcluster
from changes import mig as changes
from changes.executor import advance
from changes.models import MigChangeRequest, MigChangeStep
from gpus import dcgm
from health.collect import PrometheusError
from health.models import NodeHealth
from health.services import collect_gpu_health
from kube import Gateway, ObjectRef
from portal.models import AuditEvent
from tests.support import wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def on_cluster(
    portal_cluster: Gateway, demo_cluster: devcluster.DemoCluster
) -> tuple[Gateway, devcluster.DemoCluster]:
    return portal_cluster, demo_cluster


def pod_ip(gateway: Gateway, name: str) -> str:
    return str(gateway.get(ObjectRef("v1", "Pod", name, "gpu-operator"))["status"]["podIP"])


def settle(request: MigChangeRequest, gateway: Gateway) -> str:
    wait_for(lambda: advance(request.pk, gateway=gateway).kind != "wait", timeout=20)
    request.refresh_from_db()
    return request.state


def test_health_of_the_demo_fleet_and_the_xid_79_drain(
    on_cluster: tuple[Gateway, devcluster.DemoCluster],
) -> None:
    gateway, _ = on_cluster
    outcome = collect_gpu_health(gateway)
    assert (outcome["nodes"], outcome["unreadable"], outcome["attention"]) == (5, 0, 1)
    health = {h.node: h for h in NodeHealth.objects.all()}
    assert {n: h.worst for n, h in health.items()} == {
        "gpu-a100-01": "ok",
        "gpu-a100-02": "ok",
        "gpu-a100-03": "ok",
        "gpu-h100-01": "ok",
        "gpu-h100-02": "critical",
    }
    a100 = health["gpu-a100-01"].gpus[0]
    assert [(i["profile"], i["pod"]) for i in a100["instances"]] == [
        ("3g.40gb", "filler-3g-0"),
        ("3g.40gb", "filler-3g-0"),
    ]
    (finding,) = health["gpu-h100-02"].findings
    assert finding["title"] == "GPU 5: Xid 79, GPU has fallen off the bus (PCIe) (no metrics since)"

    # One suggestion, waiting for an approver like any change; a second collection adds none.
    (drain,) = MigChangeRequest.objects.filter(kind="drain")
    assert drain.pk in outcome["suggested"]
    assert (drain.state, drain.nodes, drain.requested_by, drain.team) == (
        "pending",
        ["gpu-h100-02"],
        None,
        None,
    )
    assert drain.reason.startswith(
        "Suggested by the portal's GPU health check: gpu-h100-02 GPU 5: Xid 79"
    )
    assert drain.assessment["capacity"] == [
        {"resource": "nvidia.com/gpu", "before": 16, "after": 8}
    ]
    assert (
        "The nodes stay cordoned until an admin returns them to service."
        in drain.assessment["notes"]
    )
    assert collect_gpu_health(gateway)["suggested"] == []
    assert AuditEvent.objects.filter(event="node_drain.suggested").count() == 1

    approver, admin = User.objects.get(username="approver"), User.objects.get(username="admin")
    changes.approve_mig_change(request_id=drain.pk, approver=approver, comment="Reboot it.")
    assert settle(drain, gateway) == "succeeded"
    steps = list(MigChangeStep.objects.filter(request=drain).values_list("step", "status"))
    assert steps == [("cordon", "done"), ("evict", "done")]
    node = gateway.get(ObjectRef("v1", "Node", "gpu-h100-02"))
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "all-disabled"  # untouched

    # Repaired: an admin returns it to service.
    changes.rollback_mig_change(request_id=drain.pk, actor=admin)
    assert settle(drain, gateway) == "rolled_back"
    assert not gateway.get(ObjectRef("v1", "Node", "gpu-h100-02"))["spec"].get("unschedulable")


def test_a_rejected_suggestion_is_not_made_again(
    on_cluster: tuple[Gateway, devcluster.DemoCluster],
) -> None:
    gateway, _ = on_cluster
    collect_gpu_health(gateway)
    drain = MigChangeRequest.objects.get(kind="drain")
    changes.reject_mig_change(
        request_id=drain.pk,
        approver=User.objects.get(username="approver"),
        comment="A known fault; the vendor swaps the card on Monday.",
    )
    assert collect_gpu_health(gateway)["suggested"] == []
    assert MigChangeRequest.objects.filter(kind="drain").count() == 1


def test_an_unreadable_exporter_keeps_the_last_word_and_says_why(
    settings: Any, on_cluster: tuple[Gateway, devcluster.DemoCluster]
) -> None:
    gateway, _ = on_cluster
    collect_gpu_health(gateway)
    before = NodeHealth.objects.get(node="gpu-a100-02")
    settings.QM_DCGM_PORT = 9500  # nothing listens there
    outcome = collect_gpu_health(gateway)
    assert (outcome["nodes"], outcome["unreadable"]) == (0, 5)
    after = NodeHealth.objects.get(node="gpu-a100-02")
    assert after.gpus == before.gpus and after.observed_at == before.observed_at
    assert after.error == (
        "nvidia-dcgm-exporter-a100-02: error trying to reach service: dial tcp "
        f"{pod_ip(gateway, 'nvidia-dcgm-exporter-a100-02')}:9500: connect: connection refused"
    )
    # The exporter answers again: the error is gone.
    settings.QM_DCGM_PORT = 9400
    collect_gpu_health(gateway)
    assert NodeHealth.objects.get(node="gpu-a100-02").error == ""


class FakePrometheus:
    """Answers instant queries from the demo cluster's exporters, as a Prometheus that
    scrapes them would (only the {__name__=~"..."} selector the portal sends)."""

    def __init__(self, cluster: devcluster.DemoCluster) -> None:
        prometheus = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = parse_qs(url.query).get("query", [""])[0]
                prometheus.queries.append(query)
                names = query.removeprefix('{__name__=~"').removesuffix('"}').split("|")
                result = []
                for node in ("gpu-a100-01", "gpu-h100-02"):
                    for s in dcgm.parse_exposition(cluster.controllers.dcgm_metrics(node), names):
                        metric = {"__name__": s.name, **s.labels, "instance": "10.0.0.1:9400"}
                        result.append({"metric": metric, "value": [time.time(), str(s.value)]})
                body = json.dumps(
                    {"status": "success", "data": {"resultType": "vector", "result": result}}
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

        self.queries: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def test_health_from_prometheus(
    settings: Any, on_cluster: tuple[Gateway, devcluster.DemoCluster]
) -> None:
    _, cluster = on_cluster
    prometheus = FakePrometheus(cluster)
    settings.QM_DCGM_SOURCE = "prometheus"
    settings.QM_PROMETHEUS_URL = prometheus.url
    try:
        outcome = collect_gpu_health(None)
    finally:
        prometheus.server.shutdown()
    assert prometheus.queries == ['{__name__=~"' + "|".join(dcgm.WANTED) + '"}']
    assert (outcome["nodes"], outcome["attention"]) == (2, 1)
    assert NodeHealth.objects.get(node="gpu-h100-02").worst == "critical"
    settings.QM_PROMETHEUS_URL = "http://127.0.0.1:1"
    with pytest.raises(PrometheusError, match=r"Prometheus at http://127.0.0.1:1 did not answer"):
        collect_gpu_health(None)
