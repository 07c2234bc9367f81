"""The permission matrix over every page: anonymous, viewer, member, another team's lead,
the lead, an approver and a platform admin; reads and the state-changing POSTs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import URLResolver, get_resolver
from django.utils import timezone

from budgets.models import Budget, BudgetExtension
from budgets.services import request_budget_extension
from changes import impact
from changes import mig as changes
from changes import quota as quota_requests
from changes.facts import fleet_facts
from changes.models import MigChangeRequest, MigPolicyChange, QuotaChangeRequest
from cluster.models import ObservedWorkload
from cluster.services import settings_cluster
from costs.models import Price
from tenants.models import Namespace, Team
from tests.conftest import Snapshot, restore_demo, take_snapshot
from tests.factories import MigChangeRequestFactory, ObservedNodeFactory

pytestmark = pytest.mark.django_db

Ids = dict[str, int]

USERS = ("anonymous", "viewer-dev", "member-a", "lead-b", "lead-a", "approver", "admin")
OK, LOGIN, DENIED, HIDDEN = 200, 302, 403, 404

# Reads: {url template: status per user, in USERS order}
READS = {
    "/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/fleet/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/fleet/gpu-operator/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/fleet/nodes/gpu-a100-03/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/fleet/nodes/?pool=train": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/fleet/troubleshooting/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/queues/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/workloads/": (LOGIN, OK, OK, OK, OK, OK, OK),
    # team-a's workload: another team's is no workload to them (the API's answer too)
    "/workloads/default/team-a/train-a/": (LOGIN, HIDDEN, OK, HIDDEN, OK, OK, OK),
    "/reports/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/reports/gpu-hours.csv": (LOGIN, OK, OK, OK, OK, OK, OK),
    # costs: everyone reads the prices and their teams' costs; another team's invoice is hidden
    "/costs/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/costs/prices/": (LOGIN, OK, OK, OK, OK, OK, OK),
    # a price's delete asks first (what it changes), platform admins only
    "/costs/prices/{price}/delete/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, OK),
    "/costs/invoices/team-a/2026-11/": (LOGIN, HIDDEN, OK, HIDDEN, OK, OK, OK),
    "/costs/invoices/team-a/2026-11.csv": (LOGIN, HIDDEN, OK, HIDDEN, OK, OK, OK),
    "/costs/panel/team-a/": (LOGIN, HIDDEN, OK, HIDDEN, OK, OK, OK),
    "/queues/cluster-queues/cq-train/edit/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, OK),
    "/queues/priority-classes/training-critical/edit/": (
        LOGIN,
        DENIED,
        DENIED,
        DENIED,
        DENIED,
        DENIED,
        OK,
    ),
    "/fleet/nodes/no-such-node/": (LOGIN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN),
    "/quota/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/quota/new/": (LOGIN, DENIED, DENIED, OK, OK, DENIED, OK),
    "/quota/{qr}/": (LOGIN, HIDDEN, OK, HIDDEN, OK, OK, OK),
    "/changes/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/changes/new/": (LOGIN, DENIED, DENIED, OK, OK, DENIED, OK),
    # each cluster's MIG policy: everyone reads it (a lead their own teams' grants only)
    "/changes/mig-policy/": (LOGIN, OK, OK, OK, OK, OK, OK),
    # team-a's change evicts team-b's pod and takes the backing of team-dev's queue (cq-dev's
    # slices on the node): both teams read it, neither decides it.
    "/changes/{mc}/": (LOGIN, OK, OK, OK, OK, OK, OK),
    # A drain the portal suggested belongs to no team: approvers and admins only.
    "/changes/{drain}/": (LOGIN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, OK, OK),
    "/workspace/": (LOGIN, DENIED, DENIED, DENIED, DENIED, OK, OK),
    # The planner: team leads and approvers read it, admins ask for its changes.
    "/planner/": (LOGIN, DENIED, DENIED, OK, OK, OK, OK),
    "/tokens/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/teams/onboard/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, OK),
    "/teams/team-a/offboard/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, OK),
    # another team's members are hidden; approvers see every team
    "/teams/team-a/members/": (LOGIN, HIDDEN, OK, HIDDEN, OK, OK, OK),
    # idle GPUs: everyone their own teams'; another team's policy is hidden
    "/idle/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/idle/?team=team-a": (LOGIN, HIDDEN, OK, HIDDEN, OK, OK, OK),
    "/idle/teams/team-a/policy/": (LOGIN, HIDDEN, OK, HIDDEN, OK, OK, OK),
    "/audit/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/audit/events.csv": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/notifications/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/notifications/settings/": (LOGIN, OK, OK, OK, OK, OK, OK),
    # The clusters: platform admins only (their connections are the platform's).
    "/clusters/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, OK),
    "/clusters/new/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, OK),
    "/clusters/default/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, OK),
    "/clusters/default/edit/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, OK),
    "/clusters/no-such-cluster/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, HIDDEN),
    # Budgets: every team's to platform admins, a lead's own teams' to the lead (the list
    # is empty to anyone else); set by platform admins.
    "/budgets/": (LOGIN, OK, OK, OK, OK, OK, OK),
    "/budgets/{budget}/": (LOGIN, HIDDEN, HIDDEN, HIDDEN, OK, HIDDEN, OK),
    # a budget's removal asks first (what it changes), platform admins only
    "/budgets/{budget}/delete/": (LOGIN, HIDDEN, HIDDEN, HIDDEN, DENIED, HIDDEN, OK),
}
# Refused state changes: nothing may change. The lead cannot approve their own request.
REFUSED_POSTS = {
    "/changes/{mc}/approve/": (LOGIN, DENIED, DENIED, DENIED, DENIED, None, None),
    "/changes/{mc}/reject/": (LOGIN, DENIED, DENIED, DENIED, DENIED, None, None),
    "/changes/{mc}/cancel/": (LOGIN, DENIED, DENIED, DENIED, None, DENIED, None),
    "/changes/{mc}/rollback/": (LOGIN, DENIED, DENIED, DENIED, None, None, None),
    "/queues/cluster-queues/cq-train/edit/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, None),
    "/queues/priority-classes/training-critical/edit/": (
        LOGIN,
        DENIED,
        DENIED,
        DENIED,
        DENIED,
        DENIED,
        None,
    ),
    "/changes/{drain}/approve/": (LOGIN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, None, None),
    "/changes/{drain}/cancel/": (LOGIN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, DENIED, None),
    "/changes/preview/": (LOGIN, DENIED, DENIED, None, None, None, None),
    # platform admins propose a MIG policy; approvers decide (a change is theirs to read)
    "/changes/mig-policy/default/propose/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, None),
    "/changes/mig-policy/changes/{policy}/approve/": (
        LOGIN,
        HIDDEN,
        HIDDEN,
        HIDDEN,
        HIDDEN,
        None,
        None,
    ),
    "/planner/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, None),
    "/quota/{qr}/approve/": (LOGIN, HIDDEN, DENIED, HIDDEN, DENIED, None, None),
    "/quota/{qr}/reject/": (LOGIN, HIDDEN, DENIED, HIDDEN, DENIED, None, None),
    "/clusters/new/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, None),
    "/clusters/default/edit/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, None),
    "/clusters/default/test/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, None),
    "/costs/prices/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, None),
    "/costs/prices/{price}/delete/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, None),
    "/budgets/": (LOGIN, DENIED, DENIED, DENIED, DENIED, DENIED, None),
    "/budgets/{budget}/": (LOGIN, HIDDEN, HIDDEN, HIDDEN, DENIED, HIDDEN, None),
    "/budgets/{budget}/delete/": (LOGIN, HIDDEN, HIDDEN, HIDDEN, DENIED, HIDDEN, None),
    "/budgets/{budget}/extend/": (LOGIN, HIDDEN, HIDDEN, HIDDEN, None, HIDDEN, None),
    # lead-a asked for it: nobody decides their own, and only platform admins decide
    "/budgets/extensions/{extension}/approve/": (
        LOGIN,
        HIDDEN,
        HIDDEN,
        HIDDEN,
        DENIED,
        HIDDEN,
        None,
    ),
}


@pytest.fixture(scope="module")
def objects_snapshot(demo_snapshot: Snapshot, django_db_blocker: Any) -> tuple[Snapshot, Ids]:
    """The demo and the matrix's objects (``make_objects``), made once per module and put
    back for each test that asks for ``objects``: made for each, they took its setup about
    0.15 s (some 120 tests here and in the forms walk)."""
    made: Ids = {}

    def write() -> None:
        # The services' durable blocks run inside the snapshot's transaction as they do
        # inside a test's: Django's TestCase marks its own blocks so.
        connection.atomic_blocks[-1]._from_testcase = True
        restore_demo(demo_snapshot)
        made.update(make_objects())

    with django_db_blocker.unblock():
        snapshot = take_snapshot(write)
    return snapshot, made


@pytest.fixture
def objects(db: None, objects_snapshot: tuple[Snapshot, Ids]) -> Ids:
    """The demo, a MIG change and a drain waiting, a quota request, a budget extension and a
    MIG policy proposal; their ids by name."""
    snapshot, made = objects_snapshot
    restore_demo(snapshot)
    return made


def make_objects() -> Ids:
    now = timezone.now()
    ObservedNodeFactory(
        name="gpu-a100-03",
        gpu_product="NVIDIA-A100-SXM4-80GB",
        gpu_count=8,
        mig_config="all-balanced",
        mig_config_state="failed",
        pool_label="train",
        labels={
            "quartermaster.io/pool": "train",
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            "nvidia.com/mig.config": "all-balanced",
        },
        allocatable={"nvidia.com/mig-1g.10gb": 16},
        first_seen=now,
        last_changed=now,
        ready=True,
    )
    ObservedWorkload.objects.create(
        namespace="team-a", name="train-a", queue_name="team-a-train", last_changed=now
    )
    lead, team = User.objects.get(username="lead-a"), Team.objects.get(slug="team-a")
    mc = changes.request_mig_change(
        actor=lead, team=team, nodes=["gpu-a100-03"], target_config="all-3g.40gb", reason="x"
    )
    qr = quota_requests.request_quota_change(
        actor=lead,
        team=team,
        kind="namespace",
        resource="requests.nvidia.com/gpu",
        requested="8",
        reason="x",
        namespace=Namespace.objects.get(name="team-a"),
    )
    mc_node_free = fleet_facts(cluster=settings_cluster(), exclude_request=mc.pk)
    assessment = impact.assess(mc_node_free, targets=["gpu-a100-03"], config="", drain=True)
    drain = MigChangeRequestFactory(
        kind="drain",
        nodes=["gpu-a100-03"],
        reason="Suggested by the portal's GPU health check",
        state="pending",
        assessment=assessment.as_json(),
        verdict=assessment.verdict,
        suggestion_key="gpu-a100-03/gpu5/x/xid79",
    )
    settings_cluster()  # the one the migration made (a flushed database gets it back)
    price = Price.objects.order_by("pk").values_list("pk", flat=True).first()  # the demo's
    budget = Budget.objects.get(team=team)  # the demo's
    extension = request_budget_extension(actor=lead, team=team, amount="10", reason="x")
    policy = MigPolicyChange.objects.create(  # a proposal waiting (the admin's)
        cluster=settings_cluster(),
        requested_by=User.objects.get(username="admin"),
        governed=True,
        grants=[],
        reason="x",
    )
    return {
        "policy": policy.pk,
        "mc": mc.pk,
        "qr": qr.pk,
        "drain": drain.pk,
        "price": int(price or 0),
        "budget": budget.pk,
        "extension": extension.pk,
    }


def client_for(user: str) -> Client:
    client = Client()
    if user != "anonymous":
        client.force_login(User.objects.get(username=user))
    return client


def _routes(resolver: URLResolver, prefix: str = "") -> list[str]:
    """Every route, the apps' included ones joined to their prefix."""
    out = []
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver) and not route.startswith(("api/", "admin/")):
            out += _routes(entry, route)
        else:
            out.append(route)
    return out


def test_every_page_is_in_the_matrix() -> None:
    """A new page must be added to the matrix (and so get its permission reviewed)."""
    routes = {
        route for route in _routes(get_resolver()) if not route.startswith(("api/", "admin/"))
    }
    covered = {
        "",
        "fleet/",
        "fleet/gpu-operator/",
        "fleet/nodes/",
        "fleet/nodes/<str:name>/",
        "fleet/troubleshooting/",
        "queues/",
        "workloads/",
        "workloads/<str:cluster>/<str:namespace>/<str:name>/",
        "planner/",
        "reports/",
        "reports/<str:name>.csv",
        "costs/",
        "costs/prices/",
        "costs/prices/<int:pk>/delete/",
        "costs/invoices/<slug:team>/<str:month>.csv",
        "costs/invoices/<slug:team>/<str:month>/",
        "costs/panel/<slug:team>/",
        "idle/",
        "idle/teams/<slug:slug>/policy/",
        "queues/cluster-queues/<str:name>/edit/",
        "queues/priority-classes/<str:name>/edit/",
        "quota/",
        "quota/new/",
        "quota/<int:pk>/",
        "quota/<int:pk>/<str:action>/",
        "changes/",
        "changes/new/",
        "changes/preview/",
        "changes/<int:pk>/",
        "changes/<int:pk>/<str:action>/",
        "changes/mig-policy/",
        "changes/mig-policy/<str:cluster>/propose/",
        "changes/mig-policy/changes/<int:pk>/<str:action>/",
        "workspace/",
        "start/",  # a redirect: tests/unit/overview/test_workspace.py
        "tokens/",
        "teams/onboard/",
        "teams/<slug:slug>/offboard/",
        "teams/<slug:slug>/members/",
        "notifications/",
        "notifications/settings/",
        "audit/",
        "audit/events.csv",
        "clusters/",
        "clusters/new/",
        "clusters/<str:name>/",
        "clusters/<str:name>/edit/",
        "clusters/<str:name>/test/",
        "budgets/",
        "budgets/<int:pk>/",
        "budgets/<int:pk>/delete/",
        "budgets/<int:pk>/extend/",
        "budgets/extensions/<int:pk>/<str:action>/",
        "login/",
        "logout/",
        "oidc/authenticate/",
        "oidc/callback/",
        "healthz",
        "readyz",
        "metrics",
    }
    assert routes == covered


# What a page may not carry under its Content-Security-Policy (no inline script, style or
# event handler: each would be refused by the browser).
INLINE = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=", re.I)


def assert_under_csp(response: Any, url: str) -> None:
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "style-src 'self'" in policy, url
    assert "unsafe" not in policy and "frame-ancestors 'none'" in policy, url
    if response.headers["Content-Type"].startswith("text/html"):
        found = INLINE.search(response.content.decode())
        assert found is None, (url, found and found.group(0))


@pytest.mark.parametrize("url", list(READS))
def test_reads(objects: dict[str, int], url: str) -> None:
    for user, wanted in zip(USERS, READS[url], strict=True):
        response = client_for(user).get(url.format(**objects))
        assert response.status_code == wanted, (url, user, response.status_code)
        if wanted == LOGIN:
            assert response.headers["Location"].startswith("/login/")
        assert_under_csp(response, url)


@pytest.mark.parametrize("url", list(REFUSED_POSTS))
def test_refused_posts_change_nothing(objects: dict[str, int], url: str) -> None:
    body = {"comment": "c", "nodes": ["gpu-a100-03"], "target_config": "all-3g.40gb"}
    before = (
        list(MigChangeRequest.objects.values_list("state", flat=True)),
        list(QuotaChangeRequest.objects.values_list("state", flat=True)),
        list(Budget.objects.values_list("amount", "enforce")),
        list(BudgetExtension.objects.values_list("state", flat=True)),
    )
    for user, wanted in zip(USERS, REFUSED_POSTS[url], strict=True):
        if wanted is None:
            continue
        response = client_for(user).post(url.format(**objects), body)
        assert response.status_code == wanted, (url, user, response.status_code)
    after = (
        list(MigChangeRequest.objects.values_list("state", flat=True)),
        list(QuotaChangeRequest.objects.values_list("state", flat=True)),
        list(Budget.objects.values_list("amount", "enforce")),
        list(BudgetExtension.objects.values_list("state", flat=True)),
    )
    assert after == before


def test_posts_without_csrf_token_are_refused(objects: dict[str, int]) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.get(username="approver"))
    response = client.post(f"/changes/{objects['mc']}/approve/", {"comment": "c"})
    assert response.status_code == 403
    assert MigChangeRequest.objects.get(pk=objects["mc"]).state == "pending"


def test_the_audit_log_is_scoped_and_filtered(objects: dict[str, int]) -> None:
    """team-a's request events show to team-a and to approvers, never to team-b's lead."""
    event = "mig_change.requested"
    row = f'title="Event {event}"'  # the label's tooltip names the event
    assert row in client_for("lead-a").get("/audit/?team=team-a").content.decode()
    assert row in client_for("approver").get("/audit/").content.decode()
    other = client_for("lead-b").get("/audit/").content.decode()
    assert row not in other and "team-a" not in other
    # lead-b asking for team-a's events by URL gets nothing
    assert row not in client_for("lead-b").get("/audit/?team=team-a").content.decode()
    filtered = client_for("admin").get("/audit/?event=quota_change.&actor=lead-a")
    body = filtered.content.decode()
    # The rows, not the filter echoed back in its input: team-a's quota request, no MIG change.
    assert 'title="Event quota_change.requested"' in body
    assert row not in body
    bad = client_for("admin").get("/audit/?since=yesterday&source=bogus").content.decode()
    assert "A day as YYYY-MM-DD." in bad and "Pick one of the listed sources." in bad
    assert row not in bad
