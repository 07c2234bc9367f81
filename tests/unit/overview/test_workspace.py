"""The approver's and admin's workspace: decisions waiting (never their own), the count in
the navigation, recent outcomes, failed and stuck changes, drift and unhealthy GPUs; where a
sign-in lands; and the query count at two data sizes."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from changes.models import MigChangeRequest, MigChangeStep, QuotaChangeRequest
from cluster.models import Cluster, Drift
from cluster.services import settings_cluster
from health.models import NodeHealth
from portal.audit.events import Event
from portal.audit.record import record_audit
from tests.factories import (
    ClusterQueueFactory,
    MembershipFactory,
    MigChangeRequestFactory,
    NamespaceFactory,
)

pytestmark = pytest.mark.django_db


def quota_request(team: Any, by: Any, *, resource: str = "pods", **fields: Any) -> Any:
    namespace = NamespaceFactory(name=f"{team.slug}-{resource.replace('/', '-')}", team=team)
    return QuotaChangeRequest.objects.create(
        team=team,
        requested_by=by,
        kind="namespace",
        namespace=namespace,
        resource=resource,
        previous="10",
        requested="20",
        reason="more pods",
        **fields,
    )


def nav_badge(page: str) -> str:
    """The Workspace link of the navigation, as text."""
    match = re.search(r'<a href="/workspace/"[^>]*>(.*?)</a>', page, re.S)
    assert match, "no Workspace link"
    return re.sub(r"<[^>]+>", "", match.group(1))


def test_approver_sees_others_requests_to_decide_and_own_apart(
    client: Client, approver: Any, team_a: Any, team_a_admin: Any
) -> None:
    theirs = MigChangeRequestFactory(team=team_a, requested_by=team_a_admin, nodes=["gpu-7"])
    own = MigChangeRequestFactory(team=team_a, requested_by=approver, nodes=["gpu-8"])
    quota = quota_request(team_a, team_a_admin)
    client.force_login(approver)
    page = client.get("/workspace/").content.decode()
    decisions = page[page.index('id="decisions"') : page.index('id="attention"')]
    assert f'href="/changes/{theirs.pk}/">MIG change #{theirs.pk}</a>' in decisions
    assert f"/changes/{own.pk}/" not in decisions
    assert f'href="/quota/{quota.pk}/">Quota request #{quota.pk}</a>' in decisions
    assert 'id="decisions-count">2<' in decisions
    assert "1 request of yours waits for another approver: nobody decides their own." in decisions
    assert nav_badge(page) == "Workspace 2 waiting"


def test_the_count_is_in_the_navigation_of_every_page(
    client: Client, platform_admin: Any, team_a: Any, team_a_admin: Any
) -> None:
    quota_request(team_a, team_a_admin)
    client.force_login(platform_admin)
    assert nav_badge(client.get("/changes/").content.decode()) == "Workspace 1 waiting"
    QuotaChangeRequest.objects.update(state="rejected")
    assert nav_badge(client.get("/changes/").content.decode()) == "Workspace"


@pytest.mark.parametrize("path", ["/", "/fleet/", "/queues/cluster-queues/cq-0/edit/"])
def test_the_count_comes_with_the_first_reads_of_a_page_that_makes_them(
    client: Client, platform_admin: Any, team_a: Any, team_a_admin: Any, path: str
) -> None:
    """A page that makes its first reads (``cluster.selectors.first_reads``) brings the
    navigation's count with them: no query of its own; the decider's own request is not
    counted."""
    ClusterQueueFactory(name="cq-0")
    quota_request(team_a, team_a_admin)
    MigChangeRequestFactory(team=team_a, requested_by=platform_admin, nodes=["gpu-8"])
    client.force_login(platform_admin)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(path)
    assert page.status_code == 200
    assert nav_badge(page.content.decode()) == "Workspace 1 waiting"
    asked = [
        q["sql"] for q in queries.captured_queries if "FILTER (WHERE requested_by_id" in q["sql"]
    ]
    assert len(asked) == 1 and not asked[0].startswith("SELECT 'mig'")  # in the first reads
    QuotaChangeRequest.objects.update(state="rejected")
    assert nav_badge(client.get(path).content.decode()) == "Workspace"


def test_what_a_lead_reads_first_counts_nothing(
    client: Client, team_a: Any, team_a_admin: Any, approver: Any
) -> None:
    """The count sent before the user's roles are known counts nothing for one who decides
    nothing."""
    quota_request(team_a, approver)
    client.force_login(team_a_admin)
    answer = client.get("/")
    assert answer.wsgi_request._qm_pending == {  # type: ignore[attr-defined]
        kind: {"others": 0, "own": 0} for kind in ("mig", "quota", "policy")
    }
    assert 'href="/workspace/"' not in answer.content.decode()


def test_a_team_lead_has_no_workspace(client: Client, team_a_admin: Any) -> None:
    client.force_login(team_a_admin)
    assert 'href="/workspace/"' not in client.get("/").content.decode()
    answer = client.get("/workspace/")
    assert answer.status_code == 403
    assert (
        '<p class="reason" id="error-reason">The workspace is for approvers and platform admins.</p>'
        in answer.content.decode()
    )


@pytest.mark.parametrize(
    ("who", "lands"),
    [("approver", "/workspace/"), ("platform_admin", "/workspace/"), ("team_a_admin", "/")],
)
def test_sign_in_lands_deciders_on_the_workspace(
    client: Client, request: pytest.FixtureRequest, who: str, lands: str
) -> None:
    user = request.getfixturevalue(who)
    answer = client.post("/login/", {"username": user.username, "password": "pw"})
    assert answer.status_code == 302 and answer["Location"] == "/start/"
    assert client.get("/start/")["Location"] == lands


def test_an_approver_who_leads_a_team_keeps_the_team_home(
    client: Client, approver: Any, team_a: Any
) -> None:
    MembershipFactory(user=approver, team=team_a, role="lead")
    client.force_login(approver)
    assert client.get("/start/")["Location"] == "/"


def test_outcomes_failures_stuck_steps_drift_and_gpus_link_to_their_pages(
    client: Client, approver: Any, team_a: Any, team_a_admin: Any
) -> None:
    now = timezone.now()
    done = MigChangeRequestFactory(
        team=team_a, requested_by=team_a_admin, state="succeeded", decided_by=approver
    )
    MigChangeRequestFactory(
        team=team_a,
        requested_by=team_a_admin,
        state="failed",
        failure="gpu-7: nvidia.com/mig.config.state is failed",
    )
    running = MigChangeRequestFactory(
        team=team_a, requested_by=team_a_admin, state="running", nodes=["gpu-9"]
    )
    MigChangeStep.objects.create(
        request=running, node="gpu-9", step="wait", started_at=now - dt.timedelta(hours=1)
    )
    quick = MigChangeRequestFactory(team=team_a, requested_by=team_a_admin, state="running")
    MigChangeStep.objects.create(request=quick, node="gpu-1", step="wait", started_at=now)
    granted = quota_request(
        team_a, team_a_admin, state="approved", decided_by=approver, decided_at=now
    )
    Drift.objects.create(
        kind="mig_layout",
        subject="gpu-a100-03",
        field="nvidia.com/mig.config",
        desired="all-3g.40gb",
        observed="all-balanced",
        first_seen=now,
        last_seen=now,
    )
    NodeHealth.objects.create(
        node="gpu-h100-02",
        observed_at=now,
        worst="critical",
        findings=[
            {"gpu": 5, "severity": "critical", "title": "GPU 5: Xid 79, GPU has fallen off the bus"}
        ],
    )
    NodeHealth.objects.create(node="gpu-h100-01", observed_at=now, worst="ok")
    client.force_login(approver)
    page = client.get("/workspace/").content.decode()
    attention = page[page.index('id="attention"') : page.index('id="outcomes"')]
    assert f'href="/changes/{running.pk}/">MIG change #{running.pk}</a>' in attention
    assert '<span class="state state-stuck">Stuck</span>' in attention
    assert "step <strong>wait</strong> on gpu-9 running since" in attention
    assert f"/changes/{quick.pk}/" not in attention  # running, not for long
    assert '<span class="state state-failed">Failed</span>' in attention
    assert "gpu-7: nvidia.com/mig.config.state is failed" in attention
    outcomes = page[page.index('id="outcomes"') : page.index('id="drift"')]
    assert f'href="/changes/{done.pk}/"' in outcomes and f'href="/quota/{granted.pk}/"' in outcomes
    assert '<span class="state state-approved">Approved and applied</span>' in outcomes
    drift = page[page.index('id="drift"') : page.index('id="gpus"')]
    assert 'href="/fleet/nodes/gpu-a100-03/">gpu-a100-03</a>' in drift
    assert "all-balanced, wanted all-3g.40gb" in drift
    gpus = page[page.index('id="gpus"') :]
    assert 'href="/fleet/nodes/gpu-h100-02/"' in gpus and "gpu-h100-01" not in gpus
    assert '<span class="state state-critical">Critical</span>' in gpus
    assert "GPU 5: Xid 79, GPU has fallen off the bus</li>" in gpus


def test_an_empty_workspace_says_so(client: Client, approver: Any) -> None:
    client.force_login(approver)
    page = client.get("/workspace/").content.decode()
    for sentence in (
        "Nothing waits for your decision.",
        "No change failed in the last 7 days, and none is stuck.",
        "Nothing was decided or finished in the last 7 days.",
        "The cluster shows what the portal intends.",
        "Every GPU reports healthy.",
    ):
        assert sentence in page
    assert nav_badge(page) == "Workspace"


def grow(size: int, start: int, team: Any, lead: Any, approver: Any) -> None:
    now = timezone.now()
    for i in range(start, start + size):
        MigChangeRequestFactory(team=team, requested_by=lead, nodes=[f"n-{i}"])
        failed = MigChangeRequestFactory(team=team, requested_by=lead, state="failed")
        MigChangeStep.objects.create(
            request=failed, node=f"n-{i}", step="drain", status="failed", started_at=now
        )
        stuck = MigChangeRequestFactory(team=team, requested_by=lead, state="running")
        MigChangeStep.objects.create(
            request=stuck, node=f"n-{i}", step="wait", started_at=now - dt.timedelta(hours=2)
        )
        MigChangeRequestFactory(team=team, requested_by=lead, state="succeeded")
        quota_request(team, lead, resource=f"r{i}")
        quota_request(team, lead, resource=f"s{i}", state="approved", decided_by=approver)
        Drift.objects.create(
            kind="mig_layout", subject=f"n-{i}", first_seen=now, last_seen=now, observed="x"
        )
        Drift.objects.create(
            kind="object", subject=f"LocalQueue q-{i}", first_seen=now, last_seen=now
        )
        NodeHealth.objects.create(node=f"n-{i}", observed_at=now, worst="warning")


def test_workspace_query_count_does_not_grow_with_data(
    client: Client, approver: Any, team_a: Any, team_a_admin: Any
) -> None:
    client.force_login(approver)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/workspace/").status_code == 200
        return len(captured)

    grow(1, 0, team_a, team_a_admin, approver)
    small = queries()
    grow(30, 1, team_a, team_a_admin, approver)
    large = queries()
    assert large == small <= 16, (small, large)
    page = client.get("/workspace/").content.decode()
    assert 'id="decisions-count">62<' in page  # 31 MIG changes and 31 quota requests
    assert "All 31 on the MIG changes page" in page
    assert MigChangeRequest.objects.filter(state="pending").count() == 31


@pytest.fixture
def two_clusters(db: Any) -> tuple[Any, Any]:
    """The settings' cluster (Default) and a second one (Inference)."""
    infer = Cluster.objects.create(
        name="inference", display_name="Inference", connection="in_cluster"
    )
    return settings_cluster(), infer


def on_both(clusters: tuple[Any, ...], team: Any, lead: Any, *, i: int = 0) -> None:
    """On each cluster, the same names: a pending drain, a failed and a stuck change, MIG
    layout and object drift, an unhealthy node."""
    now = timezone.now()
    for cluster in clusters:
        MigChangeRequestFactory(
            cluster=cluster, team=None, requested_by=None, kind="drain", nodes=[f"d-{i}"]
        )
        MigChangeRequestFactory(
            cluster=cluster, team=team, requested_by=lead, state="failed", nodes=[f"f-{i}"]
        )
        stuck = MigChangeRequestFactory(
            cluster=cluster, team=team, requested_by=lead, state="running"
        )
        MigChangeStep.objects.create(
            request=stuck, node=f"s-{i}", step="wait", started_at=now - dt.timedelta(hours=1)
        )
        for kind, subject in (("mig_layout", f"gpu-a100-{i:02d}"), ("object", f"q-{i}")):
            Drift.objects.create(
                cluster=cluster, kind=kind, subject=subject, first_seen=now, last_seen=now
            )
        NodeHealth.objects.create(
            cluster=cluster, node=f"gpu-h100-{i:02d}", observed_at=now, worst="critical"
        )


def test_with_two_clusters_each_item_names_its_cluster_and_links_its_page(
    client: Client, approver: Any, team_a: Any, team_a_admin: Any, two_clusters: tuple[Any, Any]
) -> None:
    on_both(two_clusters, team_a, team_a_admin, i=3)
    client.force_login(approver)
    page = client.get("/workspace/").content.decode()
    tag = '<span class="tag" title="cluster">{}</span>'
    for section, ends in (
        ("decisions", "attention"),
        ("attention", "outcomes"),
        ("drift", "gpus"),
        ("gpus", None),
    ):
        part = page[page.index(f'id="{section}"') : page.index(f'id="{ends}"') if ends else None]
        per_item = {"decisions": 1, "attention": 2, "drift": 2, "gpus": 1}[section]
        for name in ("Default", "Inference"):
            assert part.count(tag.format(name)) == per_item, (section, name, part)
    drift = page[page.index('id="drift"') : page.index('id="gpus"')]
    for cluster in ("default", "inference"):
        assert f'href="/fleet/nodes/gpu-a100-03/?cluster={cluster}">gpu-a100-03</a>' in drift
        assert f'href="/fleet/?cluster={cluster}#drift-title">q-3</a>' in drift
        assert f'href="/fleet/nodes/gpu-h100-03/?cluster={cluster}"' in page


def test_with_one_cluster_the_workspace_names_no_cluster(
    client: Client, approver: Any, team_a: Any, team_a_admin: Any
) -> None:
    on_both((settings_cluster(),), team_a, team_a_admin, i=3)
    client.force_login(approver)
    page = client.get("/workspace/").content.decode()
    assert 'title="cluster"' not in page
    assert 'href="/fleet/nodes/gpu-a100-03/">gpu-a100-03</a>' in page
    assert 'href="/fleet/#drift-title">q-3</a>' in page


def test_with_two_clusters_the_workspace_query_count_does_not_grow(
    client: Client, approver: Any, team_a: Any, team_a_admin: Any, two_clusters: tuple[Any, Any]
) -> None:
    client.force_login(approver)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/workspace/").status_code == 200
        return len(captured)

    on_both(two_clusters, team_a, team_a_admin, i=0)
    small = queries()
    for i in range(1, 8):
        on_both(two_clusters, team_a, team_a_admin, i=i)
    assert queries() == small


def test_an_outcome_names_who_brought_it_there_as_the_audit_recorded(
    client: Client, approver: Any, platform_admin: Any, team_a: Any, team_a_admin: Any
) -> None:
    """A rolled-back change is "by" whoever rolled it back (it said the approver), an aborted
    one is "aborted by" the admin, a succeeded one "approved by" its approver."""
    rolled = MigChangeRequestFactory(
        team=team_a, requested_by=team_a_admin, state="rolled_back", decided_by=approver
    )
    aborted = MigChangeRequestFactory(
        team=team_a, requested_by=team_a_admin, state="failed", decided_by=approver
    )
    done = MigChangeRequestFactory(
        team=team_a, requested_by=team_a_admin, state="succeeded", decided_by=approver
    )
    acted = ((rolled, Event.MIG_CHANGE_ROLLBACK), (aborted, Event.MIG_CHANGE_ABORT_REQUESTED))
    for change, event in acted:
        record_audit(actor=platform_admin, event=event, source="web", target=change, team=team_a)
    client.force_login(approver)
    page = client.get("/workspace/").content.decode()
    outcomes = page[page.index('id="outcomes"') : page.index('id="drift"')]

    def row(change: Any) -> str:
        start = outcomes.index(f'href="/changes/{change.pk}/"')
        return outcomes[start : outcomes.index("</li>", start)]

    assert "by padmin" in row(rolled) and "dana" not in row(rolled)
    assert "aborted by padmin" in row(aborted)
    assert "approved by dana" in row(done)
