"""The demo cluster serves Kueue's versions and Volcano's CRDs as it is told (default: all,
as always), answers group discovery and the API paths of what it does not serve as the API
server does, and answers a SelfSubjectRulesReview for any authenticated user."""

from __future__ import annotations

from typing import Any

import pytest

import devcluster
from devcluster import Served
from devcluster import __main__ as command
from kube import Gateway, NotFound, PermanentKubeError, connect
from tests.deploy.conftest import cluster_role


def groups(gateway: Gateway) -> dict[str, tuple[list[str], str]]:
    return {
        g["name"]: ([v["version"] for v in g["versions"]], g["preferredVersion"]["version"])
        for g in gateway.api_groups()["groups"]
    }


def test_by_default_both_kueue_versions_and_volcano_are_served(gateway: Gateway) -> None:
    served = groups(gateway)
    assert served["kueue.x-k8s.io"] == (["v1beta2", "v1beta1"], "v1beta2")
    assert served["scheduling.volcano.sh"] == (["v1beta1"], "v1beta1")
    assert gateway.list("kueue.x-k8s.io/v1beta1", "ClusterQueue") is not None


@pytest.mark.demo_cluster(served=Served(kueue=("v1beta1",), volcano=False))
def test_a_kueue_before_0_16_serves_v1beta1_alone(gateway: Gateway) -> None:
    served = groups(gateway)
    assert served["kueue.x-k8s.io"] == (["v1beta1"], "v1beta1")
    assert "scheduling.volcano.sh" not in served
    gateway.list("kueue.x-k8s.io/v1beta1", "ClusterQueue")
    with pytest.raises(NotFound, match="the server could not find the requested resource"):
        gateway.list("kueue.x-k8s.io/v1beta2", "ClusterQueue")
    with pytest.raises(NotFound):
        gateway.list("scheduling.volcano.sh/v1beta1", "PodGroup")


@pytest.mark.demo_cluster(served=Served(kueue=()))
def test_without_kueue_neither_its_group_nor_its_visibility_api_is_there(
    gateway: Gateway,
) -> None:
    served = groups(gateway)
    assert "kueue.x-k8s.io" not in served and "scheduling.volcano.sh" in served
    with pytest.raises(NotFound):
        gateway.pending_workloads("cq-train")
    with pytest.raises(NotFound):
        gateway.request("GET", "/apis/kueue.x-k8s.io")


SERVICE_ACCOUNT = "system:serviceaccount:quartermaster:quartermaster"


@pytest.mark.demo_cluster(
    users=lambda: {"portal-token": (SERVICE_ACCOUNT, cluster_role()["rules"])},
    token="admin-token",
)
def test_a_rules_review_answers_the_callers_rules_after_the_basic_users(
    demo_cluster: devcluster.DemoCluster,
) -> None:
    portal = connect(url=demo_cluster.url, token="portal-token")
    status = portal.rules_review("team-a")
    rules = status["resourceRules"]
    assert rules[0]["resources"] == ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]
    assert {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"]} in rules
    assert status["incomplete"] is False and status["nonResourceRules"][0]["verbs"] == ["get"]
    admin = connect(url=demo_cluster.url, token="admin-token").rules_review("default")
    assert admin["resourceRules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
    with pytest.raises(PermanentKubeError, match="no namespace on request"):
        portal.rules_review("")
    with pytest.raises(PermanentKubeError, match="Unauthorized"):
        connect(url=demo_cluster.url, token="nobody").rules_review("default")


def test_the_run_command_serves_what_its_flags_say(monkeypatch: Any) -> None:
    started: list[Any] = []

    def start(**kwargs: Any) -> Any:
        started.append(kwargs["served"])
        raise SystemExit(0)  # the test only reads what the command chose

    monkeypatch.setattr(command, "start", start)
    for argv in (
        ["--port", "0"],
        ["--port", "0", "--kueue", "v1beta2"],
        ["--port", "0", "--kueue", "v1beta1", "--no-volcano"],
        ["--port", "0", "--kueue", "none"],
    ):
        with pytest.raises(SystemExit):
            command.main(argv)
    assert started == [
        Served(),
        Served(kueue=("v1beta2",)),
        Served(kueue=("v1beta1",), volcano=False),
        Served(kueue=()),
    ]
