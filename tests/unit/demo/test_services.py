"""The demo scenario: the seed's values, loaded through the services, idempotently."""

import datetime as dt
import io
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from changes.models import MigPolicyChange
from cluster import credentials
from cluster.models import Cluster
from demo.data import MIG_POLICY_GRANTS, Endpoint
from demo.services import load_demo, load_demo_mig_policy
from devcluster import dra
from devcluster.inference import A100_PRODUCT, DRA_GPUS, DRA_NODES
from loop.fetch import DraListing
from loop.write import write_dra
from portal.models import AuditEvent
from queues.models import ClusterQueue, Cohort, LocalQueue
from tenants.models import LimitRangeItem, Namespace, PriorityClass, QuotaItem, Team
from tenants.services import mig_policy_of

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


def test_the_inference_clusters_mig_policy_is_proposed_and_approved_by_demo_users(
    demo: None,
) -> None:
    """Once the inference cluster's DRA GPUs are polled, its MIG policy is seeded through the
    one door: the platform admin proposes it, the approver approves it on its assessment,
    and the audit names both; a second run leaves it alone."""
    assert load_demo_mig_policy() == "No inference cluster: no MIG policy to seed."
    load_demo(Endpoint("http://127.0.0.1:7001", "first-token"))
    inference = Cluster.objects.get(name="inference")
    assert load_demo_mig_policy().endswith("publishes no MIG device yet: no MIG policy seeded.")
    slices = [s for node in DRA_NODES for s in dra.node_slices(node, A100_PRODUCT, DRA_GPUS)]
    write_dra(
        DraListing(dra.device_classes(), slices, []),
        cluster_id=inference.pk,
        now=dt.datetime(2026, 12, 6, 10, 0, tzinfo=dt.UTC),
    )
    assert load_demo_mig_policy().endswith("of the inference cluster proposed and approved.")
    seeded = sorted(MIG_POLICY_GRANTS, key=lambda g: (str(g["namespace"]), str(g["profile"])))
    assert mig_policy_of(inference) == (True, seeded)
    change = MigPolicyChange.objects.on(inference).get()
    assert (change.state, change.requested_by.username, change.decided_by.username) == (
        "approved",
        "admin",
        "approver",
    )
    audited = AuditEvent.objects.filter(event__startswith="mig_policy_change.").order_by("id")
    assert [(a.event, a.actor.username) for a in audited] == [
        ("mig_policy_change.requested", "admin"),
        ("mig_policy_change.approved", "approver"),
    ]
    said = io.StringIO()
    call_command("demo_mig_policy", stdout=said)  # the run command's step
    assert said.getvalue().strip().endswith("left alone.")
    assert MigPolicyChange.objects.on(inference).count() == 1
    # A new user finds it: the cluster governed, its grants, the decision in the history.
    client = Client()
    client.force_login(User.objects.get(username="lead-infer"))
    page = client.get("/changes/mig-policy/").content.decode()
    section = page[page.index(f'id="cluster-{inference.pk}-mig-policy"') :]
    assert "governed per claim" in section[:600]
    assert "<td><code>team-infer</code></td><td>3g.40gb</td>" in section
    assert "team-a-serve" not in section  # another team's grant, not shown to this lead
