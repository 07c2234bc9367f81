"""A team whose queue can admit nothing is told so on its home, in words, with who can change
it; a quota of 0 that the cohort can lend is not nothing (the demo's seed fix leaves cq-dev
at 0 of its MIG slices, while it may still borrow idle H100 GPUs)."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from cluster.models import ObservedObject
from queues.models import ClusterQueue
from queues.rules import quota_entries
from queues.services import save_cluster_queue

pytestmark = pytest.mark.django_db
WARNING = "can be admitted:"


def set_cq_dev(*, h100_borrowing: str | None = "10", cohort: bool = True, **more: Any) -> None:
    """cq-dev as the seed fix leaves it (0 of each MIG slice), through the queues' service."""
    cq = ClusterQueue.objects.get(name="cq-dev")
    for _, flavor, quota in quota_entries(cq.resource_groups):
        quota["nominalQuota"] = "0"
        if flavor == "h100-80gb":
            if h100_borrowing is None:
                quota.pop("borrowingLimit", None)
            else:
                quota["borrowingLimit"] = h100_borrowing
    if not cohort:
        cq.cohort = None
    for key, value in more.items():
        setattr(cq, key, value)
    save_cluster_queue(actor=User.objects.get(username="admin"), cluster_queue=cq, source="ui")


def home(status: dict[str, Any] | None = None, *, observe: bool = True) -> str:
    if observe:
        ObservedObject.objects.create(
            api_version="kueue.x-k8s.io/v1beta2",
            kind="ClusterQueue",
            name="cq-dev",
            status=status or {"flavorsUsage": []},
            last_seen=timezone.now(),
        )
    client = Client()
    client.force_login(User.objects.get(username="viewer-dev"))
    response = client.get("/")
    assert response.status_code == 200
    return html.unescape(" ".join(response.content.decode().split()))


def test_after_the_seed_fix_the_slices_admit_none_and_the_h100_borrowing_is_said(
    demo: None,
) -> None:
    set_cq_dev()
    page = home()
    assert page.count("admits none: a nominal quota of 0 and nothing to borrow") == 3
    assert "may borrow up to 10 in all from its cohort, of what the others leave unused" in page
    assert WARNING not in page  # it can still borrow H100 GPUs


def test_a_queue_with_nothing_to_borrow_says_nothing_can_be_admitted(demo: None) -> None:
    set_cq_dev(h100_borrowing="0")
    page = home()
    assert page.count("admits none: a nominal quota of 0 and nothing to borrow") == 4
    assert (
        "No workload submitted to <code>dev-test</code> can be admitted:</strong> "
        "ClusterQueue cq-dev has a nominal quota of 0 of every resource, and its cohort has "
        "none of it to lend (or its borrowing limit is 0)." in page
    )
    assert "only a platform admin can change it: ask your team lead or a platform admin" in page


def test_a_queue_in_no_cohort_at_0_admits_nothing(demo: None) -> None:
    set_cq_dev(h100_borrowing=None, cohort=False)
    page = home()
    assert "in no cohort, so it has nothing to borrow." in page
    assert WARNING in page


def test_a_stopped_queue_admits_nothing(demo: None) -> None:
    set_cq_dev(stop_policy="Hold")
    assert "ClusterQueue cq-dev is stopped (Hold (admit nothing new))." in home()


def test_an_inactive_queue_admits_nothing(demo: None) -> None:
    inactive = {
        "flavorsUsage": [],
        "conditions": [
            {
                "type": "Active",
                "status": "False",
                "reason": "FlavorNotFound",
                "message": "Can't admit new workloads: references missing ResourceFlavor(s).",
            }
        ],
    }
    assert (
        "ClusterQueue cq-dev is inactive: Can't admit new workloads: references missing "
        "ResourceFlavor(s)." in home(inactive)
    )


def test_one_who_may_ask_gets_a_quota_request_for_the_queue(demo: None) -> None:
    set_cq_dev(h100_borrowing="0")
    ObservedObject.objects.create(
        api_version="kueue.x-k8s.io/v1beta2",
        kind="ClusterQueue",
        name="cq-dev",
        status={"flavorsUsage": []},
        last_seen=timezone.now(),
    )
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    page = html.unescape(client.get("/").content.decode())
    link = "/quota/new/?team=team-dev&cluster_queue=cq-dev&cluster=default"
    assert f'only a platform admin can change it: <a href="{link}">ask for quota</a>' in page
    form = client.get(link).content.decode()
    cq = ClusterQueue.objects.get(name="cq-dev")
    assert f'<option value="{cq.pk}" selected>' in form
    assert '<option value="queue" selected>' in form


def test_the_room_to_borrow_is_what_the_rest_of_the_cohort_lends(demo: None) -> None:
    """With no borrowing limit, the room is every other queue's nominal quota of the
    resource in the cohort, or its lending limit where lower (each counted as often as it
    is written: the database counts equal amounts once)."""
    set_cq_dev(h100_borrowing=None)
    dev = ClusterQueue.objects.get(name="cq-dev")
    lenders = list(ClusterQueue.objects.filter(cohort=dev.cohort).exclude(pk=dev.pk))
    extra = ClusterQueue.objects.get(pk=lenders[-1].pk)  # a third lender like the second
    extra.pk, extra.name = None, "cq-lends-too"
    lenders.append(extra)
    for index, lender in enumerate(lenders):  # equal amounts, and one lending limit below
        for _, flavor, quota in quota_entries(lender.resource_groups):
            if flavor == "h100-80gb" and quota["name"] == "nvidia.com/gpu":
                quota["nominalQuota"] = "2"
                if index == 0:
                    quota["lendingLimit"] = "1"
        save_cluster_queue(
            actor=User.objects.get(username="admin"),
            cluster_queue=lender,
            source="ui",
            override_reason="the test's cohort",
        )
    lends = 0
    for queue in [ClusterQueue.objects.get(pk=q.pk) for q in lenders]:
        for _, flavor, quota in quota_entries(queue.resource_groups):
            if flavor == "h100-80gb" and quota["name"] == "nvidia.com/gpu":
                nominal = int(quota["nominalQuota"])
                limit = quota.get("lendingLimit")
                lends += nominal if limit is None else min(nominal, int(limit))
    assert len(lenders) >= 3 and lends == 1 + 2 * (len(lenders) - 1)
    assert f"may borrow up to {lends} in all from its cohort" in home()


def h100_lent(dev: ClusterQueue) -> int:
    """The H100 GPUs the other queues of cq-dev's cohort lend (none has a lending limit)."""
    return sum(
        int(quota["nominalQuota"])
        for queue in ClusterQueue.objects.filter(cohort=dev.cohort).exclude(pk=dev.pk)
        for _, flavor, quota in quota_entries(queue.resource_groups)
        if flavor == "h100-80gb" and quota["name"] == "nvidia.com/gpu"
    )


def test_the_room_to_borrow_follows_a_lender_changed_between_visits(demo: None) -> None:
    """What the cohort lends is kept in the process between visits under the version of
    the cohort trees: a lender's quota changed since shows on the next visit."""
    set_cq_dev(h100_borrowing=None)
    dev = ClusterQueue.objects.get(name="cq-dev")
    before = h100_lent(dev)
    assert f"may borrow up to {before} in all from its cohort" in home()
    lender = ClusterQueue.objects.filter(cohort=dev.cohort).exclude(pk=dev.pk).first()
    assert lender is not None
    for _, flavor, quota in quota_entries(lender.resource_groups):
        if flavor == "h100-80gb" and quota["name"] == "nvidia.com/gpu":
            quota["nominalQuota"] = str(int(quota["nominalQuota"]) + 37)
    save_cluster_queue(
        actor=User.objects.get(username="admin"),
        cluster_queue=lender,
        source="ui",
        override_reason="the test's cohort",
    )
    assert h100_lent(dev) == before + 37
    page = home(observe=False)
    assert f"may borrow up to {before + 37} in all from its cohort" in page
    assert f"may borrow up to {before} in all" not in page
