"""The demo cluster stores LimitRanges and admits pods the way the real API server does:
``max`` becomes ``default`` becomes ``defaultRequest``, every container that does not set a
resource gets the defaults, the pod is annotated with what was set, then min/max are checked."""

from __future__ import annotations

from typing import Any

import pytest

from tests.devcluster.test_recordings import Demo

LIMITS = "/api/v1/namespaces/team-c/limitranges"
PODS = "/api/v1/namespaces/team-c/pods"


@pytest.fixture
def demo() -> Demo:
    return Demo()


def limit_range(*items: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "team-c-gpu-defaults"}, "spec": {"limits": list(items)}}


def a_pod(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": resources}]},
    }


def test_a_max_alone_is_stored_as_the_default_and_the_default_request(demo: Demo) -> None:
    created = demo.call(
        "POST",
        LIMITS,
        limit_range(
            {
                "type": "Container",
                "max": {"nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-2g.20gb": "1"},
            }
        ),
    )
    assert created.status == 201
    (item,) = demo.call("GET", f"{LIMITS}/team-c-gpu-defaults").body["spec"]["limits"]
    assert item == {
        "type": "Container",
        "max": {"nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-2g.20gb": "1"},
        "default": {"nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-2g.20gb": "1"},
        "defaultRequest": {"nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-2g.20gb": "1"},
    }


def test_a_cpu_only_pod_gets_every_max_as_its_limits_and_requests(demo: Demo) -> None:
    demo.call(
        "POST",
        LIMITS,
        limit_range(
            {
                "type": "Container",
                "max": {"nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-2g.20gb": "1"},
            }
        ),
    )
    pod = demo.call("POST", PODS, a_pod("cpu-only", requests={"cpu": "1"})).body
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-2g.20gb": "1"},
        "limits": {"nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-2g.20gb": "1"},
    }
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: nvidia.com/mig-1g.10gb, nvidia.com/mig-2g.20gb request for "
        "container main; nvidia.com/mig-1g.10gb, nvidia.com/mig-2g.20gb limit for container main"
    )


def test_a_whole_gpu_default_lands_on_a_mig_pod_unless_it_sets_zero(demo: Demo) -> None:
    demo.call(
        "POST",
        LIMITS,
        limit_range(
            {
                "type": "Container",
                "default": {"nvidia.com/gpu": "1"},
                "defaultRequest": {"nvidia.com/gpu": "1"},
            }
        ),
    )
    mig = demo.call("POST", PODS, a_pod("mig", limits={"nvidia.com/mig-3g.40gb": "1"})).body
    assert mig["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/mig-3g.40gb": "1",
        "nvidia.com/gpu": "1",
    }
    assert mig["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: nvidia.com/gpu request for container main; "
        "nvidia.com/gpu limit for container main"
    )
    # The API server copies the limits into unset requests before the LimitRanger runs.
    opted_out = demo.call(
        "POST",
        PODS,
        a_pod("opted-out", limits={"nvidia.com/mig-3g.40gb": "1", "nvidia.com/gpu": "0"}),
    ).body
    assert opted_out["spec"]["containers"][0]["resources"]["requests"] == {
        "nvidia.com/mig-3g.40gb": "1",
        "nvidia.com/gpu": "0",
    }
    assert "kubernetes.io/limit-ranger" not in opted_out["metadata"].get("annotations", {})


def test_a_pod_max_refuses_a_pod_without_that_limit(demo: Demo) -> None:
    demo.call("POST", LIMITS, limit_range({"type": "Pod", "max": {"nvidia.com/gpu": "8"}}))
    refused = demo.call("POST", PODS, a_pod("cpu-only", requests={"cpu": "1"}))
    assert refused.status == 403
    assert refused.body["message"] == (
        'pods "cpu-only" is forbidden: maximum nvidia.com/gpu usage per Pod is 8.  '
        "No limit is specified"
    )
    too_big = demo.call("POST", PODS, a_pod("big", limits={"nvidia.com/gpu": "9"}))
    assert too_big.body["message"] == (
        'pods "big" is forbidden: maximum nvidia.com/gpu usage per Pod is 8, but limit is 9'
    )
