"""REST API: tokens, scoping, the permission matrix on decisions, one error format."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from changes.models import MigChangeRequest
from cluster.models import ObservedNode, ObservedPod
from demo.services import load_demo
from portal.models import ApiToken
from portal.tokens import create_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(db: Any) -> None:
    load_demo()
    now = timezone.now()
    ObservedNode.objects.create(
        name="gpu-a100-03",
        gpu_product="NVIDIA-A100-SXM4-80GB",
        gpu_count=8,
        mig_config="all-balanced",
        mig_config_state="failed",
        labels={"quartermaster.io/pool": "train", "nvidia.com/mig.config": "all-balanced"},
        allocatable={"nvidia.com/mig-2g.20gb": "8", "nvidia.com/mig-1g.10gb": "16"},
        ready=True,
        first_seen=now,
        last_changed=now,
    )
    ObservedPod.objects.create(
        namespace="team-b",
        name="dev-test-1g",
        node_name="gpu-a100-03",
        phase="Running",
        gpu_requests={"nvidia.com/mig-1g.10gb": 4},
        last_changed=now,
    )


def bearer(username: str) -> dict[str, str]:
    _, text = create_token(user=User.objects.get(username=username), name="test")
    return {"Authorization": f"Bearer {text}"}


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
    assert client.get("/api/v1/teams/").status_code in (401, 403)


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


def test_mig_change_over_the_api_with_the_permission_matrix(client: Client, fleet: None) -> None:
    body = {
        "team": "team-a",
        "nodes": ["gpu-a100-03"],
        "target_config": "all-3g.40gb",
        "reason": "back to 3g",
    }
    assert (
        client.post(
            "/api/v1/mig-changes/",
            body,
            content_type="application/json",
            headers=bearer("member-a"),
        ).status_code
        == 403
    )
    created = client.post(
        "/api/v1/mig-changes/", body, content_type="application/json", headers=bearer("lead-a")
    )
    assert created.status_code == 201, created.json()
    change = created.json()
    assert (change["state"], change["verdict"]) == ("pending", "breaks_quota")
    url = f"/api/v1/mig-changes/{change['id']}/approve/"
    # The requester is no approver (403); other teams do not see it (404).
    matrix = {"lead-a": 403, "member-a": 403, "lead-b": 404, "viewer-dev": 404}
    for user, expected in matrix.items():
        assert (
            client.post(url, {}, content_type="application/json", headers=bearer(user)).status_code
            == expected
        ), user
    refused = client.post(url, {}, content_type="application/json", headers=bearer("lead-a")).json()
    assert refused == {"detail": "Only approvers decide MIG changes.", "code": "permission_denied"}
    approved = client.post(
        url, {"comment": "ok"}, content_type="application/json", headers=bearer("approver")
    )
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    assert (
        client.post(url, {}, content_type="application/json", headers=bearer("admin")).json()[
            "code"
        ]
        == "illegal_transition"
    )


def test_bad_input_gives_field_errors_and_writes_nothing(client: Client, fleet: None) -> None:
    response = client.post(
        "/api/v1/mig-changes/",
        {"team": "team-a", "nodes": ["gpu-a100-03"], "target_config": "all-1g.5gb", "reason": ""},
        content_type="application/json",
        headers=bearer("lead-a"),
    )
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"reason"}
    response = client.post(
        "/api/v1/mig-changes/",
        {"team": "team-a", "nodes": "gpu-a100-03"},
        content_type="application/json",
        headers=bearer("lead-a"),
    )
    assert response.status_code == 400 and {"nodes", "target_config", "reason"} <= set(
        response.json()["errors"]
    )
    response = client.post(
        "/api/v1/mig-changes/",
        "{not json",
        content_type="application/json",
        headers=bearer("lead-a"),
    )
    assert response.status_code == 400 and response.json()["code"] == "parse_error"
    assert not MigChangeRequest.objects.exists()


def test_preview_configs_and_manifests(client: Client, fleet: None) -> None:
    preview = client.post(
        "/api/v1/mig-changes/preview/",
        {"nodes": ["gpu-a100-03"], "target_config": "all-3g.40gb"},
        content_type="application/json",
        headers=bearer("lead-a"),
    ).json()
    assert preview["evictions"][0]["pod"] == "dev-test-1g"
    configs = client.get("/api/v1/mig-configs/?node=gpu-a100-03", headers=bearer("lead-a")).json()
    assert configs["model"] == "A100-80GB" and "all-3g.40gb" in configs["configs"]
    yaml_text = client.get(
        "/api/v1/manifests/?team=team-a&format=yaml", headers=bearer("lead-a")
    ).content.decode()
    assert "kind: ResourceQuota" in yaml_text and "team-b" not in yaml_text
    assert client.get("/api/v1/manifests/", headers=bearer("lead-a")).status_code == 403
    assert client.get("/api/v1/manifests/?team=team-b", headers=bearer("lead-a")).status_code == 404


def test_schema_and_docs_are_served(client: Client, fleet: None) -> None:
    client.force_login(User.objects.get(username="lead-a"))
    schema = client.get(
        "/api/schema/?format=json", headers={"Accept": "application/vnd.oai.openapi+json"}
    )
    assert schema.status_code == 200
    assert b"/api/v1/mig-changes/{id}/approve/" in schema.content
    assert client.get("/api/docs/").status_code == 200


def test_an_admin_cannot_approve_their_own_request(client: Client, fleet: None) -> None:
    body = {
        "team": "team-a",
        "nodes": ["gpu-a100-03"],
        "target_config": "all-3g.40gb",
        "reason": "mine",
    }
    change = client.post(
        "/api/v1/mig-changes/", body, content_type="application/json", headers=bearer("admin")
    ).json()
    own = client.post(
        f"/api/v1/mig-changes/{change['id']}/approve/",
        {},
        content_type="application/json",
        headers=bearer("admin"),
    )
    assert (own.status_code, own.json()) == (
        409,
        {
            "detail": "You cannot approve your own request; another approver must.",
            "code": "self_approval",
        },
    )


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


def test_if_match_refuses_a_decision_on_a_stale_read(client: Client, fleet: None) -> None:
    body = {
        "team": "team-a",
        "nodes": ["gpu-a100-03"],
        "target_config": "all-3g.40gb",
        "reason": "x",
    }
    change = client.post(
        "/api/v1/mig-changes/", body, content_type="application/json", headers=bearer("lead-a")
    ).json()
    read = client.get(f"/api/v1/mig-changes/{change['id']}/", headers=bearer("approver"))
    etag = read["ETag"]
    MigChangeRequest.objects.filter(pk=change["id"]).update(
        decision_comment="touched", updated_at=timezone.now()
    )
    stale = client.post(
        f"/api/v1/mig-changes/{change['id']}/approve/",
        {},
        content_type="application/json",
        headers={**bearer("approver"), "If-Match": etag},
    )
    assert (stale.status_code, stale.json()["code"]) == (412, "precondition_failed")
    fresh = client.get(f"/api/v1/mig-changes/{change['id']}/", headers=bearer("approver"))["ETag"]
    ok = client.post(
        f"/api/v1/mig-changes/{change['id']}/approve/",
        {},
        content_type="application/json",
        headers={**bearer("approver"), "If-Match": fresh},
    )
    assert ok.status_code == 200


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
    assert client.get(path).status_code in (401, 403)
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


def test_rate_limit_is_per_token(
    client: Client, fleet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.core.cache import cache

    from portal.tokens import TokenRateThrottle

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


def test_admins_create_and_change_teams_with_if_match(client: Client, fleet: None) -> None:
    from portal.models import AuditEvent
    from tenants.models import Team

    admin = bearer("admin")
    body = {"slug": "team-new", "name": "New", "allowed_priority_classes": ["dev-best-effort"]}
    assert (
        client.post(
            "/api/v1/teams/", body, content_type="application/json", headers=bearer("lead-a")
        ).status_code
        == 403
    )
    bad = client.post(
        "/api/v1/teams/",
        {**body, "slug": "Team_New", "allowed_priority_classes": ["nope"]},
        content_type="application/json",
        headers=admin,
    )
    assert bad.status_code == 400
    assert "nope" in str(bad.json()["errors"]["allowed_priority_classes"])
    bad = client.post(
        "/api/v1/teams/",
        {**body, "slug": "Team_New"},
        content_type="application/json",
        headers=admin,
    )
    assert bad.status_code == 400 and "slug" in bad.json()["errors"]
    assert not Team.objects.filter(name="New").exists()

    created = client.post("/api/v1/teams/", body, content_type="application/json", headers=admin)
    assert created.status_code == 201, created.json()
    assert created.json()["allowed_priority_classes"] == ["dev-best-effort"]
    etag = client.get("/api/v1/teams/team-new/", headers=admin).headers["ETag"]
    assert etag == created.headers["ETag"]
    changed = client.patch(
        "/api/v1/teams/team-new/",
        {"name": "Newer"},
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert changed.status_code == 200 and changed.json()["name"] == "Newer"
    stale = client.patch(
        "/api/v1/teams/team-new/",
        {"name": "Lost update"},
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert stale.status_code == 412
    assert Team.objects.get(slug="team-new").name == "Newer"
    assert AuditEvent.objects.filter(event="team.changed", source="api").exists()


def test_quota_and_limits_over_the_api(client: Client, fleet: None) -> None:
    from portal.models import AuditEvent
    from tenants.models import Namespace

    admin = bearer("admin")
    url = "/api/v1/namespaces/team-a/"
    read = client.get(url, headers=admin)
    etag, before = read.headers["ETag"], read.json()["quota"]
    # a lead reads their namespace but cannot change the quota; another team's lead sees nothing
    assert client.get(url, headers=bearer("lead-a")).status_code == 200
    assert (
        client.put(
            url + "quota/",
            {"hard": {"pods": "10"}},
            content_type="application/json",
            headers=bearer("lead-a"),
        ).status_code
        == 403
    )
    assert (
        client.put(
            url + "quota/",
            {"hard": {"pods": "10"}},
            content_type="application/json",
            headers=bearer("lead-b"),
        ).status_code
        == 404
    )
    # out-of-range quantities are refused per item and nothing changes
    bad = client.put(
        url + "quota/",
        {"hard": {"requests.nvidia.com/gpu": "1.5", "pods": "10"}},
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert bad.status_code == 400
    assert "hard[requests.nvidia.com/gpu]" in bad.json()["errors"]
    assert client.get(url, headers=admin).json()["quota"] == before

    good = client.put(
        url + "quota/",
        {"hard": {**before, "requests.nvidia.com/gpu": "32"}},
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert good.status_code == 200, good.json()
    assert good.json()["quota"]["requests.nvidia.com/gpu"] == "32"
    assert good.headers["ETag"] != etag
    stale = client.put(
        url + "quota/",
        {"hard": {}},
        content_type="application/json",
        headers={**admin, "If-Match": etag},
    )
    assert stale.status_code == 412
    assert client.get(url, headers=admin).json()["quota"]["requests.nvidia.com/gpu"] == "32"
    assert AuditEvent.objects.filter(event="quota.changed", source="api").exists()

    limits = client.put(
        url + "limits/",
        {
            "limits": [
                {
                    "limit_type": "Container",
                    "resource": "cpu",
                    "default": "2",
                    "default_request": "1",
                }
            ]
        },
        content_type="application/json",
        headers=admin,
    )
    assert limits.status_code == 200, limits.json()
    assert limits.json()["limits"][0]["default"] == "2"
    wrong = client.put(
        url + "limits/",
        {"limits": [{"limit_type": "Node", "resource": "cpu"}]},
        content_type="application/json",
        headers=admin,
    )
    assert wrong.status_code == 400
    assert Namespace.objects.get(name="team-a").limit_items.count() == 1


def test_admins_create_and_remove_namespaces(client: Client, fleet: None) -> None:
    from tenants.models import Namespace

    admin = bearer("admin")
    bad = client.post(
        "/api/v1/namespaces/",
        {"name": "Bad_Name", "team": "team-a"},
        content_type="application/json",
        headers=admin,
    )
    assert bad.status_code == 400 and "name" in bad.json()["errors"]
    assert (
        client.post(
            "/api/v1/namespaces/",
            {"name": "team-a-x", "team": "team-a"},
            content_type="application/json",
            headers=bearer("lead-a"),
        ).status_code
        == 403
    )
    created = client.post(
        "/api/v1/namespaces/",
        {"name": "team-a-x", "team": "team-a"},
        content_type="application/json",
        headers=admin,
    )
    assert created.status_code == 201, created.json()
    again = client.post(
        "/api/v1/namespaces/",
        {"name": "team-a-x", "team": "team-a"},
        content_type="application/json",
        headers=admin,
    )
    assert again.status_code == 400 and "name" in again.json()["errors"]
    assert (
        client.delete("/api/v1/namespaces/team-a-x/", headers=bearer("lead-a")).status_code == 403
    )
    assert client.delete("/api/v1/namespaces/team-a-x/", headers=admin).status_code == 204
    assert not Namespace.objects.filter(name="team-a-x").exists()


def test_unrouted_api_paths_answer_in_the_api_error_format(client: Client, fleet: None) -> None:
    response = client.get("/api/v1/namespaces/a.b/", headers=bearer("admin"))
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found.", "code": "not_found"}
    assert client.get("/no-such-page/").headers["Content-Type"].startswith("text/html")
    # whatever the method, and with CSRF checks on as for a real client
    strict = Client(enforce_csrf_checks=True)
    response = strict.put("/api/v1/namespaces/a./quota/", {}, content_type="application/json")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_if_match_refuses_a_quota_decision_on_a_stale_read(client: Client, fleet: None) -> None:
    from changes.models import QuotaChangeRequest

    created = client.post(
        "/api/v1/quota-requests/",
        {
            "team": "team-a",
            "kind": "namespace",
            "namespace": "team-a",
            "resource": "requests.nvidia.com/gpu",
            "requested": "24",
            "reason": "deadline",
        },
        content_type="application/json",
        headers=bearer("lead-a"),
    ).json()
    url = f"/api/v1/quota-requests/{created['id']}/"
    approver = bearer("approver")
    read = client.get(url, headers=approver)
    stale = '"0000"'
    refused = client.post(
        url + "approve/",
        {"comment": "ok"},
        content_type="application/json",
        headers={**approver, "If-Match": stale},
    )
    assert refused.status_code == 412
    assert QuotaChangeRequest.objects.get(pk=created["id"]).state == "pending"
    done = client.post(
        url + "approve/",
        {"comment": "ok"},
        content_type="application/json",
        headers={**approver, "If-Match": read.headers["ETag"]},
    )
    assert done.status_code == 200, done.json()
    assert done.headers["ETag"] != read.headers["ETag"]


def test_gpu_health_names_only_your_teams_pods(client: Client, fleet: None) -> None:
    from cluster.models import Drift
    from health.models import NodeHealth

    NodeHealth.objects.create(
        node="gpu-a100-03",
        observed_at=timezone.now(),
        worst="critical",
        findings=[{"gpu": 0, "severity": "critical", "title": "GPU 0: Xid 48", "advice": "Drain."}],
        gpus=[
            {
                "index": 0,
                "xid": 48,
                "instances": [
                    {
                        "profile": "1g.10gb",
                        "instance": 1,
                        "namespace": "team-b",
                        "pod": "dev-test-1g",
                    },
                    {"profile": "1g.10gb", "instance": 2, "namespace": "team-a", "pod": "mine"},
                ],
            }
        ],
    )
    assert client.get("/api/v1/gpu-health/").status_code in (401, 403)
    (row,) = client.get("/api/v1/gpu-health/", headers=bearer("lead-a")).json()
    assert row["worst"] == "critical" and row["findings"][0]["title"] == "GPU 0: Xid 48"
    assert [(i["namespace"], i["pod"]) for i in row["gpus"][0]["instances"]] == [
        ("", "(another team's pod)"),
        ("team-a", "mine"),
    ]
    (row,) = client.get("/api/v1/gpu-health/?worst=critical", headers=bearer("approver")).json()
    assert row["gpus"][0]["instances"][0]["pod"] == "dev-test-1g"
    assert client.get("/api/v1/gpu-health/?worst=ok", headers=bearer("admin")).json() == []

    now = timezone.now()
    Drift.objects.create(
        kind="mig_layout",
        subject="gpu-a100-03",
        field="nvidia.com/mig.config",
        desired="all-3g.40gb",
        observed="all-balanced",
        first_seen=now,
        last_seen=now,
    )
    (drift,) = client.get("/api/v1/drift/", headers=bearer("member-a")).json()
    assert (drift["subject"], drift["intended"], drift["observed"]) == (
        "gpu-a100-03",
        "all-3g.40gb",
        "all-balanced",
    )


def test_the_operator_check_without_a_cluster_says_so(client: Client, fleet: None) -> None:
    response = client.get("/api/v1/gpu-operator-check/", headers=bearer("admin"))
    assert response.status_code == 200
    body = response.json()
    assert body["passed"] is False
    ((item),) = body["items"]
    assert (item["name"], item["ok"], item["detail"]) == (
        "The Kubernetes API answers",
        False,
        "No Kubernetes cluster is configured: set KUBE_URL, KUBECONFIG or KUBE_IN_CLUSTER.",
    )


def test_query_parameters_with_nul_bytes_are_refused_not_a_server_error(
    client: Client, fleet: None
) -> None:
    for url in ("/api/v1/waiting/?namespace=a%00b", "/api/v1/gpu-health/?node=a%00b"):
        response = client.get(url, headers=bearer("lead-a"))
        assert response.status_code == 400, url
        assert "Null characters are not allowed." in str(response.json())


def test_a_bad_team_slug_in_the_export_is_a_field_error(client: Client, fleet: None) -> None:
    response = client.get("/api/v1/manifests/?team=a%00b", headers=bearer("admin"))
    assert response.status_code == 400


def test_admins_replace_cluster_queue_quotas_with_a_dry_run_first(
    client: Client, fleet: None
) -> None:
    from portal.models import AuditEvent
    from queues.models import ClusterQueue

    read = client.get("/api/v1/cluster-queues/cq-train/", headers=bearer("admin"))
    etag = read["ETag"]
    groups = read.json()["resource_groups"]
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "14"
    url = "/api/v1/cluster-queues/cq-train/quotas/"
    # Team leads may read, not write.
    assert (
        client.put(
            url,
            {"resource_groups": groups},
            content_type="application/json",
            headers=bearer("lead-a"),
        ).status_code
        == 403
    )
    dry = client.put(
        url,
        {"resource_groups": groups, "dry_run": True},
        content_type="application/json",
        headers=bearer("admin"),
    )
    assert dry.status_code == 200
    assert "\n-        nominalQuota: 12\n+        nominalQuota: 14\n" in dry.json()["diff"]
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 12
    saved = client.put(
        url,
        {"resource_groups": groups},
        content_type="application/json",
        headers={**bearer("admin"), "If-Match": etag},
    )
    assert saved.status_code == 200 and saved["ETag"] != etag
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 14
    assert AuditEvent.objects.filter(event="cluster_queue.saved", source="api").exists()
    # The old ETag no longer matches; bad quantities are field errors; nothing changes.
    stale = client.put(
        url,
        {"resource_groups": groups},
        content_type="application/json",
        headers={**bearer("admin"), "If-Match": etag},
    )
    assert stale.status_code == 412
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "-1"
    bad = client.put(
        url, {"resource_groups": groups}, content_type="application/json", headers=bearer("admin")
    )
    assert bad.status_code == 400
    assert bad.json()["errors"] == {
        "resource_groups": [
            "resourceGroups[0].flavors[0].resources[0].nominalQuota: must be greater than or equal to 0"
        ]
    }
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 14
