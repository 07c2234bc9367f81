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
