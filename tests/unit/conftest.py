"""Fixtures of the unit tests: the demo scenario with the seed incident's node observed."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from tests.factories import ObservedNodeFactory, ObservedPodFactory


@pytest.fixture
def fleet(demo: None) -> None:
    now = timezone.now()
    ObservedNodeFactory(
        name="gpu-a100-03",
        gpu_product="NVIDIA-A100-SXM4-80GB",
        gpu_count=8,
        mig_config="all-balanced",
        mig_config_state="failed",
        labels={"quartermaster.io/pool": "train", "nvidia.com/mig.config": "all-balanced"},
        allocatable={"nvidia.com/mig-2g.20gb": "8", "nvidia.com/mig-1g.10gb": "16"},
        ready=True,
        first_seen=now,
        last_changed=now,
    )
    ObservedPodFactory(
        namespace="team-b",
        name="dev-test-1g",
        node_name="gpu-a100-03",
        phase="Running",
        gpu_requests={"nvidia.com/mig-1g.10gb": 4},
        last_changed=now,
    )


@pytest.fixture
def admin_site(client: Client, demo: None) -> Client:
    """The demo's platform admin (a superuser too), signed in to the Django admin."""
    client.force_login(User.objects.get(username="admin"))
    return client
