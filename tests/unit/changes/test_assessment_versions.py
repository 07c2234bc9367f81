"""The stored assessments are typed and versioned: what a request stores reads back as the
same value, and a row stored in today's (version 1, unversioned) shape still reads, in the
services and pages that read it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from changes.impact import ASSESSMENT_VERSION, Assessment, Eviction, NodeChange, QueueChange
from changes.models import MigChangeRequest, QuotaChangeRequest
from changes.notify import payload
from changes.quota import QuotaAssessment, shown_fingerprint
from changes.views import needs_confirmation
from tenants.models import Team
from tests.factories import demo_quota_request

pytestmark = pytest.mark.django_db

# A MIG change's assessment as the portal stored it before it had a version.
STORED_V1: dict[str, Any] = {
    "verdict": "breaks_quota",
    "verdict_label": "Breaks quota",
    "drain": False,
    "reasons": ["cq-dev would promise 4 nvidia.com/mig-2g.20gb, its flavor offers 0."],
    "notes": [],
    "config": "all-3g.40gb",
    "nodes": [
        {
            "name": "gpu-a100-03",
            "model": "NVIDIA-A100-SXM4-80GB",
            "gpu_count": 8,
            "config_before": "all-balanced",
            "state_before": "success",
            "before": {"nvidia.com/mig-2g.20gb": 16},
            "after": {"nvidia.com/mig-3g.40gb": 16},
        }
    ],
    "capacity": [{"resource": "nvidia.com/mig-3g.40gb", "before": 0, "after": 16}],
    "queues": [
        {
            "flavor": "a100-80gb-balanced",
            "resource": "nvidia.com/mig-2g.20gb",
            "nominal": 4,
            "capacity_before": 16,
            "capacity_after": 0,
        }
    ],
    "proposed_queue_changes": [
        {
            "cluster_queue": "cq-dev",
            "flavor": "a100-80gb-balanced",
            "resource": "nvidia.com/mig-2g.20gb",
            "from": 4,
            "to": 0,
        }
    ],
    "evictions": [
        {
            "namespace": "team-a",
            "pod": "train-0",
            "node": "gpu-a100-03",
            "team": "team-a",
            "resources": {"nvidia.com/mig-2g.20gb": 1},
        }
    ],
    "schedulable": [],
    "fingerprint": "0123456789abcdef",
    "teams_hit": ["team-a"],
}


def test_a_stored_unversioned_assessment_reads_typed() -> None:
    read = Assessment.from_json(STORED_V1)
    assert read.version == 1
    assert read.nodes == [
        NodeChange(
            "gpu-a100-03",
            "NVIDIA-A100-SXM4-80GB",
            8,
            "all-balanced",
            "success",
            {"nvidia.com/mig-2g.20gb": 16},
            {"nvidia.com/mig-3g.40gb": 16},
        )
    ]
    assert read.proposed_queue_changes == [
        QueueChange("cq-dev", "a100-80gb-balanced", "nvidia.com/mig-2g.20gb", 4, 0)
    ]
    assert read.evictions == [
        Eviction("team-a", "train-0", "gpu-a100-03", "team-a", {"nvidia.com/mig-2g.20gb": 1})
    ]
    assert (read.fingerprint, read.teams_hit) == ("0123456789abcdef", ["team-a"])
    again = read.as_json()
    assert again["version"] == ASSESSMENT_VERSION
    assert Assessment.from_json(again) == Assessment.from_json({**STORED_V1, "version": 2})
    assert {k: v for k, v in again.items() if k != "version"} == {
        **STORED_V1,
        "evictions": [
            {
                **STORED_V1["evictions"][0],
                "outcome": "",
                "ends_work": None,
                "budget": "",
                "budget_allows": None,
            }
        ],
    }


def test_a_request_with_an_unversioned_assessment_is_read_by_its_readers(demo: None) -> None:
    request = MigChangeRequest.objects.create(
        team=Team.objects.get(slug="team-a"),
        requested_by=User.objects.get(username="lead-a"),
        nodes=["gpu-a100-03"],
        target_config="all-3g.40gb",
        reason="A test layout left behind.",
        assessment=STORED_V1,
        verdict="breaks_quota",
    )
    assert request.impact.fingerprint == "0123456789abcdef"
    assert needs_confirmation(request) == STORED_V1["reasons"]
    told = payload(request, "approved")
    assert "team-a/train-0 on gpu-a100-03" in told["evictions"]
    assert told["impact"] == STORED_V1["reasons"]
    assert Assessment.from_json({}).verdict == "blocked"  # a request never assessed


def test_a_quota_assessment_of_every_stored_shape_reads(demo: None) -> None:
    request = demo_quota_request()
    stored = request.assessment
    assert stored["version"] == 2
    read = QuotaAssessment.from_json(stored, request=request)
    assert read.to_json() == stored
    # version 1: no version; the oldest rows had no fingerprint either (made from values)
    old = {k: v for k, v in stored.items() if k not in ("version", "fingerprint")}
    QuotaChangeRequest.objects.filter(pk=request.pk).update(assessment=old)
    request.refresh_from_db()
    made = hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()[:16]
    assert shown_fingerprint(request) == made == stored["fingerprint"]
    browser = Client()  # the page reads the same row
    browser.force_login(User.objects.get(username="approver"))
    page = browser.get(f"/quota/{request.pk}/").content.decode()
    assert f'value="{made}"' in page and stored["notes"][0] in page
