"""The admin writes flavors, cohorts and queues through ``queues.services`` only: a
ClusterQueue cannot promise beyond the fleet there without what the Queues page and the API
ask (the service's rule), LocalQueues edited inline are audited, and every valid edit writes
one audit row naming the admin."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from portal.models import AuditEvent
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from tests.admin_forms import (
    audited_since,
    change_url,
    edit_writes_one_row,
    form_data,
    inline_row,
    last_audit,
    page_text,
)
from tests.factories import demo_fleet_nodes

pytestmark = pytest.mark.django_db

H100 = ("h100-80gb", "nvidia.com/gpu")


def with_h100_quota(data: dict[str, Any], amount: str) -> dict[str, Any]:
    groups = json.loads(data["resource_groups"])
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = amount
    return {**data, "resource_groups": json.dumps(groups)}


def test_the_cluster_queue_admin_cannot_promise_beyond_the_fleet_without_a_reason(
    admin_site: Client,
) -> None:
    """16 H100 GPUs behind h100-80gb, now and in any layout: 30 needs the tick and the
    reason the Queues page asks for, from the same service."""
    demo_fleet_nodes()
    cq = ClusterQueue.objects.get(name="cq-train")
    url = change_url(cq)
    raised = with_h100_quota(form_data(admin_site, url), "30")
    before = last_audit()
    refused = admin_site.post(url, raised)
    assert refused.status_code == 200
    shown = page_text(refused)
    assert (
        "These quotas promise more than the nodes behind their flavor could ever offer, in "
        "any MIG layout: give the reason to promise beyond the fleet"
    ) in shown
    assert "Queues would promise more than the fleet offers behind these flavors" in shown
    cq.refresh_from_db()
    assert cq.quota()[H100] == 12
    assert audited_since(before) == []
    # The tick alone is not enough: beyond the ceiling needs the reason as well.
    ticked = admin_site.post(url, {**raised, "promise_more_than_exists": "on"})
    assert "give the reason to promise beyond the fleet" in page_text(ticked)
    assert "Queues would promise more than the fleet offers" not in page_text(ticked)
    assert ClusterQueue.objects.get(pk=cq.pk).quota()[H100] == 12
    saved = admin_site.post(
        url,
        {**raised, "promise_more_than_exists": "on", "override_reason": "Nodes arrive Monday."},
    )
    assert saved.status_code == 302
    assert ClusterQueue.objects.get(pk=cq.pk).quota()[H100] == 30
    assert audited_since(before) == [("cluster_queue.saved", "admin", "admin")]
    saved_row = AuditEvent.objects.latest("pk")
    assert saved_row.new["override_reason"] == "Nodes arrive Monday."  # in the one row


def test_lowering_a_queue_in_the_admin_asks_nothing(admin_site: Client) -> None:
    demo_fleet_nodes()
    cq = ClusterQueue.objects.get(name="cq-train")
    before = last_audit()
    saved = admin_site.post(
        change_url(cq), with_h100_quota(form_data(admin_site, change_url(cq)), "10")
    )
    assert saved.status_code == 302
    assert audited_since(before) == [("cluster_queue.saved", "admin", "admin")]


def test_a_local_queue_edited_on_its_cluster_queues_page_is_audited(
    admin_site: Client,
) -> None:
    cq = ClusterQueue.objects.get(name="cq-train")
    data = form_data(admin_site, change_url(cq))
    row = inline_row(data, "local_queues", "name", "team-b-train")
    assert row is not None
    before = last_audit()
    saved = admin_site.post(change_url(cq), {**data, f"{row}-description": "Vision."})
    assert saved.status_code == 302, page_text(saved)[-1500:]
    assert audited_since(before) == [("local_queue.saved", "admin", "admin")]
    assert LocalQueue.objects.get(name="team-b-train").description == "Vision."


@pytest.mark.parametrize(
    ("model", "lookup", "changes", "event"),
    [
        (ResourceFlavor, {"name": "h100-80gb"}, {"description": "H100s."}, "resource_flavor.saved"),
        (Cohort, {"name": "gpu-fleet"}, {"description": "Every GPU."}, "cohort.saved"),
        (ClusterQueue, {"name": "cq-dev"}, {"description": "Small slices."}, "cluster_queue.saved"),
        (LocalQueue, {"name": "dev-test"}, {"description": "Tests."}, "local_queue.saved"),
    ],
)
def test_a_valid_queue_edit_writes_one_audit_row_naming_the_admin(
    admin_site: Client, model: Any, lookup: dict[str, str], changes: dict[str, str], event: str
) -> None:
    edit_writes_one_row(admin_site, model.objects.get(**lookup), changes, event)


def test_an_invalid_flavor_is_refused_with_the_rules_message(admin_site: Client) -> None:
    flavor = ResourceFlavor.objects.get(name="h100-80gb")
    data = form_data(admin_site, change_url(flavor))
    before = last_audit()
    answer = admin_site.post(
        change_url(flavor), {**data, "node_labels": json.dumps({"bad key!": "x"})}
    )
    assert answer.status_code == 200
    assert "name part must consist of alphanumeric characters" in page_text(answer)
    flavor.refresh_from_db()
    assert "bad key!" not in flavor.node_labels
    assert audited_since(before) == []


def test_a_cluster_queues_delete_page_says_what_the_delete_does(admin_site: Client) -> None:
    """Before it asks: the quotas that go (and leave the cohort), what leaves the cluster."""
    cq = ClusterQueue.objects.get(name="cq-train")
    page = page_text(admin_site.get(f"/admin/queues/clusterqueue/{cq.pk}/delete/"))
    assert "What the delete does" in page
    assert "h100-80gb nvidia.com/gpu: the nominal quota of 12 goes and leaves cohort" in page
