"""Queue services: Kueue's rules surface as field errors and nothing is written."""

import copy
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError

from cluster.models import Cluster
from cluster.scope import settings_cluster
from portal.audit.record import SYSTEM
from portal.models import AuditEvent
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from queues.services import (
    save_cluster_queue,
    save_cohort,
    save_local_queue,
    save_resource_flavor,
)
from tenants.models import Team
from tests.factories import (
    ClusterQueueFactory,
    MigChangeRequestFactory,
    NamespaceFactory,
    ResourceFlavorFactory,
    demo_fleet_nodes,
)

pytestmark = pytest.mark.django_db

GROUPS = [
    {
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [
            {
                "name": "h100-80gb",
                "resources": [
                    {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4"}
                ],
            }
        ],
    }
]


def test_cluster_queue_is_saved_and_audited(platform_admin: Any) -> None:
    ResourceFlavorFactory(name="h100-80gb")
    cohort = Cohort.objects.create(name="research")
    cq = save_cluster_queue(
        actor=platform_admin,
        source="api",
        cluster_queue=ClusterQueue(name="team-a-cq", cohort=cohort, resource_groups=GROUPS),
    )
    event = AuditEvent.objects.get()
    assert (event.event, event.target_id, event.source) == (
        "cluster_queue.saved",
        str(cq.pk),
        "api",
    )
    assert event.new["resource_groups"] == GROUPS


def test_a_quota_sent_as_a_json_number_is_the_same_quota_and_no_change(
    platform_admin: Any,
) -> None:
    ResourceFlavorFactory(name="h100-80gb")
    cq = save_cluster_queue(
        actor=platform_admin,
        source="web",
        cluster_queue=ClusterQueue(
            name="team-a-cq", cohort=Cohort.objects.create(name="research"), resource_groups=GROUPS
        ),
    )
    as_numbers = copy.deepcopy(GROUPS)
    as_numbers[0]["flavors"][0]["resources"][0].update(nominalQuota=8, borrowingLimit=4)
    cq.resource_groups = as_numbers
    save_cluster_queue(actor=platform_admin, source="api", cluster_queue=cq)
    assert AuditEvent.objects.count() == 1  # the first save only
    assert ClusterQueue.objects.get(pk=cq.pk).resource_groups == GROUPS
    as_numbers[0]["flavors"][0]["resources"][0]["nominalQuota"] = 9
    cq.resource_groups = as_numbers
    save_cluster_queue(actor=platform_admin, source="api", cluster_queue=cq)
    assert ClusterQueue.objects.get(pk=cq.pk).nominal_quota("h100-80gb", "nvidia.com/gpu") == "9"
    assert AuditEvent.objects.count() == 2


def test_borrowing_without_cohort_is_a_field_error_and_writes_nothing(platform_admin: Any) -> None:
    ResourceFlavorFactory(name="h100-80gb")
    with pytest.raises(ValidationError) as caught:
        save_cluster_queue(
            actor=platform_admin,
            source="web",
            cluster_queue=ClusterQueue(name="team-x-cq", resource_groups=GROUPS),
        )
    assert caught.value.message_dict == {
        "resource_groups": [
            "resourceGroups[0].flavors[0].resources[0].borrowingLimit: borrowingLimit must be nil "
            "when cohort is empty: set a cohort to borrow, or clear the limit"
        ]
    }
    assert not ClusterQueue.objects.exists()
    assert not AuditEvent.objects.exists()


def test_unknown_flavor_is_refused(platform_admin: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        save_cluster_queue(
            actor=platform_admin,
            source="web",
            cluster_queue=ClusterQueue(
                name="cq", cohort=Cohort.objects.create(name="c"), resource_groups=GROUPS
            ),
        )
    assert "no ResourceFlavor named 'h100-80gb'" in caught.value.message_dict["resource_groups"][0]


def test_a_flavor_of_another_cluster_is_unknown_here(platform_admin: Any) -> None:
    """A ClusterQueue refers to the flavors of its own cluster: Kueue there has no other."""
    there = Cluster.objects.create(name="other", display_name="Other", connection="token")
    ResourceFlavorFactory(name="h100-80gb", cluster=there)
    cohort = Cohort.objects.create(name="c")
    for owner in (
        ClusterQueue(name="cq", cohort=cohort, resource_groups=GROUPS),
        Cohort(name="child", parent=cohort, resource_groups=GROUPS),
    ):
        with pytest.raises(ValidationError) as caught:
            owner.full_clean()
        assert (
            "no ResourceFlavor named 'h100-80gb'" in caught.value.message_dict["resource_groups"][0]
        )
    assert not ClusterQueue.objects.on_every_cluster().exists()
    assert not AuditEvent.objects.exists()
    ResourceFlavorFactory(name="h100-80gb", cluster=settings_cluster())
    save_cluster_queue(
        actor=platform_admin,
        source="web",
        cluster_queue=ClusterQueue(name="cq", cohort=cohort, resource_groups=GROUPS),
    )


def test_invalid_names_are_field_errors(platform_admin: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        save_cluster_queue(
            actor=platform_admin, source="web", cluster_queue=ClusterQueue(name="CQ_Train")
        )
    assert "lowercase RFC 1123 subdomain" in caught.value.message_dict["name"][0]


def test_preemption_rule_is_a_field_error(platform_admin: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        save_cluster_queue(
            actor=platform_admin,
            source="web",
            cluster_queue=ClusterQueue(name="cq", preemption_borrow_within_cohort="LowerPriority"),
        )
    assert "preemption_borrow_within_cohort" in caught.value.message_dict


def test_flavor_label_and_taint_rules(platform_admin: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        save_resource_flavor(
            actor=platform_admin,
            source="web",
            flavor=ResourceFlavor(
                name="h100",
                node_labels={"nvidia.com/gpu.product": "NVIDIA H100"},
                node_taints=[{"key": "gpu", "effect": "Never"}],
            ),
        )
    errors = caught.value.message_dict
    assert "a valid label value" in errors["node_labels"][0]
    assert "must be one of NoSchedule" in errors["node_taints"][0]
    assert not ResourceFlavor.objects.exists()


def test_cohort_cycle_is_refused(platform_admin: Any) -> None:
    root = Cohort.objects.create(name="root")
    child = Cohort.objects.create(name="child", parent=root)
    root.parent = child
    with pytest.raises(ValidationError) as caught:
        save_cohort(actor=platform_admin, source="web", cohort=root)
    assert "cycle" in caught.value.message_dict["parent"][0]
    assert Cohort.objects.get(name="root").parent is None


def test_local_queue_cannot_move_to_another_cluster_queue(platform_admin: Any) -> None:
    ns = NamespaceFactory(name="team-a")
    lq = LocalQueue.objects.create(name="train", namespace=ns, cluster_queue=ClusterQueueFactory())
    lq.cluster_queue = ClusterQueueFactory()
    with pytest.raises(ValidationError) as caught:
        save_local_queue(actor=platform_admin, source="web", local_queue=lq)
    assert "does not allow changing" in caught.value.message_dict["cluster_queue"][0]


def test_local_queue_name_is_a_dns_label(platform_admin: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        save_local_queue(
            actor=platform_admin,
            source="web",
            local_queue=LocalQueue(
                name="team.a", namespace=NamespaceFactory(), cluster_queue=ClusterQueueFactory()
            ),
        )
    assert "lowercase RFC 1123 label" in caught.value.message_dict["name"][0]


def test_members_cannot_change_queues(team_a_admin: Any) -> None:
    with pytest.raises(PermissionDenied):
        save_cluster_queue(actor=team_a_admin, source="web", cluster_queue=ClusterQueue(name="cq"))
    assert not ClusterQueue.objects.exists()


def test_the_fleet_ceiling_is_the_services_whoever_calls_it(demo: None) -> None:
    """16 H100 GPUs behind h100-80gb: 30 needs the confirmation and the reason from any
    caller; a reviewed change passes the request whose approval weighed it."""
    demo_fleet_nodes()
    admin = User.objects.get(username="admin")
    cq = ClusterQueue.objects.get(name="cq-train")
    cq.set_nominal_quota("h100-80gb", "nvidia.com/gpu", "30")
    audited = AuditEvent.objects.count()
    with pytest.raises(ValidationError) as refused:
        save_cluster_queue(actor=admin, cluster_queue=copy.deepcopy(cq), source="api")
    assert sorted(refused.value.message_dict) == ["override_reason", "promise_more_than_exists"]
    with pytest.raises(ValidationError) as refused:
        save_cluster_queue(
            actor=admin,
            cluster_queue=copy.deepcopy(cq),
            source="api",
            promise_more_than_exists=True,
        )
    assert list(refused.value.message_dict) == ["override_reason"]
    assert ClusterQueue.objects.get(pk=cq.pk).nominal_quota("h100-80gb", "nvidia.com/gpu") == "12"
    assert AuditEvent.objects.count() == audited
    approved = MigChangeRequestFactory(team=Team.objects.get(slug="team-a"))
    save_cluster_queue(actor=SYSTEM, cluster_queue=cq, source="task", serves=approved)
    assert ClusterQueue.objects.get(pk=cq.pk).nominal_quota("h100-80gb", "nvidia.com/gpu") == "30"
    assert list(
        AuditEvent.objects.filter(pk__gt=0).order_by("-pk").values_list("event", flat=True)
    )[:1] == ["cluster_queue.saved"]
