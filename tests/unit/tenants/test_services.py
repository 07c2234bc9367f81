"""Tenant services: field errors, nothing written on refusal, an audit row on success."""

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from cluster.models import Cluster
from demo.services import load_demo
from portal.models import AuditEvent
from tenants.models import LimitRangeItem, Namespace, PriorityClass, QuotaItem, Team
from tenants.rules import LimitSpec
from tenants.services import (
    save_namespace,
    save_priority_class,
    save_team,
    set_namespace_limits,
    set_namespace_quota,
)
from tests.factories import NamespaceFactory

pytestmark = pytest.mark.django_db


def test_set_quota_replaces_items_and_audits(platform_admin: Any, team_a: Team) -> None:
    ns = NamespaceFactory(name="team-a", team=team_a)
    QuotaItem.objects.create(namespace=ns, resource="requests.cpu", hard="8")

    warnings = set_namespace_quota(
        actor=platform_admin,
        namespace=ns,
        source="web",
        hard={"requests.nvidia.com/gpu": "16", "pods": "50"},
    )

    assert warnings == []
    assert dict(ns.quota_items.values_list("resource", "hard")) == {
        "requests.nvidia.com/gpu": "16",
        "pods": "50",
    }
    event = AuditEvent.objects.get(event="quota.changed")
    assert event.actor == platform_admin
    assert event.team == team_a
    assert event.old == {"requests.cpu": "8"}
    assert event.new == {"requests.nvidia.com/gpu": "16", "pods": "50"}


def test_invalid_quota_is_refused_per_item_and_writes_nothing(
    platform_admin: Any, team_a: Team
) -> None:
    ns = NamespaceFactory(name="team-a", team=team_a)
    QuotaItem.objects.create(namespace=ns, resource="pods", hard="10")

    with pytest.raises(ValidationError) as caught:
        set_namespace_quota(
            actor=platform_admin,
            namespace=ns,
            source="web",
            hard={"requests.nvidia.com/gpu": "1500m", "pods": "20", "requests.cpu": "lots"},
        )

    errors = caught.value.message_dict
    assert set(errors) == {"hard[requests.nvidia.com/gpu]", "hard[requests.cpu]"}
    assert "whole number" in errors["hard[requests.nvidia.com/gpu]"][0]
    assert list(ns.quota_items.values_list("resource", "hard")) == [("pods", "10")]
    assert not AuditEvent.objects.exists()


def test_seed_quota_is_accepted_with_the_unenforced_limits_key_warned(
    platform_admin: Any, team_a: Team
) -> None:
    ns = NamespaceFactory(name="team-a", team=team_a)
    warnings = set_namespace_quota(
        actor=platform_admin,
        namespace=ns,
        source="web",
        hard={"requests.nvidia.com/gpu": "16", "limits.nvidia.com/gpu": "16", "pods": "50"},
    )
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "limits.nvidia.com/gpu is accepted by the API server but never enforced"
    )


def test_team_lead_cannot_set_quota_directly(team_a_admin: Any, team_a: Team) -> None:
    ns = NamespaceFactory(name="team-a", team=team_a)
    with pytest.raises(PermissionDenied):
        set_namespace_quota(actor=team_a_admin, namespace=ns, source="web", hard={"pods": "1"})
    assert not ns.quota_items.exists()


def test_invalid_limits_are_refused_and_write_nothing(platform_admin: Any, team_a: Team) -> None:
    ns = NamespaceFactory(name="team-a", team=team_a)
    with pytest.raises(ValidationError) as caught:
        set_namespace_limits(
            actor=platform_admin,
            namespace=ns,
            source="web",
            limits=[
                LimitSpec("Container", "nvidia.com/gpu", max="2"),
                LimitSpec("Container", "nvidia.com/gpu", default="2", default_request="1"),
            ],
        )
    assert "limits[Container][nvidia.com/gpu]" in caught.value.message_dict
    assert not LimitRangeItem.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("slug", "message"),
    [
        ("Team_A", "lowercase RFC 1123 label"),
        ("-team", "lowercase RFC 1123 label"),
        ("a" * 64, "no more than 63 characters"),
    ],
)
def test_team_slug_must_be_a_dns_label(platform_admin: Any, slug: str, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        save_team(actor=platform_admin, team=Team(slug=slug, name="x"), source="web")
    assert any(message in m for m in caught.value.message_dict["slug"])
    assert not Team.objects.exists()


def test_namespace_names_of_the_cluster_are_refused(platform_admin: Any, team_a: Team) -> None:
    with pytest.raises(ValidationError) as caught:
        save_namespace(
            actor=platform_admin, namespace=Namespace(name="kube-system", team=team_a), source="web"
        )
    assert "belong to the cluster" in caught.value.message_dict["name"][0]
    assert not Namespace.objects.exists()


def test_at_most_one_global_default_priority_class(platform_admin: Any) -> None:
    save_priority_class(
        actor=platform_admin,
        source="web",
        priority_class=PriorityClass(name="normal", value=1000, global_default=True),
    )
    with pytest.raises(ValidationError) as caught:
        save_priority_class(
            actor=platform_admin,
            source="web",
            priority_class=PriorityClass(name="other", value=10, global_default=True),
        )
    assert "already the global default" in str(caught.value)
    assert list(PriorityClass.objects.values_list("name", flat=True)) == ["normal"]


@pytest.mark.parametrize(
    ("name", "value", "field", "message"),
    [
        ("system-high", 10, "name", "reserved by Kubernetes"),
        ("too-high", 1_000_000_001, "value", "reserved for system-* classes"),
        ("Bad_Name", 10, "name", "lowercase RFC 1123 subdomain"),
    ],
)
def test_priority_class_rules(
    platform_admin: Any, name: str, value: int, field: str, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        save_priority_class(
            actor=platform_admin, source="web", priority_class=PriorityClass(name=name, value=value)
        )
    assert any(message in m for m in caught.value.message_dict[field])
    assert not PriorityClass.objects.exists()


def test_saving_what_is_already_there_writes_no_audit_event(demo: None) -> None:
    """Loading the demo again (each `dev.py run` does) changes nothing, so the log stays quiet."""
    before = AuditEvent.objects.count()
    load_demo()
    assert AuditEvent.objects.count() == before


def test_an_admin_quota_edit_is_stored_in_one_spelling_and_bounded_by_the_fleet(
    demo: None,
) -> None:
    from django.contrib.auth.models import User

    from tests.factories import demo_fleet_nodes

    demo_fleet_nodes()  # 40 GPUs in all, whatever their layout
    admin = User.objects.get(username="admin")
    namespace = Namespace.objects.get(name="team-a")
    hard = dict(namespace.quota_items.values_list("resource", "hard"))
    set_namespace_quota(
        actor=admin,
        namespace=namespace,
        hard={**hard, "requests.nvidia.com/gpu": "2.4e1", "requests.memory": "0.5Ti"},
        source="web",
    )
    stored = dict(namespace.quota_items.values_list("resource", "hard"))
    assert (stored["requests.nvidia.com/gpu"], stored["requests.memory"]) == ("24", "512Gi")
    with pytest.raises(ValidationError) as refused:
        set_namespace_quota(
            actor=admin,
            namespace=namespace,
            hard={**stored, "requests.nvidia.com/gpu": "1e3"},
            source="web",
        )
    assert "1000 is more than the fleet could ever offer (40 in its best MIG layout)" in str(
        refused.value.message_dict["hard[requests.nvidia.com/gpu]"]
    )
    assert namespace.quota_items.get(resource="requests.nvidia.com/gpu").hard == "24"
    set_namespace_quota(
        actor=admin,
        namespace=namespace,
        hard={**stored, "requests.nvidia.com/gpu": "1e3"},
        source="web",
        override_reason="a reservation for next quarter's nodes",
    )
    assert namespace.quota_items.get(resource="requests.nvidia.com/gpu").hard == "1000"
    event = AuditEvent.objects.filter(event="quota.changed").latest("id")
    assert event.new["override_reason"] == "a reservation for next quarter's nodes"


def test_no_service_moves_a_namespace_to_another_cluster(platform_admin: Any, team_a: Team) -> None:
    """Whatever the door: a move would delete it, pods and all, from its cluster unasked."""
    namespace = NamespaceFactory(name="vision", team=team_a)
    home = namespace.cluster_id
    namespace.cluster = Cluster.objects.create(name="inference", display_name="Inference")
    audited = AuditEvent.objects.count()
    with pytest.raises(ValidationError) as refused:
        save_namespace(actor=platform_admin, namespace=namespace, source="api")
    assert refused.value.message_dict["cluster"][0].startswith(
        "The namespace vision is on cluster default: it cannot move."
    )
    assert Namespace.objects.get(pk=namespace.pk).cluster_id == home
    assert AuditEvent.objects.count() == audited
