"""The demo scenario: the seed's values, loaded through the services, idempotently."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from cluster import credentials
from cluster.models import Cluster
from demo.data import Endpoint
from demo.services import load_demo
from portal.models import AuditEvent
from queues.models import ClusterQueue, Cohort, LocalQueue
from tenants.models import LimitRangeItem, Namespace, PriorityClass, QuotaItem, Team

pytestmark = pytest.mark.django_db


def test_demo_holds_the_seed_scenario(demo: None) -> None:
    assert set(Team.objects.values_list("slug", flat=True)) == {
        "team-a",
        "team-b",
        "team-infer",
        "team-dev",
    }
    assert dict(
        QuotaItem.objects.filter(namespace__name="team-a").values_list("resource", "hard")
    ) == {"requests.nvidia.com/gpu": "16", "limits.nvidia.com/gpu": "16", "pods": "50"}
    limit = LimitRangeItem.objects.get(namespace__name="team-a")
    assert (limit.resource, limit.default, limit.default_request) == ("nvidia.com/gpu", "1", "1")
    pc = PriorityClass.objects.get(name="training-critical")
    assert (pc.value, pc.preemption_policy, pc.global_default) == (
        1_000_000,
        "PreemptLowerPriority",
        False,
    )
    weights = dict(ClusterQueue.objects.values_list("name", "fair_sharing_weight"))
    assert weights == {"cq-train": "80", "cq-infer": "20", "cq-dev": "5"}
    assert {cq.cohort.name for cq in ClusterQueue.objects.select_related("cohort")} == {
        "ai-platform"
    }
    # The seed's cohort nests in a root that holds no quota of its own.
    root = Cohort.objects.get(name="ai-platform").parent
    assert root is not None
    assert (root.name, root.parent, root.resource_groups) == ("gpu-fleet", None, [])
    dev = ClusterQueue.objects.get(name="cq-dev").resource_groups
    assert {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "10"} in dev[1][
        "flavors"
    ][0]["resources"]
    assert dict(LocalQueue.objects.values_list("name", "cluster_queue__name")) == {
        "team-a-train": "cq-train",
        "team-b-train": "cq-train",
        "online-infer": "cq-infer",
        "offline-batch": "cq-infer",
        "dev-test": "cq-dev",
    }


def test_every_demo_login_has_an_address_at_example_com(demo: None) -> None:
    """So the demo's notifications by e-mail land in the run's outbox (reserved: a mail
    that left the machine would reach nobody)."""
    addresses = dict(User.objects.values_list("username", "email"))
    assert addresses["lead-b"] == "lead-b@example.com"
    assert all(address.endswith("@example.com") for address in addresses.values())


def test_demo_warns_about_the_risky_seed_values(db: Any) -> None:
    warnings = load_demo()
    assert any(w.startswith("limits.nvidia.com/gpu is accepted") for w in warnings)
    assert any("sidecars" in w for w in warnings)


def test_loading_twice_changes_nothing(demo: None) -> None:
    counts = (
        Team.objects.count(),
        Namespace.objects.count(),
        QuotaItem.objects.count(),
        LocalQueue.objects.count(),
    )
    load_demo()
    assert counts == (
        Team.objects.count(),
        Namespace.objects.count(),
        QuotaItem.objects.count(),
        LocalQueue.objects.count(),
    )


def test_demo_writes_are_audited_as_the_system(demo: None) -> None:
    assert (
        AuditEvent.objects.filter(source="cli", actor__isnull=True, event="quota.changed").count()
        == 4
    )


def test_given_the_second_demo_cluster_the_demo_registers_it_once(demo: None) -> None:
    audited = AuditEvent.objects.filter(event__startswith="cluster.")
    load_demo(Endpoint("http://127.0.0.1:7001", "first-token"))
    training = Cluster.objects.get(connection="settings")
    assert (training.display_name, training.purpose) == ("Training (A100 / H100)", "training")
    inference = Cluster.objects.get(name="inference")
    assert (inference.purpose, inference.connection, inference.api_url) == (
        "inference",
        "token",
        "http://127.0.0.1:7001",
    )
    assert credentials.decrypt(inference.credential, cluster="inference") == "first-token"
    assert "first-token" not in str(list(audited.values_list("new", flat=True)))
    assert sorted(audited.values_list("event", flat=True)) == [
        "cluster.changed",
        "cluster.registered",
    ]
    # The same cluster again: nothing to write. A new address and token: one change.
    load_demo(Endpoint("http://127.0.0.1:7001", "first-token"))
    assert audited.count() == 2
    load_demo(Endpoint("http://127.0.0.1:7002", "second-token"))
    change = audited.order_by("-id").first()
    assert change is not None
    assert (change.event, change.new) == (
        "cluster.changed",
        {"api_url": "http://127.0.0.1:7002", "credential": "replaced"},
    )
    inference.refresh_from_db()
    assert credentials.decrypt(inference.credential, cluster="inference") == "second-token"
    assert Cluster.objects.count() == 2
    # A new address with the same token: the token is entered again (bound to its endpoint).
    load_demo(Endpoint("http://127.0.0.1:7003", "second-token"))
    change = audited.order_by("-id").first()
    assert change is not None
    assert change.new == {"api_url": "http://127.0.0.1:7003", "credential": "replaced"}


def test_without_a_second_cluster_the_settings_cluster_is_left_as_it_is(demo: None) -> None:
    before = list(Cluster.objects.values_list("name", "display_name", "purpose"))
    load_demo()
    assert list(Cluster.objects.values_list("name", "display_name", "purpose")) == before
    assert not Cluster.objects.filter(name="inference").exists()
