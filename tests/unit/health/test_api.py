"""REST API of GPU health."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from tests.support import bearer

pytestmark = pytest.mark.django_db


def test_gpu_health_names_only_your_teams_pods(client: Client, fleet: None) -> None:
    from cluster.models import Drift
    from health.models import NodeHealth

    NodeHealth.objects.create(
        node="gpu-a100-03",
        observed_at=timezone.now(),
        worst="critical",
        findings=[{"gpu": 0, "severity": "critical", "title": "GPU 0: Xid 48", "advice": "Drain."}],
        gpus=[
            {
                "index": 0,
                "xid": 48,
                "instances": [
                    {
                        "profile": "1g.10gb",
                        "instance": 1,
                        "namespace": "team-b",
                        "pod": "dev-test-1g",
                    },
                    {"profile": "1g.10gb", "instance": 2, "namespace": "team-a", "pod": "mine"},
                ],
            }
        ],
    )
    assert client.get("/api/v1/gpu-health/").status_code == 401
    (row,) = client.get("/api/v1/gpu-health/", headers=bearer("lead-a")).json()
    assert row["worst"] == "critical" and row["findings"][0]["title"] == "GPU 0: Xid 48"
    assert [(i["namespace"], i["pod"]) for i in row["gpus"][0]["instances"]] == [
        ("", "(another team's pod)"),
        ("team-a", "mine"),
    ]
    (row,) = client.get("/api/v1/gpu-health/?worst=critical", headers=bearer("approver")).json()
    assert row["gpus"][0]["instances"][0]["pod"] == "dev-test-1g"
    assert client.get("/api/v1/gpu-health/?worst=ok", headers=bearer("admin")).json() == []

    now = timezone.now()
    Drift.objects.create(
        kind="mig_layout",
        subject="gpu-a100-03",
        field="nvidia.com/mig.config",
        desired="all-3g.40gb",
        observed="all-balanced",
        first_seen=now,
        last_seen=now,
    )
    (drift,) = client.get("/api/v1/drift/", headers=bearer("member-a")).json()
    assert (drift["subject"], drift["intended"], drift["observed"]) == (
        "gpu-a100-03",
        "all-3g.40gb",
        "all-balanced",
    )
