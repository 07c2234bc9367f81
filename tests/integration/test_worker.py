"""The cluster loop with a real Celery worker process, real Redis and PostgreSQL, and the
demo cluster over HTTP: changes reach the cluster, outages are ridden out, and a worker
killed mid-apply loses nothing."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import pytest

import devcluster
from cluster.models import AppliedObject
from demo.services import load_demo
from devcluster.controllers import Options
from kube import Gateway, ObjectRef
from loop.desired import collect_manifests
from portal.audit.record import SYSTEM
from tenants.models import Namespace
from tenants.services import delete_namespace, set_namespace_quota
from tests.support import Worker, wait_for

ROOT = Path(__file__).resolve().parents[2]
QUOTA = ObjectRef("v1", "ResourceQuota", "team-a-gpu-quota", "team-a")

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.demo_cluster(options=Options(mig_delay_seconds=0.3, retry_seconds=0.5, tick=0.05)),
]


def all_applied() -> bool:
    wanted = len(collect_manifests())
    return AppliedObject.objects.filter(outcome="applied").count() == wanted


def test_changes_in_the_portal_reach_the_cluster_through_the_worker(
    worker: Worker, gateway: Gateway
) -> None:
    load_demo()  # commits; the apply is queued on commit and run by the worker
    wait_for(lambda: gateway.get(QUOTA), what="the demo quota in the cluster")
    wait_for(all_applied, what="every object applied")
    set_namespace_quota(
        actor=SYSTEM,
        namespace=Namespace.objects.get(name="team-a"),
        source="cli",
        hard={"requests.nvidia.com/gpu": "20"},
    )
    wait_for(
        lambda: gateway.get(QUOTA)["spec"]["hard"] == {"requests.nvidia.com/gpu": "20"},
        what="the changed quota",
    )
    delete_namespace(actor=SYSTEM, namespace=Namespace.objects.get(name="team-dev"), source="cli")
    wait_for(
        lambda: (
            not gateway.list("v1", "Namespace", label_selector="quartermaster.io/team=team-dev")
        ),
        what="team-dev removed",
    )
    assert gateway.get(ObjectRef("v1", "Namespace", "team-b"))  # adopted, still there


def test_an_outage_is_ridden_out_and_everything_converges(
    worker: Worker, gateway: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    load_demo()
    wait_for(all_applied, what="every object applied")
    demo_cluster.pause()
    set_namespace_quota(
        actor=SYSTEM,
        namespace=Namespace.objects.get(name="team-a"),
        source="cli",
        hard={"requests.nvidia.com/gpu": "12", "pods": "40"},
    )
    # The apply's first question gets no answer: the task is retried, with backoff.
    wait_for(
        lambda: (
            "retry: Retry in" in worker.log.read_text()
            and "cannot reach the Kubernetes API" in worker.log.read_text()
        ),
        what="a failed attempt",
    )
    assert not AppliedObject.objects.exclude(outcome="applied").exists()  # none half-sent
    time.sleep(2)
    demo_cluster.resume()
    wait_for(
        lambda: (
            gateway.get(QUOTA)["spec"]["hard"] == {"pods": "40", "requests.nvidia.com/gpu": "12"}
        ),
        timeout=60,
        what="the quota after the outage",
    )
    wait_for(all_applied, what="every object applied after the outage")


def test_a_worker_killed_mid_apply_finishes_the_work_exactly_once(
    worker: Worker, gateway: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    demo_cluster.controllers.options.write_delay_seconds = 0.15
    load_demo()
    wait_for(
        lambda: AppliedObject.objects.filter(outcome="applied").count() >= 4, what="a few applies"
    )
    worker.kill()
    done_before = AppliedObject.objects.filter(outcome="applied").count()
    assert done_before < len(collect_manifests()), "the kill came too late to test anything"
    demo_cluster.controllers.options.write_delay_seconds = 0
    worker.start()
    wait_for(all_applied, timeout=60, what="the redelivered apply")
    assert AppliedObject.objects.count() == len(collect_manifests())
    for manifest in collect_manifests():
        live = gateway.get(ObjectRef.of(manifest))
        applies = [e for e in live["metadata"]["managedFields"] if e["operation"] == "Apply"]
        assert [e["manager"] for e in applies] == ["quartermaster"], manifest["metadata"]["name"]
        if "generation" in live["metadata"]:
            assert live["metadata"]["generation"] == 1, manifest["metadata"]["name"]


def test_the_worker_polls_the_fleet_into_the_portal(worker: Worker, gateway: Gateway) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from cluster.models import ObservedNode
    from loop.tasks import poll_cluster_task
    from portal.infra import metrics
    from portal.infra.observability import request_id

    load_demo()
    wait_for(all_applied, what="every object applied")
    poll_cluster_task.delay()
    wait_for(
        lambda: ObservedNode.objects.filter(name="gpu-a100-03").exists(), what="the first poll"
    )
    gateway.patch_node_labels("gpu-h100-02", {"nvidia.com/mig.config.state": "failed"})
    # Queued while answering a request: the worker's log lines carry that request's id.
    token = request_id.set("req-poll-7")
    try:
        poll_cluster_task.delay()
    finally:
        request_id.reset(token)
    wait_for(
        lambda: ObservedNode.objects.get(name="gpu-h100-02").mig_config_state == "failed",
        what="the change after one poll",
    )
    wait_for(lambda: "[req-poll-7]" in worker.log.read_text(), what="the request id in the log")
    # The worker's task timings reach the shared metrics every web process serves.
    family = {f.name: f for f in text_string_to_metric_families(metrics.exposition().decode())}[
        "quartermaster_task_duration_seconds"
    ]
    counts = {
        s.labels["outcome"]: s.value
        for s in family.samples
        if s.name.endswith("_count") and s.labels["task"] == poll_cluster_task.name
    }
    assert counts.get("success", 0) >= 2


def test_a_worker_killed_during_a_mig_change_resumes_it(
    worker: Worker,
    gateway: Gateway,
    demo_cluster: devcluster.DemoCluster,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.contrib.auth.models import User

    from changes import mig as changes
    from changes import tasks
    from changes.models import MigChangeRequest, MigChangeStep
    from loop.poll import poll_cluster
    from tenants.models import Team

    load_demo()
    wait_for(all_applied, what="every object applied")
    demo_cluster.settle()  # polled at once, Kueue's words could be from before the apply
    poll_cluster(gateway=gateway)
    demo_cluster.controllers.options.mig_delay_seconds = 3  # the worker waits in the "wait" step
    request = changes.request_mig_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=["gpu-a100-03"],
        target_config="all-3g.40gb",
        reason="back to training",
    )
    changes.approve_mig_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    wait_for(
        lambda: MigChangeStep.objects.filter(request=request, step="label", status="done").exists(),
        what="the label step",
    )
    worker.kill()
    worker.start()
    # The continuation the killed worker held comes back to the new one when its visibility
    # timeout ends (4 s here). Where the broker lost it instead, the beat's sweep starts a
    # new run once the change's wake time is LOST_AFTER old: the product's answer to a lost
    # continuation, run here as the beat runs it, at a test's pace (20 s, well after the
    # redelivery's few seconds, instead of 120 s). Redis loses one when the worker is killed
    # after the server popped it for the worker's blocking read and before the worker
    # recorded it as unacknowledged (kombu's Redis transport): this test kills right when
    # the continuation is published, and without the sweep it failed once in three runs
    # alone and twice in eight whole-suite runs.
    monkeypatch.setattr(tasks, "LOST_AFTER", dt.timedelta(seconds=20))

    def succeeded() -> bool:
        tasks.resume_mig_changes_task()
        return MigChangeRequest.objects.get(pk=request.pk).state == "succeeded"

    try:
        wait_for(succeeded, timeout=60, what="the change to finish after the restart")
    except AssertionError as exc:
        steps = list(MigChangeStep.objects.filter(request=request).values_list("step", "status"))
        raise AssertionError(f"{exc}; steps {steps}; worker log:\n{worker.tail()}") from None
    assert set(MigChangeStep.objects.filter(request=request).values_list("status", flat=True)) == {
        "done"
    }
    node = gateway.get(ObjectRef("v1", "Node", "gpu-a100-03"))
    assert node["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert node["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "16"


def test_a_rolled_back_change_gives_the_queues_back_what_it_took(
    worker: Worker, gateway: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    """The seed incident's change lowers cq-dev's slices to 0 (the new layout has none);
    rolling it back brings the slices back, and with them the quota: team-dev's workload,
    refused while the quota was 0, is admitted again."""
    from django.contrib.auth.models import User

    from changes import mig as changes
    from changes.models import MigChangeRequest, MigChangeStep
    from devcluster.scenario import workload
    from loop.poll import poll_cluster
    from portal.models import AuditEvent
    from queues.models import ClusterQueue
    from tenants.models import Team

    cq_dev = ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", "cq-dev")
    notebook = ObjectRef("kueue.x-k8s.io/v1beta2", "Workload", "notebook", "team-dev")

    def dev_slices() -> list[str]:
        flavor = gateway.get(cq_dev)["spec"]["resourceGroups"]
        quotas = {
            r["name"]: str(r["nominalQuota"])
            for group in flavor
            for f in group["flavors"]
            if f["name"] == "a100-80gb-balanced"
            for r in f["resources"]
        }
        return [quotas[f"nvidia.com/mig-{p}"] for p in ("1g.10gb", "2g.20gb", "3g.40gb")]

    def admitted() -> bool:
        return bool((gateway.get(notebook).get("status") or {}).get("admission"))

    def state(request: MigChangeRequest) -> str:
        return MigChangeRequest.objects.get(pk=request.pk).state

    load_demo()
    wait_for(all_applied, what="every object applied")
    demo_cluster.settle()  # polled at once, Kueue's words could be from before the apply
    poll_cluster(gateway=gateway)
    assert dev_slices() == ["16", "8", "8"]
    request = changes.request_mig_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=["gpu-a100-03"],
        target_config="all-3g.40gb",
        reason="back to training",
    )
    changes.approve_mig_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    wait_for(lambda: state(request) == "succeeded", timeout=60, what="the change")
    wait_for(lambda: dev_slices() == ["0", "0", "0"], what="cq-dev lowered in the cluster")
    gateway.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            **workload("notebook", "team-dev", "dev-test", 1, {"nvidia.com/mig-1g.10gb": "2"}),
        }
    )
    time.sleep(1.0)  # several Kueue passes: it stays pending on a quota of 0
    assert not admitted()

    changes.rollback_mig_change(request_id=request.pk, actor=User.objects.get(username="admin"))
    wait_for(lambda: state(request) == "rolled_back", timeout=60, what="the rollback")
    dev = ClusterQueue.objects.get(name="cq-dev").quota()
    flavor = "a100-80gb-balanced"
    assert [dev[(flavor, f"nvidia.com/mig-{p}")] for p in ("1g.10gb", "2g.20gb", "3g.40gb")] == [
        16,
        8,
        8,
    ]
    step = MigChangeStep.objects.get(request=request, round="rollback", step="queues")
    assert step.message == (
        "nominal quota restored: cq-dev a100-80gb-balanced nvidia.com/mig-1g.10gb: 0 -> 16; "
        "cq-dev a100-80gb-balanced nvidia.com/mig-2g.20gb: 0 -> 8; "
        "cq-dev a100-80gb-balanced nvidia.com/mig-3g.40gb: 0 -> 8"
    )
    restored = AuditEvent.objects.get(event="mig_change.queues_restored")
    assert restored.target_id == str(request.pk) and restored.new["left"] == []
    wait_for(lambda: dev_slices() == ["16", "8", "8"], what="cq-dev restored in the cluster")
    wait_for(admitted, what="team-dev's workload admitted again")
