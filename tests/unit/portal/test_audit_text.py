"""What a person reads of an audit row: per-field changes, human labels and object links,
over the shapes the services really record."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from changes.quota import approve_quota_change, request_quota_change
from portal.audit.text import Change, Link, audit_changes, changes_text, event_label, target_link
from portal.models import AuditEvent
from queues.models import ClusterQueue
from tenants.models import Namespace, Team
from tenants.rules import LimitSpec
from tenants.services import set_namespace_limits, set_namespace_quota
from tests.factories import demo_fleet_nodes


def texts(event: str, old: Any, new: Any) -> list[str]:
    return [change.text for change in audit_changes(event, old, new)]


# Every event recorded has a label: the enum keeps them together (test_audit_events).


@pytest.mark.parametrize(
    ("event", "label"),
    [
        ("quota_change.approved", "Quota request approved"),
        ("mig_change.reassessed", "MIG change re-assessed at the decision (approval refused)"),
        ("mig_change.abort_requested", "Abort of a MIG change requested"),
        ("quota_change.reassessed", "Quota request reassessed (the quota changed)"),
        # the admin's events are named by the model
        ("clusterqueue.changed", "ClusterQueue changed"),
        ("limitrangeitem.deleted", "Limit item deleted"),
        ("quota_request.created", "Quota request created"),
        ("something_new.was_done", "Something new was done"),
    ],
)
def test_an_event_reads_as_its_label_or_its_words(event: str, label: str) -> None:
    assert event_label(event) == label


def test_a_namespace_quota_edit_reads_per_resource() -> None:
    old = {"requests.nvidia.com/gpu": "16", "pods": "10"}
    new = {"requests.nvidia.com/gpu": "24", "limits.cpu": "8"}
    assert texts("quota.changed", old, new) == [
        "requests.nvidia.com/gpu: 16 → 24",
        "pods: 10 (removed)",
        "limits.cpu: 8 (added)",
    ]


def test_nested_values_flatten_into_paths_and_lists_stay_compact() -> None:
    old = {"namespace_selector": {"matchLabels": {"team": "a"}}, "teams": [1, 2], "on": True}
    new = {"namespace_selector": {"matchLabels": {"team": "b"}}, "teams": [1, 3], "on": False}
    assert texts("priorityclass.changed", old, new) == [
        "namespace selector / matchLabels / team: a → b",
        "teams: 1, 2 → 1, 3",
        "on: yes → no",
    ]
    many = list(range(14))
    assert texts("x.y", None, {"nodes": many}) == ["nodes: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 4 more"]


def test_empty_values_read_as_not_set_and_never_as_a_dictionary() -> None:
    changes = texts("cluster_queue.saved", {"sel": None, "d": ""}, {"sel": {}, "d": "Dev"})
    assert changes == ["sel: not set → (empty)", "d: not set → Dev"]
    # a list of mappings without names reads as key=value pairs
    assert texts("x.y", None, {"items": [{"a": 1}, {"a": 2}]}) == ["items: a=1, a=2"]


def test_a_creation_lists_what_was_set_and_a_deletion_what_was_there() -> None:
    created = {"id": 4, "name": "ml", "description": ""}
    assert texts("namespace.created", None, created) == ["name: ml"]
    assert texts("namespace.deleted", {"name": "ml", "team": "team-a"}, None) == [
        "name: ml",
        "team: team-a",
    ]
    assert audit_changes("api_token.revoked", None, None) == []


@pytest.mark.parametrize(
    ("event", "old", "new", "lines"),
    [
        (
            "mig_change.requested",
            None,
            {"nodes": ["gpu-a100-01"], "target_config": "all-balanced", "verdict": "safe"},
            ["nodes: gpu-a100-01", "target config: all-balanced", "verdict: Safe"],
        ),
        (
            "mig_change.abort_requested",
            None,
            {"state": "running"},
            ["state: running"],
        ),
        (
            "mig_change.rollback",
            None,
            {"configs": {"gpu-a100-01": "all-3g.40gb"}},
            ["configs / gpu-a100-01: all-3g.40gb"],
        ),
        (
            "mig_change.step.failed",
            None,
            {"node": "gpu-a100-01", "step": "evict", "round": "apply", "message": "PDB"},
            ["node: gpu-a100-01", "step: evict", "round: apply", "message: PDB"],
        ),
        (
            "quota_change.cancelled",
            {"value": "16"},
            {"value": "16", "requested": "24"},
            ["requested: 24"],
        ),
        (
            "quota_change.requested",
            {"value": ""},
            {"value": "40", "until": ""},
            ["quota: not set → 40"],
        ),
        (
            "quota_change.revert_skipped",
            {"value": "30"},
            {"value": "30", "note": "changed since the grant; left as it is"},
            ["note: changed since the grant; left as it is"],
        ),
        (
            "membership.changed",
            {"team": "team-a", "role": "member", "granted_by": "manual"},
            {"team": "team-a", "role": "lead"},
            ["role: member → lead", "granted by: manual (removed)"],
        ),
    ],
)
def test_events_that_record_facts_list_them(
    event: str, old: Any, new: Any, lines: list[str]
) -> None:
    assert texts(event, old, new) == lines


def test_a_change_says_its_kind() -> None:
    changes = audit_changes("quota.changed", {"a": "1", "b": "2"}, {"a": "3", "c": "4"})
    assert changes == [
        Change("a", "changed", "1", "3"),
        Change("b", "removed", old="2"),
        Change("c", "added", new="4"),
    ]
    assert changes_text(changes) == "a: 1 → 3; b: 2 (removed); c: 4 (added)"


@pytest.mark.parametrize(
    ("target_type", "target_id", "link"),
    [
        ("changes.migchangerequest", "7", Link("change-detail", ("7",))),
        ("changes.quotachangerequest", "3", Link("quota-detail", ("3",))),
        ("tenants.team", "2", Link("home", (), "team-2-summary")),
        ("tenants.namespace", "5", Link("home", (), "namespace-5-title")),
        ("queues.clusterqueue", "4", Link("queues", (), "cluster-queue-4-title")),
        ("auth.user", "1", None),
        ("changes.migchangerequest", "", None),
        ("", "", None),
    ],
)
def test_an_object_links_to_its_page(target_type: str, target_id: str, link: Link | None) -> None:
    assert target_link(target_type, target_id) == link


# ----------------------------------------------------------------------- recorded rows


def admin() -> User:
    return User.objects.get(username="admin")


def last(event: str) -> AuditEvent:
    return AuditEvent.objects.filter(event=event).latest("id")


def readable(row: AuditEvent) -> list[str]:
    return texts(row.event, row.old, row.new)


@pytest.mark.django_db
def test_a_recorded_namespace_quota_edit_reads_per_resource(demo: None) -> None:
    namespace = Namespace.objects.get(name="team-a")
    hard = dict(namespace.quota_items.values_list("resource", "hard"))
    set_namespace_quota(
        actor=admin(),
        namespace=namespace,
        hard={**hard, "requests.nvidia.com/gpu": "24"},
        source="web",
    )
    assert readable(last("quota.changed")) == ["requests.nvidia.com/gpu: 16 → 24"]


@pytest.mark.django_db
def test_recorded_limits_read_by_type_and_resource(demo: None) -> None:
    namespace = Namespace.objects.get(name="team-a")
    set_namespace_limits(
        actor=admin(),
        namespace=namespace,
        limits=[
            LimitSpec("Container", "nvidia.com/gpu", default="1", max="4")
        ],  # the demo: default 1, request 1
        source="web",
    )
    assert readable(last("limits.changed")) == [
        "Container nvidia.com/gpu / max: not set → 4",
        "Container nvidia.com/gpu / default request: 1 → not set",
    ]


@pytest.mark.django_db
def test_an_approved_queue_quota_request_reads_as_its_quota_change(demo: None) -> None:
    demo_fleet_nodes()
    request = request_quota_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        kind="queue",
        cluster_queue=ClusterQueue.objects.get(name="cq-train"),
        flavor="a100-80gb-3g",
        resource="nvidia.com/mig-3g.40gb",
        requested="40",
        reason="A deadline for the 70B run.",
    )
    approve_quota_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="fine"
    )
    assert readable(last("quota_change.requested")) == ["quota: 24 → 40"]
    assert readable(last("quota_change.approved")) == ["quota: 24 → 40", "comment: fine"]
    # the desired state it changed, recorded by the ClusterQueue's own save
    saved = last("cluster_queue.saved")
    assert readable(saved) == ["a100-80gb-3g / nvidia.com/mig-3g.40gb / nominalQuota: 24 → 40"]
    assert event_label(saved.event) == "ClusterQueue saved"


def test_coded_values_read_in_words() -> None:
    """A verdict or a stop policy in an audit row reads as the pages say it (it read
    breaks_quota and None)."""
    facts = audit_changes("mig_change.requested", None, {"verdict": "breaks_quota"})
    assert [c.text for c in facts] == ["verdict: Breaks quota"]
    changed = audit_changes(
        "cluster_queue.saved", {"stop_policy": "None"}, {"stop_policy": "HoldAndDrain"}
    )
    assert [c.text for c in changed] == [
        "stop policy: None (admitting) → Hold and drain (also evict admitted)"
    ]


def test_a_recorded_moment_reads_as_a_date_and_time() -> None:
    """A grant's end was shown as 2026-12-07T00:00:00+00:00."""
    facts = audit_changes("quota_change.approved", None, {"until": "2026-12-07T01:30:00+01:00"})
    assert [c.text for c in facts] == ["until: 2026-12-07 00:30 UTC"]


def _cq(**limits: str) -> dict[str, Any]:
    quota = {"name": "nvidia.com/gpu", "nominalQuota": "12", **limits}
    flavors = [{"name": "h100-80gb", "resources": [quota]}]
    return {"resource_groups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}]}


def test_a_kueue_limit_set_or_cleared_reads_as_no_limit_not_removed() -> None:
    """Kueue's absent borrowingLimit is no limit (and an absent lendingLimit lends all): a
    limit set or cleared reads "no limit → 4" and "4 → no limit", never "(removed)"."""
    where = "h100-80gb / nvidia.com/gpu / "
    assert texts("cluster_queue.saved", _cq(), _cq(borrowingLimit="4")) == [
        f"{where}borrowingLimit: no limit → 4"
    ]
    assert texts("cluster_queue.saved", _cq(lendingLimit="2"), _cq()) == [
        f"{where}lendingLimit: 2 → no limit"
    ]
    # a quota that is new has its limit as a fact of it, not a change from no limit
    added = texts("cluster_queue.saved", {"resource_groups": []}, _cq(borrowingLimit="4"))
    assert f"{where}borrowingLimit: 4 (added)" in added
    assert not [line for line in added if "no limit" in line]
