"""Why work waits is computed by the poll, once per cluster, and stored with the observed
rows: the pages and the API show what the last poll stored (never recomputed per page),
follow the fleet at the next poll, drop the words of what no longer waits, say so of a row
not explained yet, and never name another team's pods to a lead."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import ObservedPod, ObservedWorkload
from cluster.scope import settings_cluster_id
from diagnostics.estimate import Estimate
from diagnostics.explain import Explanation
from diagnostics.explainer import estimate_json, explain_cluster, from_json, why_json
from diagnostics.selectors import NOT_YET, explain_waiting
from loop import written as loop_written
from portal.vocabulary.names import PodNames
from tests.factories import NamespaceFactory, ObservedNodeFactory, ObservedPodFactory
from tests.support import EVERY_NAME, explained, written

pytestmark = pytest.mark.django_db
GPU = "nvidia.com/gpu"
SHORT = f"0/1 nodes are available: 1 Insufficient {GPU}."


def shown() -> Any:
    """The Pending pod ``train-0`` as a page shows it now (no explanation computed here)."""
    _, pods, _ = explain_waiting(["team-a"], cluster_id=settings_cluster_id(), names=EVERY_NAME)
    (pod,) = pods
    return pod


def test_the_explainer_is_what_the_loop_calls_after_writing_a_cluster() -> None:
    assert explain_cluster in loop_written._subscribers


def test_the_poll_stores_why_and_the_next_poll_follows_the_fleet() -> None:
    ObservedNodeFactory(name="gpu-node-a", allocatable={GPU: 8}, allocated={GPU: 8})
    ObservedPodFactory(
        name="train-0", phase="Pending", gpu_requests={GPU: 1}, pending_message=SHORT
    )
    assert shown().why == NOT_YET  # the rows were written without a poll's explanation
    written()
    full = shown().why.cause
    assert full == "All 8 gpu in the fleet are in use (0 free, the pod needs 1)."
    assert ObservedPod.objects.get(name="train-0").explained["why"]["cause"] == full
    ObservedNodeFactory(name="gpu-node-b", allocatable={GPU: 8}, allocated={GPU: 0})
    assert shown().why.cause == full  # as of the last poll, until the next one
    written()
    assert shown().why.cause != full


def test_what_no_longer_waits_loses_its_explanation() -> None:
    ObservedPodFactory(
        name="train-0", phase="Pending", gpu_requests={GPU: 1}, pending_message=SHORT
    )
    explained(["team-a"], settings_cluster_id())
    ObservedPod.objects.filter(name="train-0").update(phase="Running")
    written()
    assert ObservedPod.objects.get(name="train-0").explained is None


def test_another_teams_pod_in_the_clusters_words_is_not_named_to_a_lead(
    client: Client, team_a_admin: Any
) -> None:
    NamespaceFactory(name="team-a", team=team_a_admin.memberships.get().team)
    now = timezone.now()
    ObservedWorkload.objects.create(
        namespace="team-a",
        name="job-a",
        queue_name="team-a-train",
        message="Exceeded the PodsReady timeout team-b/job-of-b",
        evictions=1,
        evicted_reason="PodsReadyTimeout",
        evicted_at=now - dt.timedelta(seconds=20),
        created_at=now - dt.timedelta(hours=1),
        last_changed=now,
    )
    written()
    stored = ObservedWorkload.objects.get(name="job-a").explained
    assert "team-b/job-of-b" in stored["why"]["evidence"][0]  # stored as the cluster said it
    client.force_login(team_a_admin)
    (row,) = client.get("/api/v1/waiting/").json()
    assert row["evidence"] == ["Exceeded the PodsReady timeout another team's pod"]
    assert "job-of-b" not in client.get("/").content.decode()


def test_the_schedulers_counts_are_not_taken_for_pods() -> None:
    lead = PodNames(False, frozenset({(1, "team-a")}))
    said = "0/5000 nodes are available: 5000 Insufficient nvidia.com/gpu; team-b/job-x waits."
    assert lead.redact(said, 1) == (
        "0/5000 nodes are available: 5000 Insufficient nvidia.com/gpu; another team's pod waits."
    )


def test_what_is_stored_of_an_explanation_is_all_of_it() -> None:
    """The stored words are written out field by field (not by reflection): every field of an
    explanation and an estimate is there, as ``asdict`` gives it, and reads back the same."""
    why = Explanation(
        "cause", "next", {"label": "Ask", "url": "/x"}, ["one", "two"], "topic", "W", "never"
    )
    moment = dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.UTC)
    estimate = Estimate("soon", "basis", 60, 120, moment, moment + dt.timedelta(minutes=5))
    assert why_json(why) == asdict(why)
    stored = estimate_json(estimate)
    assert stored == {
        **asdict(estimate),
        "earliest": moment.isoformat(),
        "latest": stored["latest"],
    }
    assert from_json({"why": why_json(why), "estimate": stored}) == (why, estimate)
