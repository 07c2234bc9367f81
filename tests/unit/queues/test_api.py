"""REST API of queues: ClusterQueue quotas replaced with a dry run first."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support import bearer

pytestmark = pytest.mark.django_db


def test_admins_replace_cluster_queue_quotas_with_a_dry_run_first(
    client: Client, fleet: None
) -> None:
    from portal.models import AuditEvent
    from queues.models import ClusterQueue

    read = client.get("/api/v1/cluster-queues/cq-train/", headers=bearer("admin"))
    etag = read["ETag"]
    groups = read.json()["resource_groups"]
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "14"
    url = "/api/v1/cluster-queues/cq-train/quotas/"
    # Team leads may read, not write.
    assert (
        client.put(
            url,
            {"resource_groups": groups},
            content_type="application/json",
            headers=bearer("lead-a"),
        ).status_code
        == 403
    )
    dry = client.put(
        url,
        {"resource_groups": groups, "dry_run": True},
        content_type="application/json",
        headers=bearer("admin"),
    )
    assert dry.status_code == 200
    assert "\n-        nominalQuota: '12'\n+        nominalQuota: '14'\n" in dry.json()["diff"]
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 12
    # The one observed node is an A100: nothing behind h100-80gb, now or in any layout.
    promise = next(p for p in dry.json()["promises"] if p["flavor"] == "h100-80gb")
    assert (promise["offered"], promise["promised"], promise["ceiling"]) == (0, 18, 0)
    assert len(dry.json()["refused"]) == 2
    refused = client.put(
        url,
        {"resource_groups": groups},
        content_type="application/json",
        headers={**bearer("admin"), "If-Match": etag},
    )
    assert refused.status_code == 400
    # The service's refusal, on the inputs that lift it.
    errors = refused.json()["errors"]
    assert "give the reason to promise beyond the fleet" in errors["override_reason"][0]
    assert "confirm to promise more than exists" in errors["promise_more_than_exists"][0]
    saved = client.put(
        url,
        {
            "resource_groups": groups,
            "override_reason": "H100 nodes arrive on Monday",
            "promise_more_than_exists": True,
        },
        content_type="application/json",
        headers={**bearer("admin"), "If-Match": etag},
    )
    assert saved.status_code == 200 and saved["ETag"] != etag
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 14
    saved_row = AuditEvent.objects.get(event="cluster_queue.saved", source="api")
    assert saved_row.new["override_reason"] == "H100 nodes arrive on Monday"  # in the one row
    # The old ETag no longer matches; bad quantities are field errors; nothing changes.
    stale = client.put(
        url,
        {"resource_groups": groups},
        content_type="application/json",
        headers={**bearer("admin"), "If-Match": etag},
    )
    assert stale.status_code == 412
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "-1"
    bad = client.put(
        url, {"resource_groups": groups}, content_type="application/json", headers=bearer("admin")
    )
    assert bad.status_code == 400
    assert bad.json()["errors"] == {
        "resource_groups": [
            "resourceGroups[0].flavors[0].resources[0].nominalQuota: must be greater than or equal to 0"
        ]
    }
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 14
