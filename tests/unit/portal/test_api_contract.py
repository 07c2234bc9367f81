"""The served schema states what the API does: what can be null is nullable, text is a
JSON string, input bodies are closed, the headers (If-Match, Idempotency-Key) and the
answers they earn are documented; and a team you cannot see is, in a request, a team that
does not exist."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from django.contrib.auth.models import User
from django.test import Client

from changes.models import MigChangeRequest, QuotaChangeRequest
from queues.models import ClusterQueue
from tenants.models import Team
from tests.support import bearer, served_schema

pytestmark = pytest.mark.django_db


def as_json_schema(node: Any) -> Any:
    """OpenAPI 3.0's ``nullable`` spelled as JSON Schema (``type: [..., "null"]``), refs kept."""
    if isinstance(node, list):
        return [as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: as_json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable"):
        if "type" in converted:
            converted["type"] = [converted["type"], "null"]
        elif "$ref" in converted or "allOf" in converted or "oneOf" in converted:
            converted = {"anyOf": [converted, {"type": "null"}]}
        if "enum" in converted:
            converted["enum"] = [*converted["enum"], None]
    return converted


def assert_conforms(schema: dict[str, Any], component: str, body: Any) -> None:
    """``body`` is valid against ``#/components/schemas/<component>`` of the served schema."""
    document = as_json_schema(schema)
    jsonschema.validate(
        body,
        {"$ref": f"#/components/schemas/{component}", "components": document["components"]},
    )


def test_people_and_objects_that_can_be_missing_are_declared_nullable(
    client: Client, fleet: None
) -> None:
    """A drain the portal suggested has no requester; an undecided request no decider; a
    namespace quota request no ClusterQueue (and the other way round) and no auto rule."""
    suggested = MigChangeRequest.objects.create(
        kind=MigChangeRequest.Kind.DRAIN,
        team=None,
        requested_by=None,
        nodes=["gpu-a100-03"],
        reason="Xid 79 on GPU 0",
    )
    quota = QuotaChangeRequest.objects.create(
        team=Team.objects.get(slug="team-a"),
        kind=QuotaChangeRequest.Kind.QUEUE,
        cluster_queue=ClusterQueue.objects.first(),
        resource="nvidia.com/gpu",
        requested="4",
        reason="more",
        requested_by=User.objects.get(username="lead-a"),
    )
    ClusterQueue.objects.filter(pk=ClusterQueue.objects.first().pk).update(cohort=None)  # type: ignore[union-attr]
    schema = served_schema(client)
    admin = bearer("admin")

    change = client.get(f"/api/v1/mig-changes/{suggested.pk}/", headers=admin).json()
    assert (change["requested_by"], change["decided_by"], change["team"]) == (None, None, None)
    assert_conforms(schema, "MigChange", change)
    request = client.get(f"/api/v1/quota-requests/{quota.pk}/", headers=admin).json()
    assert (request["namespace"], request["auto_rule"]) == (None, None)
    assert_conforms(schema, "QuotaRequest", request)
    queues = client.get("/api/v1/cluster-queues/", headers=admin).json()["results"]
    assert None in [queue["cohort"] for queue in queues]
    assert_conforms(schema, "PaginatedClusterQueueList", {"count": 1, "results": queues})


def test_text_fields_take_json_strings_only(client: Client, fleet: None) -> None:
    """DRF turned ``0`` into ``"0"``; the schema says string, so a number is refused."""
    admin = bearer("admin")
    response = client.patch(
        "/api/v1/teams/team-a/", {"description": 0}, content_type="application/json", headers=admin
    )
    assert (response.status_code, response.json()["errors"]) == (
        400,
        {"description": ["Not a valid string."]},
    )
    response = client.post(
        "/api/v1/mig-changes/preview/",
        {"nodes": ["gpu-a100-03", 0], "target_config": "all-3g.40gb"},
        content_type="application/json",
        headers=admin,
    )
    assert (response.status_code, response.json()["errors"]) == (
        400,
        {"nodes": {"1": ["Not a valid string."]}},
    )
    response = client.put(
        "/api/v1/namespaces/team-a/quota/",
        {"hard": {"pods": 10}},
        content_type="application/json",
        headers=admin,
    )
    assert (response.status_code, response.json()["errors"]) == (
        400,
        {"hard": {"pods": ["Not a valid string."]}},
    )
    response = client.put(
        "/api/v1/cluster-queues/cq-dev/quotas/",
        {"resource_groups": [], "dry_run": 1},
        content_type="application/json",
        headers=admin,
    )
    assert (response.status_code, response.json()["errors"]) == (
        400,
        {"dry_run": ["Must be true or false."]},
    )
    assert Team.objects.get(slug="team-a").description != "0"


def test_input_bodies_are_closed_and_non_empty_lists_say_so(client: Client, fleet: None) -> None:
    components = served_schema(client)["components"]["schemas"]
    for name in ("TeamWriteRequest", "QuotaWriteRequest", "LimitItemRequest", "PreviewRequest"):
        assert components[name]["additionalProperties"] is False, name
        assert "Mixin for input serializers" not in components[name].get("description", "")
    assert components["PreviewRequest"]["properties"]["nodes"]["minItems"] == 1


def test_preconditions_and_idempotency_are_documented_where_they_apply(
    client: Client, fleet: None
) -> None:
    paths = served_schema(client)["paths"]

    def headers(path: str, method: str) -> dict[str, bool]:
        operation = paths[path][method]
        return {
            p["name"]: p.get("required", False)
            for p in operation["parameters"]
            if p["in"] == "header"
        }

    delete = paths["/api/v1/namespaces/{name}/"]["delete"]
    assert headers("/api/v1/namespaces/{name}/", "delete") == {"If-Match": True}
    assert {"412", "428"} <= set(delete["responses"])
    for path, method in (
        ("/api/v1/namespaces/{name}/quota/", "put"),
        ("/api/v1/namespaces/{name}/limits/", "put"),
        ("/api/v1/cluster-queues/{name}/quotas/", "put"),
        ("/api/v1/teams/{slug}/", "patch"),
        ("/api/v1/mig-changes/{id}/approve/", "post"),
        ("/api/v1/quota-requests/{id}/cancel/", "post"),
    ):
        assert headers(path, method).get("If-Match") is False, path
        assert (
            "412" in paths[path][method]["responses"]
            and "428" not in paths[path][method]["responses"]
        )
    for path in ("/api/v1/teams/", "/api/v1/mig-changes/", "/api/v1/quota-requests/"):
        assert "Idempotency-Key" in headers(path, "post")
        assert "422" in paths[path]["post"]["responses"]
    assert "412" not in paths["/api/v1/teams/"]["get"]["responses"]
    report = paths["/api/v1/reports/{name}/"]["get"]["parameters"]
    assert next(p for p in report if p["name"] == "name")["schema"]["enum"] == [
        "borrowing",
        "gpu-hours",
        "idle-capacity",
        "queue-gpu-hours",
        "quota-utilisation",
        "usage-over-time",
        "wait-times",
    ]
    worst = paths["/api/v1/gpu-health/"]["get"]["parameters"]
    levels = next(p for p in worst if p["name"] == "worst")["schema"]["enum"]
    assert sorted(levels) == ["critical", "info", "ok", "warning"]


MIG_CHANGE = {"nodes": ["gpu-a100-03"], "target_config": "all-3g.40gb", "reason": "x"}
QUOTA = {"kind": "namespace", "resource": "pods", "requested": "60", "reason": "x"}


@pytest.mark.parametrize(
    ("path", "body"),
    [("/api/v1/mig-changes/", MIG_CHANGE), ("/api/v1/quota-requests/", QUOTA)],
)
def test_asking_for_a_team_you_cannot_see_is_like_asking_for_none(
    client: Client, fleet: None, path: str, body: dict[str, Any]
) -> None:
    """team-b exists, but not for team-a's lead: the same 400 as a team no one has (it was a
    403, telling the two apart)."""
    lead = bearer("lead-a")
    answers = [
        client.post(path, {**body, "team": team}, content_type="application/json", headers=lead)
        for team in ("team-b", "no-such-team")
    ]
    assert [a.status_code for a in answers] == [400, 400]
    assert (
        answers[0].json()
        == answers[1].json()
        == {
            "detail": "Invalid input.",
            "code": "invalid",
            "errors": {"team": ["No such team."]},
        }
    )
    # a team you see but may not ask for is still a 403 (team-a's member)
    member = client.post(
        path,
        {**body, "team": "team-a"},
        content_type="application/json",
        headers=bearer("member-a"),
    )
    assert member.status_code == 403


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/teams/", {"slug": "team-b", "name": "B again"}),
        ("/api/v1/teams/", {"slug": "team-new", "name": "New"}),
        ("/api/v1/namespaces/", {"name": "fresh", "team": "team-b"}),
        ("/api/v1/namespaces/", {"name": "fresh", "team": "no-such-team"}),
    ],
)
def test_a_lead_creating_teams_or_namespaces_learns_nothing_of_other_teams(
    client: Client, fleet: None, path: str, body: dict[str, Any]
) -> None:
    response = client.post(path, body, content_type="application/json", headers=bearer("lead-a"))
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")


def test_a_dry_run_of_a_queue_edit_answers_as_documented(client: Client, fleet: None) -> None:
    """``dry_run: true`` answers the diff, not the queue: the schema says either."""
    admin = bearer("admin")
    queue = client.get("/api/v1/cluster-queues/cq-dev/", headers=admin).json()
    response = client.put(
        "/api/v1/cluster-queues/cq-dev/quotas/",
        {"resource_groups": queue["resource_groups"], "dry_run": True},
        content_type="application/json",
        headers=admin,
    )
    assert response.status_code == 200 and response.json()["dry_run"] is True
    schema = served_schema(client)
    assert_conforms(schema, "QuotasResult", response.json())
    assert_conforms(schema, "QuotasResult", queue)


def test_the_servers_answer_to_a_too_long_request_line_is_documented(
    client: Client, fleet: None
) -> None:
    for path in served_schema(client)["paths"].values():
        for operation in path.values():
            assert "text/html" in operation["responses"]["414"]["content"]
