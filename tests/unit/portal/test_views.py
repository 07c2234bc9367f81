"""Login, home and admin pages; team scoping; a fixed number of queries per page."""

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.factories import MembershipFactory, NamespaceFactory, TeamFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_login_page_renders_with_csrf(client: Client) -> None:
    response = client.get("/login/")
    assert response.status_code == 200
    assert b'name="csrfmiddlewaretoken"' in response.content
    assert b"htmx-2.0.11.min.js" in response.content


def test_anonymous_users_are_sent_to_login(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/"


def test_login_with_wrong_password_says_so(client: Client, demo: None) -> None:
    response = client.post("/login/", {"username": "lead-a", "password": "nope"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content


def test_login_shows_field_errors_next_to_their_fields(client: Client, demo: None) -> None:
    page = client.post("/login/", {"username": "x" * 10_000, "password": ""}).content.decode()
    assert 'aria-invalid="true" aria-describedby="id_username-error"' in page
    assert "Ensure this value has at most 150 characters (it has 10000)." in page
    assert "This field is required." in page


def test_revoking_a_token_that_is_no_number_is_404_not_500(client: Client, demo: None) -> None:
    from django.contrib.auth.models import User

    client.force_login(User.objects.get(username="lead-a"))
    for bad in ("ten", "9" * 40, "", "1e999", "\uff11"):
        assert client.post("/tokens/", {"revoke": bad}).status_code == 404, bad


def test_a_token_expiry_is_offered_as_a_number_of_days(client: Client, demo: None) -> None:
    from django.contrib.auth.models import User

    client.force_login(User.objects.get(username="lead-a"))
    page = client.post("/tokens/", {"name": "ci", "days": "1e999"}).content.decode()
    assert 'type="number" min="1" max="366"' in page
    assert 'aria-invalid="true" aria-describedby="id_days-error"' in page


def test_login_then_home_shows_only_my_teams(client: Client, demo: None) -> None:
    response = client.post("/login/", {"username": "lead-a", "password": "quartermaster-demo"})
    assert response.status_code == 302
    page = client.get("/").content.decode()
    assert "team-a-gpu-quota" in page
    assert "team-a-train" in page
    assert "team-b" not in page
    # The seed's risky values are explained where the lead sees them.
    assert "never enforced" in page
    assert "sidecars" in page


def test_platform_admin_sees_every_team_and_the_admin_link(client: Client, demo: None) -> None:
    client.login(username="admin", password="quartermaster-demo")
    page = client.get("/").content.decode()
    for slug in ("team-a", "team-b", "team-infer", "team-dev"):
        assert f">{slug}<" in page
    assert 'href="/admin/"' in page


def test_user_without_team_gets_a_clear_empty_state(client: Client) -> None:
    client.force_login(UserFactory(username="newcomer"))
    assert b"not a member of any team yet" in client.get("/").content


def test_home_query_count_does_not_grow_with_data(client: Client) -> None:
    user = UserFactory(username="lead")
    client.force_login(user)

    def queries(teams: range) -> int:
        for i in teams:
            team = TeamFactory(slug=f"t{i}")
            MembershipFactory(user=user, team=team, role="lead")
            for j in range(3):
                NamespaceFactory(name=f"t{i}-ns{j}", team=team)
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/").status_code == 200
        return len(captured)

    # 1 team of 3 namespaces, then 6: besides the session and the user, one round trip
    # reads the user's roles, the teams, clusters and polls, one records the visit and reads
    # every quota's, queue's and ClusterQueue's status, the pods and what waits
    assert queries(range(1)) == queries(range(1, 6)) <= 4


@pytest.mark.parametrize(
    "url",
    [
        "/admin/",
        "/admin/tenants/team/",
        "/admin/tenants/namespace/",
        "/admin/tenants/quotaitem/",
        "/admin/tenants/limitrangeitem/",
        "/admin/tenants/priorityclass/",
        "/admin/tenants/membership/",
        "/admin/queues/clusterqueue/",
        "/admin/queues/localqueue/",
        "/admin/queues/resourceflavor/",
        "/admin/queues/cohort/",
        "/admin/portal/auditevent/",
        "/admin/portal/platformrole/",
    ],
)
def test_admin_pages_render_for_the_platform_admin(client: Client, demo: None, url: str) -> None:
    client.login(username="admin", password="quartermaster-demo")
    assert client.get(url).status_code == 200


def test_admin_is_closed_to_team_leads(client: Client, demo: None) -> None:
    client.login(username="lead-a", password="quartermaster-demo")
    assert client.get("/admin/").status_code == 302


def test_admin_save_is_audited(client: Client, demo: None) -> None:
    from portal.models import AuditEvent
    from tenants.models import Team

    client.login(username="admin", password="quartermaster-demo")
    team = Team.objects.get(slug="team-dev")
    response = client.post(
        f"/admin/tenants/team/{team.pk}/change/",
        {
            "slug": "team-dev",
            "name": "Dev & test",
            "description": "",
            # the classes it has (a post without them clears them: audited on its own)
            "allowed_priority_classes": [
                str(pk) for pk in team.allowed_priority_classes.values_list("pk", flat=True)
            ],
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            "namespaces-TOTAL_FORMS": "0",
            "namespaces-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    event = AuditEvent.objects.filter(source="admin").get()
    assert event.event == "team.changed"
    assert event.old["name"] == "Development" and event.new["name"] == "Dev & test"
    assert event.actor_name == "admin"


def test_healthz(client: Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_checks_the_database_redis_and_kubernetes(
    admin_client: Client, settings: Any
) -> None:
    settings.KUBE_URL = ""
    response = admin_client.get("/readyz")
    assert response.status_code == 200
    checks = response.json()["checks"]
    assert {name: c["status"] for name, c in checks.items()} == {
        "database": "ok",
        "redis": "ok",
        "outbox": "ok (nothing waiting for the broker)",
        "kubernetes": "not configured",
        "cluster credentials": "ok (none stored)",
    }
    assert [name for name, c in checks.items() if c["required"]] == ["database"]


@pytest.mark.django_db
def test_readyz_stays_ready_without_redis_and_says_why(admin_client: Client, settings: Any) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    settings.KUBE_URL = "http://127.0.0.1:1"
    response = admin_client.get("/readyz")
    assert response.status_code == 200  # the pages and the API serve without Redis
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["redis"]["ok"] is False
    assert body["checks"]["redis"]["status"].startswith(
        "failed: Error 111 connecting to 127.0.0.1:1"
    )
    assert body["checks"]["database"]["ok"] is True
    kube = body["checks"]["kubernetes"]
    assert (kube["ok"], kube["required"]) == (False, False)
    assert kube["status"] == "failed: the cluster has not been polled yet"


@pytest.mark.django_db
def test_readyz_tells_anyone_else_ready_or_not_and_nothing_more(
    client: Client, settings: Any, team_a_admin: Any
) -> None:
    settings.KUBE_URL = "http://10.1.2.3:6443"
    settings.QM_METRICS_TOKEN = "scraper-token"
    assert client.get("/readyz").json() == {"status": "ok"}
    client.force_login(team_a_admin)
    assert client.get("/readyz").json() == {"status": "ok"}
    client.logout()
    wrong = client.get("/readyz", headers={"Authorization": "Bearer guess"})
    assert wrong.json() == {"status": "ok"}
    operator = client.get("/readyz", headers={"Authorization": "Bearer scraper-token"})
    assert set(operator.json()["checks"]) >= {"database", "kubernetes"}


@pytest.mark.django_db
def test_readyz_answers_within_its_deadline_whatever_hangs(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from portal.infra import readiness as health

    release = threading.Event()
    monkeypatch.setitem(health.REPORTED, "stuck", lambda: str(release.wait(30)))
    try:
        body = admin_client.get("/readyz").json()
    finally:
        release.set()
    assert body["status"] == "ok"
    assert body["checks"]["stuck"] == {
        "ok": False,
        "status": f"failed: no answer within {health.DEADLINE_SECONDS} s",
        "required": False,
        "ms": None,
    }


def test_admin_refuses_an_invalid_cluster_queue_with_the_field_error(
    client: Client, demo: None
) -> None:
    import json

    from portal.models import AuditEvent
    from queues.models import ClusterQueue

    client.login(username="admin", password="quartermaster-demo")
    groups = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {
                    "name": "h100-80gb",
                    "resources": [
                        {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "2"}
                    ],
                }
            ],
        }
    ]
    before = AuditEvent.objects.count()
    response = client.post(
        "/admin/queues/clusterqueue/add/",
        {
            "name": "cq-solo",
            "cohort": "",
            "fair_sharing_weight": "",
            "queueing_strategy": "BestEffortFIFO",
            "namespace_selector": "null",
            "preemption_within_cluster_queue": "Never",
            "preemption_reclaim_within_cohort": "Never",
            "preemption_borrow_within_cohort": "Never",
            "when_can_borrow": "MayStopSearch",
            "when_can_preempt": "TryNextFlavor",
            "flavor_fungibility_preference": "",
            "stop_policy": "None",
            "resource_groups": json.dumps(groups),
            "description": "",
            "local_queues-TOTAL_FORMS": "0",
            "local_queues-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert "borrowingLimit must be nil when cohort is empty" in response.content.decode()
    assert not ClusterQueue.objects.filter(name="cq-solo").exists()
    assert AuditEvent.objects.count() == before


def test_admin_shows_resource_groups_as_indented_json(client: Client, demo: None) -> None:
    from queues.models import ClusterQueue

    client.login(username="admin", password="quartermaster-demo")
    cq = ClusterQueue.objects.get(name="cq-train")
    page = client.get(f"/admin/queues/clusterqueue/{cq.pk}/change/").content.decode()
    assert "[\n  {\n    &quot;" in page
