"""The real control plane's findings (tests/realcluster/test_findings.py) on the demo
cluster: the same scenarios (tests/realcluster/scenarios.py), the same answers from the API
server's plugins and Kueue, and the same words from the portal."""

from __future__ import annotations

import pytest

from cluster.scope import settings_cluster_id
from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
from tests.realcluster import scenarios
from tests.support import explained

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
