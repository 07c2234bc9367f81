"""Samples taken from what the portal observes on the demo cluster, and the demo backfill."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

from usage.models import Rollup, Sample, WorkloadRecord
from usage.sampling import take_sample

pytestmark = pytest.mark.django_db


@pytest.fixture
def observed(portal_cluster: Any) -> None:
    """The demo fleet observed (applied and polled once)."""


def test_a_sample_of_the_demo_fleet(observed: None) -> None:
    assert take_sample(force=True) > 10
    assert take_sample() == 0  # not again within QM_SAMPLE_SECONDS
    team = {(s.owner, s.resource): s for s in Sample.objects.filter(kind="team")}
    gang = team[("team-b", "nvidia.com/gpu")]  # two running 4-GPU gang pods, two waiting
    assert (gang.used, gang.requested, gang.pending, gang.gpu_share) == (8, 16, 2, 8)
    filler = team[("team-b", "nvidia.com/mig-3g.40gb")]  # four fillers of 8 slices
    assert (filler.used, filler.gpu_share) == (32, 16.0)  # a 3g.40gb is half an A100
    waiting = team[("team-a", "nvidia.com/mig-3g.40gb")]
    assert (waiting.used, waiting.pending) == (0, 1)
    assert team[("team-a", "nvidia.com/gpu")].capacity == 16  # the namespace quota
    pools = {(s.owner, s.resource): s for s in Sample.objects.filter(kind="pool")}
    assert (pools[("h100", "nvidia.com/gpu")].capacity, pools[("h100", "nvidia.com/gpu")].used) == (
        16,
        8,
    )
    queues = {(s.owner, s.flavor, s.resource): s for s in Sample.objects.filter(kind="queue")}
    assert queues[("cq-train", "h100-80gb", "nvidia.com/gpu")].capacity == 12
    assert WorkloadRecord.objects.filter(cluster_queue="cq-train").exists()


def test_the_demo_backfill_makes_charts_at_once(observed: None) -> None:
    call_command("backfill_usage", "--days", "3")
    assert Rollup.objects.filter(period="day").exists()
    assert Rollup.objects.filter(period="hour", kind="team", owner="team-a").exists()
    assert WorkloadRecord.objects.filter(namespace="backfill").count() > 10
    call_command("backfill_usage", "--days", "3")  # once only
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username="lead-a"))
    page = client.get("/reports/?days=7").content.decode()
    assert 'aria-label="team-a: nvidia.com/gpu in use against the quota' in page


@pytest.mark.django_db(transaction=True)
def test_the_task_samples_after_a_poll_outside_any_transaction(observed: None) -> None:
    """The worker calls it with no transaction open (a locking read there is refused)."""
    from usage.tasks import take_sample_task

    assert take_sample_task() > 10
    assert take_sample_task() == 0  # no poll since the last sample
