"""A ClusterQueue quota request's cohort note and the what-if's borrowing table say two
different things that must not read as a contradiction: the note, who comes first for the
added nominal quota (the other members may borrow it while it is unused; once the queue
needs it, Kueue may preempt what they borrow of it); the table, each queue's own room to
borrow on the last poll's workloads (which the unused raise grows)."""

from __future__ import annotations

import html

import pytest
from django.contrib.auth.models import User
from django.test import Client

from changes.models import QuotaChangeRequest
from queues.models import ClusterQueue
from tests.factories import demo_quota_request

pytestmark = pytest.mark.django_db


def ask_cq_train(flavor: str, resource: str, requested: str) -> list[str]:
    request = demo_quota_request(
        kind="queue",
        namespace=None,
        cluster_queue=ClusterQueue.objects.get(name="cq-train"),
        flavor=flavor,
        resource=resource,
        requested=requested,
    )
    return [n for n in request.assessment["notes"] if n.startswith("Cohort ")]


def test_the_note_says_who_comes_first_not_that_the_others_borrow_less(demo: None) -> None:
    (note,) = ask_cq_train("h100-80gb", "nvidia.com/gpu", "14")
    assert note == (
        "Cohort ai-platform: cq-train's nominal quota grows by 2 nvidia.com/gpu on h100-80gb. "
        "While cq-train leaves it unused, cq-dev, cq-infer may borrow it (the borrowing "
        "table's room to borrow counts this on the last poll's workloads); once cq-train "
        "needs it, it comes first: it gets back what they borrow of it as their workloads "
        "end (its reclaimWithinCohort is Never: it preempts none of them)."
    )


def test_a_queue_that_reclaims_says_kueue_may_preempt(demo: None) -> None:
    ClusterQueue.objects.filter(name="cq-train").update(
        preemption_reclaim_within_cohort="LowerPriority"
    )
    (note,) = ask_cq_train("h100-80gb", "nvidia.com/gpu", "14")
    assert note.endswith(
        "it comes first: Kueue may preempt up to 2 of what they borrow to give it back "
        "(reclaimWithinCohort: LowerPriority)."
    )


def test_the_note_names_only_the_members_that_could_borrow_it(demo: None) -> None:
    # cq-dev has 3g.40gb slices only on the balanced flavor: it can borrow none on
    # a100-80gb-3g. A borrowing limit of 0 borrows nothing either.
    cq = ClusterQueue.objects.get(name="cq-infer")
    for group in cq.resource_groups:
        for flavor in group["flavors"]:
            for quota in flavor["resources"]:
                quota["borrowingLimit"] = "0"
    ClusterQueue.objects.filter(pk=cq.pk).update(resource_groups=cq.resource_groups)
    assert ask_cq_train("a100-80gb-3g", "nvidia.com/mig-3g.40gb", "26") == []
    (note,) = ask_cq_train("h100-80gb", "nvidia.com/gpu", "14")
    assert "While cq-train leaves it unused, cq-dev may borrow it" in note


def test_the_request_page_shows_both_without_contradiction(demo: None) -> None:
    ask_cq_train("h100-80gb", "nvidia.com/gpu", "14")
    client = Client()
    client.force_login(User.objects.get(username="approver"))
    pk = QuotaChangeRequest.objects.latest("pk").pk
    page = html.unescape(" ".join(client.get(f"/quota/{pk}/").content.decode().split()))
    assert "cq-dev, cq-infer may borrow it" in page
    assert "borrow up to 2 less" not in page
    # the table: cq-infer's own room to borrow grows while cq-train leaves the raise unused
    table = page[page.index('id="what-if-borrowing"') :]
    assert "Room left to borrow now → after" in table
    assert '<code>cq-infer</code></td><td class="head">h100-80gb</td>' in table
    assert "12 → 14" in table
    assert "Quota one member adds but leaves unused is room for the others." in table
