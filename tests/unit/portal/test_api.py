"""REST API basics: tokens, one error format, idempotency, rate limits, authentication and scoping of every list, the schema."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from changes.models import MigChangeRequest
from portal.access.tokens import create_token, revoke_token
from portal.models import ApiToken, PlatformRole
from tests.support import bearer

pytestmark = pytest.mark.django_db


def test_tokens_are_shown_once_stored_hashed_and_revocable(client: Client, fleet: None) -> None:
    client.force_login(User.objects.get(username="lead-a"))
    created = client.post(
        "/api/v1/tokens/", {"name": "ci", "days": 30}, content_type="application/json"
    ).json()
    text = created["token"]
    assert text.startswith(f"qm_{created['prefix']}_")
    assert text not in str(ApiToken.objects.values_list("digest", flat=True))
    client.logout()
    auth = {"Authorization": f"Bearer {text}"}
    assert client.get("/api/v1/teams/", headers=auth).json()["results"][0]["slug"] == "team-a"
    assert "token" not in client.get("/api/v1/tokens/", headers=auth).json()["results"][0]
    assert client.delete(f"/api/v1/tokens/{created['id']}/", headers=auth).status_code == 204
    response = client.get("/api/v1/teams/", headers=auth)
    assert (response.status_code, response.json()["detail"]) == (401, "This token was revoked.")


def test_expired_and_wrong_tokens_are_refused(client: Client, fleet: None) -> None:
    token, text = create_token(user=User.objects.get(username="lead-a"), name="old")
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert (
        client.get("/api/v1/teams/", headers={"Authorization": f"Bearer {text}"}).json()["detail"]
        == "This token has expired."
    )
    assert (
        client.get("/api/v1/teams/", headers={"Authorization": "Bearer qm_nope_x"}).status_code
        == 401
    )
    assert client.get("/api/v1/teams/").status_code == 401


def test_token_page_creates_shows_once_and_revokes(client: Client, fleet: None) -> None:
    client.force_login(User.objects.get(username="lead-a"))
    page = client.post("/tokens/", {"name": "laptop", "days": "7"}).content.decode()
    assert "shown only this once" in page
    token = ApiToken.objects.get(name="laptop")
    assert "shown only this once" not in client.get("/tokens/").content.decode()
    assert (
        "A number of days"
        in client.post("/tokens/", {"name": "x", "days": "soon"}).content.decode()
    )
    assert "Name the token" in client.post("/tokens/", {"name": "", "days": "7"}).content.decode()
    too_long = client.post("/tokens/", {"name": "n" * 101, "days": "7"})
    assert too_long.status_code == 422
    assert "At most 100 characters (this one has 101)." in too_long.content.decode()
    client.post("/tokens/", {"revoke": token.pk})
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_idempotency_key_replays_the_first_response(client: Client, fleet: None) -> None:
    body = {
        "team": "team-a",
        "nodes": ["gpu-a100-03"],
        "target_config": "all-3g.40gb",
        "reason": "retry-safe",
    }
    headers = {**bearer("lead-a"), "Idempotency-Key": "create-1"}
    first = client.post(
        "/api/v1/mig-changes/", body, content_type="application/json", headers=headers
    )
    again = client.post(
        "/api/v1/mig-changes/", body, content_type="application/json", headers=headers
    )
    assert first.status_code == again.status_code == 201
    assert first.json()["id"] == again.json()["id"] and again["Idempotent-Replayed"] == "true"
    assert MigChangeRequest.objects.count() == 1
    other = client.post(
        "/api/v1/quota-requests/", {}, content_type="application/json", headers=headers
    )
    assert other.json()["code"] == "idempotency_key_reused"
    changed = client.post(  # the same key with another body: refused, not replayed
        "/api/v1/mig-changes/",
        {**body, "reason": "something else"},
        content_type="application/json",
        headers=headers,
    )
    assert (changed.status_code, changed.json()["code"]) == (422, "idempotency_key_reused")
    assert "Idempotent-Replayed" not in changed.headers


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/teams/",
        "/api/v1/memberships/",
        "/api/v1/namespaces/",
        "/api/v1/priority-classes/",
        "/api/v1/resource-flavors/",
        "/api/v1/cohorts/",
        "/api/v1/cluster-queues/",
        "/api/v1/local-queues/",
        "/api/v1/nodes/",
        "/api/v1/node-pools/",
        "/api/v1/mig-changes/",
        "/api/v1/quota-requests/",
        "/api/v1/audit/",
        "/api/v1/sync-status/",
        "/api/v1/tokens/",
        "/api/v1/waiting/",
    ],
)
def test_every_list_needs_authentication_and_is_scoped(
    client: Client, fleet: None, path: str
) -> None:
    assert client.get(path).status_code == 401
    for user in ("viewer-dev", "member-a", "lead-b", "lead-a", "approver", "admin"):
        response = client.get(path, headers=bearer(user))
        assert response.status_code == 200, (path, user)
    if path in (
        "/api/v1/namespaces/",
        "/api/v1/memberships/",
        "/api/v1/local-queues/",
        "/api/v1/waiting/",
    ):
        seen = str(client.get(path, headers=bearer("viewer-dev")).json())
        assert "team-a" not in seen and "team-b" not in seen


def test_a_token_brings_its_users_roles_and_the_request_asks_them_no_more(
    client: Client, fleet: None
) -> None:
    """The token's row carries its user's platform roles: the permission check and the
    list's scopes (its teams, its clusters) ask none of their own, and a role taken away
    counts from the next request."""
    ops = User.objects.create_user("ops")  # a platform admin, not a superuser, of no team
    PlatformRole.objects.create(user=ops, role=PlatformRole.Role.ADMIN)
    admin = bearer("ops")
    client.get("/api/v1/teams/", headers=admin)  # the token's first use is recorded once
    with CaptureQueriesContext(connection) as captured:
        seen = client.get("/api/v1/namespaces/", headers=admin).json()["results"]
    roles = [q["sql"] for q in captured if PlatformRole._meta.db_table in q["sql"]]
    assert len(roles) == 1 and ApiToken._meta.db_table in roles[0]
    assert {ns["team"] for ns in seen} >= {"team-a", "team-b"}
    PlatformRole.objects.filter(user=ops).delete()
    assert client.get("/api/v1/namespaces/", headers=admin).json()["results"] == []


def test_rate_limit_is_per_token(
    client: Client, fleet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.core.cache import cache

    from portal.access.tokens import TokenRateThrottle

    cache.clear()
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"token": "3/minute"})
    first, second = bearer("lead-a"), bearer("lead-a")
    for _ in range(3):
        assert client.get("/api/v1/teams/", headers=first).status_code == 200
    refused = client.get("/api/v1/teams/", headers=first)
    assert refused.status_code == 429
    assert "Retry-After" in refused.headers
    assert refused.json()["detail"]
    # the same user's other token has its own budget
    assert client.get("/api/v1/teams/", headers=second).status_code == 200
    cache.clear()


def test_unrouted_api_paths_answer_in_the_api_error_format(client: Client, fleet: None) -> None:
    response = client.get("/api/v1/namespaces/a.b/", headers=bearer("admin"))
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found.", "code": "not_found"}
    assert client.get("/no-such-page/").headers["Content-Type"].startswith("text/html")
    # whatever the method, and with CSRF checks on as for a real client
    strict = Client(enforce_csrf_checks=True)
    response = strict.put("/api/v1/namespaces/a./quota/", {}, content_type="application/json")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_query_parameters_with_nul_bytes_are_refused_not_a_server_error(
    client: Client, fleet: None
) -> None:
    for url in ("/api/v1/waiting/?namespace=a%00b", "/api/v1/gpu-health/?node=a%00b"):
        response = client.get(url, headers=bearer("lead-a"))
        assert response.status_code == 400, url
        assert "Null characters are not allowed." in str(response.json())


def test_schema_and_docs_are_served(client: Client, fleet: None) -> None:
    client.force_login(User.objects.get(username="lead-a"))
    schema = client.get(
        "/api/schema/?format=json", headers={"Accept": "application/vnd.oai.openapi+json"}
    )
    assert schema.status_code == 200
    assert b"/api/v1/mig-changes/{id}/approve/" in schema.content
    assert client.get("/api/docs/").status_code == 200


def test_scoping_other_teams_are_404(client: Client, fleet: None) -> None:
    assert client.get("/api/v1/namespaces/team-b/", headers=bearer("lead-a")).status_code == 404
    names = [
        n["name"]
        for n in client.get("/api/v1/namespaces/", headers=bearer("lead-a")).json()["results"]
    ]
    assert names == ["team-a"]
    assert (
        client.get("/api/v1/namespaces/team-a/", headers=bearer("lead-a")).json()["quota"]["pods"]
        == "50"
    )


def test_unknown_fields_and_bad_names_are_refused(client: Client, fleet: None) -> None:
    body = {
        "team": "team-a",
        "nodes": ["gpu-a100-03"],
        "target_config": "all-3g.40gb",
        "reason": "x",
        "force": True,
    }
    response = client.post(
        "/api/v1/mig-changes/", body, content_type="application/json", headers=bearer("lead-a")
    )
    assert (response.status_code, response.json()["errors"]) == (400, {"force": ["Unknown field."]})
    response = client.post(
        "/api/v1/quota-requests/",
        {
            "team": "team-a",
            "kind": "namespace",
            "namespace": "team-a",
            "resource": "requests.nvidia.com/gpu",
            "requested": "-4",
            "reason": "x",
        },
        content_type="application/json",
        headers=bearer("lead-a"),
    )
    assert response.status_code == 400 and "requested" in response.json()["errors"]
    response = client.post(
        "/api/v1/quota-requests/",
        {
            "team": "Team_A!",
            "kind": "namespace",
            "resource": "pods",
            "requested": "1",
            "reason": "x",
        },
        content_type="application/json",
        headers=bearer("lead-a"),
    )
    assert response.status_code == 400 and "team" in response.json()["errors"]
    assert not MigChangeRequest.objects.exists()


def test_an_api_url_no_view_matches_answers_in_the_api_format(client: Client, fleet: None) -> None:
    missing = client.get("/api/v1/teams/a%0Ab/", headers=bearer("admin"))
    assert (missing.status_code, missing["Content-Type"]) == (404, "application/json")
    assert missing.json() == {"detail": "Not found.", "code": "not_found"}
    assert client.get("/no-such-page/").status_code == 404


def test_a_token_cannot_mint_tokens_and_bad_ids_are_404(client: Client, fleet: None) -> None:
    auth = bearer("lead-a")
    minted = client.post(
        "/api/v1/tokens/", {"name": "forever"}, content_type="application/json", headers=auth
    )
    assert minted.status_code == 403
    assert "not by another token" in minted.json()["detail"]
    assert ApiToken.objects.filter(name="forever").count() == 0
    for method, url in (
        ("post", "/api/v1/mig-changes/abc/approve/"),
        ("post", "/api/v1/quota-requests/x/reject/"),
        ("delete", "/api/v1/tokens/abc/"),
        ("get", "/api/v1/mig-changes/9999999999999999999999/"),
    ):
        answer = getattr(client, method)(url, headers=bearer("admin"))
        assert (answer.status_code, answer.json()["code"]) == (404, "not_found"), url
    nul = client.get("/api/v1/nodes/a%00/", headers=auth)
    assert nul.status_code == 400 and list(nul.json()["errors"]) == ["path"]


def test_a_persons_tokens_share_one_budget(
    client: Client, fleet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tokens had two budgets (1,200 + 1,234 a minute); the person's budget holds over
    all of them."""
    from django.core.cache import cache

    from portal.access.tokens import TokenRateThrottle, UserRateThrottle

    cache.clear()
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"token": "3/minute"})
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {"user": "5/minute"})
    first, second = bearer("lead-a"), bearer("lead-a")
    for _ in range(3):
        assert client.get("/api/v1/teams/", headers=first).status_code == 200
    for _ in range(2):
        assert client.get("/api/v1/teams/", headers=second).status_code == 200
    refused = client.get("/api/v1/teams/", headers=bearer("lead-a"))
    assert refused.status_code == 429 and "Retry-After" in refused.headers
    assert client.get("/api/v1/teams/", headers=bearer("lead-b")).status_code == 200
    cache.clear()


def test_a_person_holds_at_most_the_cap_of_live_tokens(fleet: None, settings: Any) -> None:
    settings.QM_API_TOKENS_PER_USER = 2
    lead = User.objects.get(username="lead-a")
    first, _ = create_token(user=lead, name="ci")
    create_token(user=lead, name="laptop")
    with pytest.raises(ValidationError) as refused:
        create_token(user=lead, name="third")
    assert refused.value.message_dict == {
        "name": [
            "You have 2 live tokens, the most one person may hold: revoke one you no longer "
            "use, then create this one."
        ]
    }
    revoke_token(user=lead, token_id=first.pk)
    expired, _ = create_token(user=lead, name="third")
    ApiToken.objects.filter(pk=expired.pk).update(expires_at=timezone.now())
    create_token(user=lead, name="fourth")  # revoked and expired ones are not live
    assert ApiToken.objects.filter(user=lead).count() == 4


def test_me_says_who_the_token_is_with_their_teams_and_roles(client: Client, demo: None) -> None:
    lead = client.get("/api/v1/me/", headers=bearer("lead-a"))
    assert lead.json() == {
        "username": "lead-a",
        "platform_admin": False,
        "approver": False,
        "sees_every_team": False,
        "teams": [{"slug": "team-a", "name": lead.json()["teams"][0]["name"], "role": "lead"}],
    }
    approver = client.get("/api/v1/me/", headers=bearer("approver")).json()
    assert (approver["approver"], approver["platform_admin"], approver["teams"]) == (
        True,
        False,
        [],
    )
    assert client.get("/api/v1/me/", headers=bearer("admin")).json()["platform_admin"] is True
    assert client.get("/api/v1/me/").status_code in (401, 403)
    assert client.get("/api/v1/", headers=bearer("lead-a")).json()["me"].endswith("/api/v1/me/")
