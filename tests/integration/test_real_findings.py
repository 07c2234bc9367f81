"""The real control plane's findings (tests/realcluster/test_findings.py) on the demo
cluster: the same scenarios (tests/realcluster/scenarios.py), the same answers from the API
server's plugins and Kueue, and the same words from the portal."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from cluster.scope import settings_cluster_id
from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
from tests.realcluster import scenarios
from tests.support import explained, wait_for
from usage.models import WorkloadRecord
from usage.sampling import record_workloads

pytestmark = pytest.mark.django_db


def test_3_a_sidecars_limit_range_gpu_is_advised_about_the_sidecar_alone(
    portal_cluster: Gateway,
) -> None:
    portal_cluster.apply(scenarios.sidecar_pod("team-a", "rc-sidecar"))
    scenarios.wait_unschedulable(portal_cluster, "team-a", name="rc-sidecar")
    pod = portal_cluster.get(ObjectRef("v1", "Pod", "rc-sidecar", "team-a"))
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        scenarios.SIDECAR_ANNOTATION
    )
    poll_cluster(gateway=portal_cluster)
    _, pods, _ = explained(["team-a"], settings_cluster_id())
    (row,) = [p for p in pods if p.name == "rc-sidecar"]
    assert (row.why.cause, row.why.next_step) == scenarios.SIDECAR_ADVICE, row.why


def test_8_a_zero_mig_request_pins_a_job_where_it_can_never_run(portal_cluster: Gateway) -> None:
    resources = scenarios.gpus(1, **{scenarios.MIG_3G: "0"})
    portal_cluster.apply(scenarios.job("rc-zero-mig", "team-infer", "online-infer", resources))
    workload = scenarios.wait_reserved(portal_cluster, "team-infer", "rc-zero-mig")
    (assigned,) = workload["status"]["admission"]["podSetAssignments"]
    assert assigned["flavors"] == {scenarios.GPU: "h100-80gb", scenarios.MIG_3G: "a100-80gb-3g"}
    scenarios.wait_unschedulable(portal_cluster, "team-infer", job_name="rc-zero-mig")
    poll_cluster(gateway=portal_cluster)
    _, pods, _ = explained(["team-infer"], settings_cluster_id())
    (row,) = [p for p in pods if p.name.startswith("rc-zero-mig-")]
    assert row.why.cause.startswith(scenarios.ZERO_MIG_CAUSE), row.why
    assert row.why.never and row.estimate.summary == "no estimate", row.estimate


def test_4_a_run_time_is_kueues_finished_time_not_the_samples(portal_cluster: Gateway) -> None:
    """A Job whose pod succeeded on the demo: its Workload is Finished, and the usage sample
    records the run's end at that condition's time, not at the sample's."""
    portal_cluster.apply(scenarios.job("rc-short", "team-infer", "online-infer", scenarios.gpus(1)))
    scenarios.wait_reserved(portal_cluster, "team-infer", "rc-short")

    def running() -> str:
        pods = portal_cluster.list(
            "v1", "Pod", namespace="team-infer", label_selector="job-name=rc-short"
        )
        phases = [(p["metadata"]["name"], (p.get("status") or {}).get("phase")) for p in pods]
        return next((name for name, phase in phases if phase == "Running"), "")

    pod = wait_for(running, timeout=30, what="the demo's kubelet to run the Job's pod")
    poll_cluster(gateway=portal_cluster)
    record_workloads(timezone.now(), settings_cluster_id())  # seen running: no end yet
    scenarios.succeed(portal_cluster, "team-infer", pod)

    def finished() -> dict[str, object]:
        found = scenarios.condition(
            scenarios.workload_of(portal_cluster, "team-infer", "rc-short"), "Finished"
        )
        return found if found.get("status") == "True" else {}

    ended = wait_for(finished, timeout=30, what="the demo's Kueue to mark it Finished")
    assert (ended["reason"], ended["message"]) == scenarios.WORKLOAD_FINISHED["Finished"][1:]
    workload = scenarios.workload_of(portal_cluster, "team-infer", "rc-short")
    assert workload is not None
    poll_cluster(gateway=portal_cluster)
    sample = timezone.now() + dt.timedelta(minutes=5)  # the next sample, minutes later
    record_workloads(sample, settings_cluster_id())
    record = WorkloadRecord.objects.on_every_cluster().get(name=workload["metadata"]["name"])
    assert record.finished_at == dt.datetime.fromisoformat(str(ended["lastTransitionTime"]))
    assert record.finished_at < sample - dt.timedelta(minutes=4)
