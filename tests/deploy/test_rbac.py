"""The ClusterRole under deploy/ grants exactly what the portal uses: the whole cluster loop
runs against the demo cluster as a user bound to nothing but the rendered rules, and every
request it made is compared with what the rules grant (both ways)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

import devcluster
from changes import mig as changes
from changes.executor import advance
from changes.mig_policy import approve_mig_policy_change, offered_profiles, propose_mig_policy
from changes.models import MigChangeRequest
from cluster.models import AppliedObject, ObservedCreateFailure, SyncRun
from cluster.services import settings_cluster
from devcluster import dra
from devcluster.rbac import granted
from diagnostics.operator_check import check_gpu_operator
from health.services import collect_gpu_health
from idle.enforce import enforce_idle_policy
from idle.models import IdlePolicy, IdleSpell
from kube import Gateway, connect
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from tenants.models import Namespace, PriorityClass, Team
from tests.deploy.conftest import cluster_role
from tests.support import run_job_on_node, wait_for

pytestmark = pytest.mark.django_db
SERVICE_ACCOUNT = "system:serviceaccount:quartermaster:quartermaster"


def test_the_cluster_role_has_no_wildcards_and_reads_no_secrets() -> None:
    rules = cluster_role()["rules"]
    for rule in rules:
        assert "nonResourceURLs" not in rule
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
            assert not any("*" in value for value in rule[key]), rule
    resources = {r for rule in rules for r in rule["resources"]}
    assert not resources & {"secrets", "serviceaccounts", "clusterroles"}
    # One ConfigMap only, by name, read only: Kueue's Configuration (its DRA mappings).
    for rule in rules:
        if "configmaps" in rule["resources"]:
            assert rule["resources"] == ["configmaps"], rule
            assert rule["resourceNames"] == ["kueue-manager-config"], rule
            assert rule["verbs"] == ["get"], rule
    verbs = {v for rule in rules for v in rule["verbs"]}
    assert not verbs & {"escalate", "bind", "impersonate", "deletecollection", "update"}


@pytest.fixture
def portal_as_service_account(
    settings: Any, demo_cluster: devcluster.DemoCluster
) -> tuple[Gateway, devcluster.DemoCluster]:
    """The portal talking to a demo cluster as a user bound to the ClusterRole alone."""
    settings.KUBE_URL = demo_cluster.url
    settings.KUBE_TOKEN = "portal-token"
    settings.QM_MIG_POLL_SECONDS = 0
    return connect(url=demo_cluster.url, token="portal-token"), demo_cluster


def run_mig_change(gateway: Gateway) -> MigChangeRequest:
    lead = User.objects.get(username="lead-a")
    request = changes.request_mig_change(
        actor=lead,
        team=Team.objects.get(slug="team-a"),
        nodes=["gpu-a100-03"],
        target_config="all-3g.40gb",
        reason="Back to the pool's layout.",
    )
    changes.approve_mig_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    wait_for(
        lambda: advance(request.pk, gateway=gateway).kind != "wait",
        timeout=20,
        what="the MIG change to settle",
    )
    request.refresh_from_db()
    return request


def suspend_an_idle_workload(gateway: Gateway) -> str:
    """team-a's pretraining found idle past the grace of a policy that is on, suspended."""
    team, now = Team.objects.get(slug="team-a"), timezone.now()
    IdlePolicy.objects.update_or_create(
        team=team, defaults={"state": IdlePolicy.State.ON, "grace_minutes": 10}
    )
    spell = IdleSpell.objects.create(
        cluster=settings_cluster(),
        team=team,
        namespace="team-a",
        workload="job-llm-pretrain",
        pod="job-llm-pretrain-0",
        gpus=8,
        threshold=5.0,
        idle_since=now - dt.timedelta(minutes=30),
        found_at=now - dt.timedelta(minutes=20),
        last_seen=now,
    )
    assert enforce_idle_policy(cluster=spell.cluster, gateway=gateway, now=now) == [spell.pk]
    return IdleSpell.objects.get(suspended_at=now).workload


def govern_mig(gateway: Gateway, demo: devcluster.DemoCluster) -> None:
    """The cluster's MIG policy governed (a profile its DRA GPUs publish granted to team-a),
    the grant changed, then the policy given up: each approved and applied by the loop. The
    seed's cluster publishes no GPU through DRA: one A100 node's driver does here."""
    with demo.cluster.lock:
        for item in dra.node_slices("gpu-dra-01", "NVIDIA A100-SXM4-80GB", 1):
            demo.cluster.create(dra.SLICES, "", item, manager="gpu-kubelet-plugin")
    poll_cluster(gateway=gateway)
    cluster = settings_cluster()
    admin, approver = User.objects.get(username="admin"), User.objects.get(username="approver")
    profile = offered_profiles(cluster)[0]
    for governed, devices in ((True, 1), (True, 2), (False, 0)):
        grants = (
            [{"namespace": "team-a", "profile": profile, "devices": devices}] if governed else []
        )
        change = propose_mig_policy(
            actor=admin, cluster=cluster, governed=governed, grants=grants, reason="the test"
        )
        approve_mig_policy_change(request_id=change.pk, approver=approver)
        report = apply_desired_state(gateway=gateway, full=True)
        assert not report.failed, report.failed


@pytest.mark.demo_cluster(
    users=lambda: {"portal-token": (SERVICE_ACCOUNT, cluster_role()["rules"])}
)
def test_the_cluster_loop_needs_exactly_the_cluster_role(
    settings: Any, demo: None, portal_as_service_account: tuple[Gateway, devcluster.DemoCluster]
) -> None:
    gateway, cluster = portal_as_service_account
    subject = cluster.api.users["portal-token"]

    # Desired state reaches the cluster (create), changes reach it again (patch).
    report = apply_desired_state(gateway=gateway)
    assert not report.failed, report.failed
    poll_cluster(gateway=gateway)
    assert SyncRun.objects.latest("started_at").error == ""
    # The Job whose second pod the quota refuses: the poll reads it (a FailedCreate event
    # outlives its Job, its explanation must not).
    wait_for(
        lambda: (
            poll_cluster(gateway=gateway)
            and ObservedCreateFailure.objects.filter(kind="Job", name="eval-sweep").exists()
        )
    )
    namespace = Namespace.objects.get(name="team-a")
    namespace.quota_items.filter(resource="pods").update(hard="60")
    assert apply_desired_state(gateway=gateway, full=True).failed == []

    # The GPU Operator check, and a MIG change: its assessment reads the budgets and the Job
    # of the pods it evicts, then label, cordon, list pods, evict, uncordon.
    run_job_on_node(cluster, "dev-sweep", "team-b", "gpu-a100-03")
    checks = {i.name: i for i in check_gpu_operator(gateway, namespace="gpu-operator")}
    assert checks["DCGM exporter runs on every GPU node"].ok
    # GPU health through the exporters' pod proxy.
    health = collect_gpu_health(gateway)
    assert health["nodes"] == 5 and health["unreadable"] == 0
    assert run_mig_change(gateway).state == "succeeded"
    # The idle policy suspends a workload found idle: it reads the Workload, then deactivates it.
    assert suspend_an_idle_workload(gateway) == "job-llm-pretrain"
    # A governed MIG policy: its per-profile DeviceClasses created, changed, then removed.
    govern_mig(gateway, cluster)

    # Volcano instead of Kueue: the Kueue objects go, the Volcano queues come.
    settings.QM_QUEUE_BACKEND = "volcano"
    report = apply_desired_state(gateway=gateway, full=True)
    assert not report.failed and report.removed
    poll_cluster(gateway=gateway)

    # Everything removed from the portal is removed from the cluster.
    settings.QM_QUEUE_BACKEND = "kueue"
    apply_desired_state(gateway=gateway, full=True)
    LocalQueue.objects.all().delete()
    ClusterQueue.objects.all().delete()
    while Cohort.objects.exists():  # the demo's cohorts nest: children (leaves) first
        Cohort.objects.filter(children__isnull=True).delete()
    ResourceFlavor.objects.all().delete()
    Namespace.objects.all().delete()
    PriorityClass.objects.all().delete()
    report = apply_desired_state(gateway=gateway, full=True)
    assert not report.failed
    assert AppliedObject.objects.count() == 0

    assert subject.denied == []
    # The demo cluster serves no GPU Operator CRD: its ClusterPolicies are read only where
    # the nvidia.com group is served (tests/unit/cluster/test_discovery.py). It does serve
    # resource.k8s.io (devcluster/dra.py), so the poll's DRA lists are asked as this role.
    assert subject.asked == granted(cluster_role()["rules"]) - {
        ("list", "nvidia.com", "clusterpolicies"),
    }
