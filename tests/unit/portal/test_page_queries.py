"""The main pages run a fixed number of SQL queries whatever the amount of data: measured
at two data sizes (the demo, then the demo with many more teams, nodes, pods, Kueue
workloads and requests) and compared. Among them every page the scale scenario measures
(bench/pages.py --scale): the home of a lead whose team has tens of waiting workloads, the
Queues page (every queue, and one cohort open), a ClusterQueue's page, the workloads list, the approver's workspace and the
Fleet page."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from changes.models import QuotaChangeRequest
from cluster.models import ObservedNode, ObservedWorkload
from portal.models import AuditEvent
from queues.models import ClusterQueue, LocalQueue
from tenants.models import LimitRangeItem, Membership, Namespace, PriorityClass, QuotaItem, Team
from tests.factories import MigChangeRequestFactory, ObservedNodeFactory, ObservedPodFactory

pytestmark = pytest.mark.django_db

TRAIN = {"quartermaster.io/pool": "train"}
PAGES = {
    "/": ("lead-a", "admin"),
    "/fleet/": ("lead-a",),
    "/fleet/nodes/?pool=train": ("lead-a", "admin"),
    "/changes/": ("lead-a", "approver"),
    "/quota/": ("lead-a", "admin"),
    "/audit/": ("lead-a", "admin"),
    "/queues/": ("lead-a", "admin"),
    "/queues/?cohort=ai-platform": ("lead-a", "admin"),  # one cohort open
    "/queues/cluster-queues/cq-train/edit/": ("admin",),
    "/workloads/": ("lead-a", "admin"),
    "/workspace/": ("approver", "admin"),
}
GPU = "nvidia.com/gpu"


def trained() -> str:
    """The number of nodes in the train pool, as the Fleet page writes it."""
    train = ObservedNode.objects.filter(gone_since__isnull=True, labels__contains=TRAIN)
    return f"{train.count():,}"


def grow(size: int, start: int) -> None:
    """Add ``size`` teams (a namespace each, quota, limits, lead-a as a member of all of
    them), ``size`` GPU nodes with a pending pod each, ``size`` requests of each kind, and
    per team three Kueue workloads: one of team-a waiting in cq-train, one admitted there,
    one waiting in the team's own queue."""
    now = timezone.now()
    lead = User.objects.get(username="lead-a")
    admin = User.objects.get(username="admin")
    classes = list(PriorityClass.objects.all())
    for index in range(start, start + size):
        team = Team.objects.create(slug=f"grown-{index}", name=f"Grown {index}")
        team.allowed_priority_classes.set(classes)
        Membership.objects.create(user=lead, team=team, role="lead")
        ns = Namespace.objects.create(name=f"grown-{index}", team=team)
        QuotaItem.objects.create(namespace=ns, resource="requests.nvidia.com/gpu", hard="4")
        QuotaItem.objects.create(namespace=ns, resource="pods", hard="10")
        LimitRangeItem.objects.create(
            namespace=ns, limit_type="Container", resource="cpu", default="1"
        )
        cq = ClusterQueue.objects.create(name=f"grown-cq-{index}")
        LocalQueue.objects.create(name=f"grown-lq-{index}", namespace=ns, cluster_queue=cq)
        node = f"grown-node-{index}"
        ObservedNodeFactory(
            name=node,
            gpu_product="NVIDIA-A100-SXM4-80GB",
            gpu_count=8,
            mig_config="all-3g.40gb",
            mig_config_state="success",
            pool_label="train",
            labels={"quartermaster.io/pool": "train", "nvidia.com/mig.config": "all-3g.40gb"},
            allocatable={"nvidia.com/mig-3g.40gb": 16},
            capacity={"nvidia.com/mig-3g.40gb": 16},
            first_seen=now,
            last_changed=now,
            ready=True,
        )
        ObservedPodFactory(
            namespace=ns.name,
            name=f"waiting-{index}",
            phase="Pending",
            gpu_requests={"nvidia.com/gpu": 1},
            pending_reason="Unschedulable",
            pending_message="0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
            last_changed=now,
        )
        MigChangeRequestFactory(
            team=team,
            requested_by=lead,
            nodes=[node],
            target_config="all-balanced",
            reason="grown",
            assessment={"verdict": "safe"},
            verdict="safe",
        )
        AuditEvent.objects.create(
            actor=lead,
            actor_name="lead-a",
            team=team,
            event="quota_request.created",
            target_type="QuotaChangeRequest",
            target_repr=f"grown-{index}",
            source="ui",
        )
        QuotaChangeRequest.objects.create(
            team=team,
            requested_by=lead,
            kind="namespace",
            namespace=ns,
            resource="pods",
            previous="10",
            requested="20",
            reason="grown",
            decided_by=admin if index % 2 else None,
        )
        workloads(index, ns.name, now)


def workloads(index: int, namespace: str, now: dt.datetime) -> None:
    """A waiting and an admitted workload of team-a in cq-train, one waiting in
    ``namespace``'s own queue."""
    ObservedWorkload.objects.bulk_create(
        ObservedWorkload(
            namespace=ns,
            name=name,
            queue_name=queue,
            cluster_queue="cq-train" if admitted else "",
            admitted=admitted,
            requests={GPU: 1},
            flavors={GPU: "h100-80gb"} if admitted else {},
            created_at=now - dt.timedelta(minutes=index),
            admitted_at=now if admitted else None,
            last_changed=now,
        )
        for ns, name, queue, admitted in (
            ("team-a", f"wait-{index}", "team-a-train", False),
            ("team-a", f"run-{index}", "team-a-train", True),
            (namespace, f"own-{index}", f"grown-lq-{index}", False),
        )
    )


def count(page: str, user: str, *shows: str) -> int:
    client = Client()
    client.force_login(User.objects.get(username=user))
    with CaptureQueriesContext(connection) as queries:
        response = client.get(page)
    assert response.status_code == 200, (page, user)
    for shown in shows:
        assert shown in response.content.decode(), (page, user, shown)
    return len(queries)


def always(shown: str | tuple[str, ...]) -> tuple[str, ...]:
    return shown if isinstance(shown, tuple) else (shown,)


def test_query_counts_do_not_grow_with_data(demo: None) -> None:
    grow(3, 0)
    small = {(page, user): count(page, user) for page, users in PAGES.items() for user in users}
    grow(40, 3)
    # the pages do show the grown data (the last team, node, pod or request)
    shown: dict[str, str | tuple[str, ...]] = {
        "/": ("waiting-42", "wait-42"),  # a pending pod, a waiting workload of team-a
        # each pool summed up: the grown nodes are counted in the train pool's card
        "/fleet/": f"<strong>{trained()} nodes</strong>",
        "/fleet/nodes/?pool=train": "grown-node-42",
        "/changes/": "grown-42",
        "/quota/": "grown-42",
        "/audit/": "grown-42",
        "/queues/": "grown-lq-42",
        "/queues/?cohort=ai-platform": 'id="cluster-queue-cq-train-title"',
        "/queues/cluster-queues/cq-train/edit/": "cq-train",
        "/workloads/": "wait-3",  # the newest first
        "/workspace/": 'id="decisions-count">86<',  # 43 MIG changes, 43 quota requests
    }
    large = {
        (page, user): count(page, user, *always(shown[page]))
        for page, users in PAGES.items()
        for user in users
    }
    assert large == small
    assert max(small.values()) <= 40, small


def test_request_lists_are_paginated(demo: None) -> None:
    grow(55, 0)
    client = Client()
    client.force_login(User.objects.get(username="lead-a"))
    for page in ("/changes/", "/quota/"):
        first = client.get(page).content.decode()
        assert "Page 1 of 2" in first and "Older →" in first
        assert "grown-54" in first and "grown-0<" not in first
        second = client.get(page + "?page=2").content.decode()
        assert "Page 2 of 2" in second and "← Newer" in second
