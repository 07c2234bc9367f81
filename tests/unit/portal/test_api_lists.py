"""Lists read their parameters strictly: a page that is no page number, a filter value the
filter cannot take (a team you cannot see, a boolean that is neither true nor false), an
empty or repeated filter and an ordering by an unknown field are each a 400 naming the
parameter, never ignored; the schema states what each one takes."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.api.schema import PLAIN_TEXT
from tests.support import bearer, served_schema

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("page", ["-1", "0", "abc", "", "1.5", "+1", "9" * 5000])
def test_a_page_that_is_no_page_number_is_a_field_error(
    client: Client, fleet: None, page: str
) -> None:
    response = client.get(f"/api/v1/teams/?page={page}", headers=bearer("admin"))
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert body["errors"]["page"] == [
        "A page number is a whole number from 1 to 2147483647; 1 is the first page."
    ]


def test_one_page_number_at_a_time_and_a_page_after_the_last_is_404(
    client: Client, fleet: None
) -> None:
    admin = bearer("admin")
    repeated = client.get("/api/v1/teams/?page=1&page=2", headers=admin)
    assert (repeated.status_code, repeated.json()["errors"]) == (
        400,
        {"page": ["Give one page number."]},
    )
    after = client.get("/api/v1/teams/?page=2", headers=admin)
    assert after.status_code == 404
    assert after.json() == {
        "detail": "There is no page 2: That page contains no results.",
        "code": "not_found",
    }
    assert client.get("/api/v1/teams/?page=1", headers=admin).json()["count"] == 4


def test_the_schema_states_the_page_bounds(client: Client, fleet: None) -> None:
    parameters = served_schema(client)["paths"]["/api/v1/teams/"]["get"]["parameters"]
    page = next(p for p in parameters if p["name"] == "page")
    assert page["schema"] == {"type": "integer", "minimum": 1, "maximum": 2147483647}


TEAM_LISTS = (
    "/api/v1/namespaces/",
    "/api/v1/memberships/",
    "/api/v1/local-queues/",
    "/api/v1/mig-changes/",
    "/api/v1/quota-requests/",
    "/api/v1/audit/",
    "/api/v1/waiting/",
    "/api/v1/manifests/",
)


@pytest.mark.parametrize("path", TEAM_LISTS)
def test_a_team_you_cannot_see_is_refused_like_one_that_does_not_exist(
    client: Client, fleet: None, path: str
) -> None:
    """``?team=team-b`` for team-a's lead once answered with team-a's rows (or nothing):
    now the same 400 as a slug no team has, naming ``team`` and the teams that would do."""
    lead = bearer("lead-a")
    answers = [client.get(f"{path}?team={team}", headers=lead) for team in ("team-b", "nope")]
    assert [a.status_code for a in answers] == [400, 400]
    assert answers[0].json() == answers[1].json()
    assert answers[0].json()["errors"] == {"team": ["No such team among yours: use one of team-a."]}
    assert client.get(f"{path}?team=team-a", headers=lead).status_code == 200


def test_the_team_filter_filters(client: Client, fleet: None) -> None:
    admin = bearer("admin")
    names = [
        n["name"]
        for n in client.get("/api/v1/namespaces/?team=team-b", headers=admin).json()["results"]
    ]
    assert names == ["team-b"]
    members = client.get("/api/v1/memberships/?team=team-a&role=lead", headers=admin).json()
    assert [(m["team"], m["user"]) for m in members["results"]] == [("team-a", "lead-a")]


def test_a_boolean_filter_takes_true_or_false_only(client: Client, fleet: None) -> None:
    admin = bearer("admin")
    for value in ("maybe", "1", "True", "null"):
        response = client.get(f"/api/v1/nodes/?unschedulable={value}", headers=admin)
        assert (response.status_code, response.json()["errors"]) == (
            400,
            {"unschedulable": ["Use true or false."]},
        ), value
    assert client.get("/api/v1/nodes/?unschedulable=false", headers=admin).json()["count"] == 1
    assert client.get("/api/v1/nodes/?unschedulable=true", headers=admin).json()["count"] == 0


def test_a_filter_sent_empty_or_twice_is_refused(client: Client, fleet: None) -> None:
    admin = bearer("admin")
    empty = client.get("/api/v1/mig-changes/?state=", headers=admin)
    assert (empty.status_code, empty.json()["errors"]) == (
        400,
        {"state": ["Give a value, or leave state out."]},
    )
    twice = client.get("/api/v1/audit/?source=api&source=web", headers=admin)
    assert (twice.status_code, twice.json()["errors"]) == (400, {"source": ["Give one value."]})


def test_ordering_by_an_unknown_field_is_refused_and_the_schema_lists_the_fields(
    client: Client, fleet: None
) -> None:
    admin = bearer("admin")
    refused = client.get("/api/v1/teams/?ordering=__main__", headers=admin)
    assert (refused.status_code, refused.json()["errors"]) == (
        400,
        {
            "ordering": [
                "Order by description, name, slug (a leading - for descending; several "
                "comma-separated)."
            ]
        },
    )
    slugs = [
        t["slug"]
        for t in client.get("/api/v1/teams/?ordering=-slug", headers=admin).json()["results"]
    ]
    assert slugs == sorted(slugs, reverse=True)
    parameters = served_schema(client)["paths"]["/api/v1/teams/"]["get"]["parameters"]
    ordering = next(p for p in parameters if p["name"] == "ordering")
    term = "-?(description|name|slug)"
    assert ordering["schema"] == {"type": "string", "pattern": f"^{term}(,{term})*$"}


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("/api/v1/gpu-health/?node=", "node"),
        ("/api/v1/reports/gpu-hours/?days=", "days"),
        ("/api/v1/manifests/?team=", "team"),
        ("/api/v1/waiting/?team=team-a&team=team-a", "team"),
    ],
)
def test_a_query_parameter_sent_empty_or_twice_is_refused_everywhere(
    client: Client, fleet: None, url: str, name: str
) -> None:
    """DRF read an empty optional parameter as absent (``?team=`` exported every team)."""
    response = client.get(url, headers=bearer("admin"))
    assert response.status_code == 400
    assert list(response.json()["errors"]) == [name]


def test_the_schema_says_a_query_parameter_takes_a_value(client: Client, fleet: None) -> None:
    paths = served_schema(client)["paths"]
    nodes = {p["name"]: p["schema"] for p in paths["/api/v1/nodes/"]["get"]["parameters"]}
    assert nodes["gpu_product"] == {"type": "string", "minLength": 1, "pattern": PLAIN_TEXT}
    assert "minLength" not in nodes["ordering"]  # its pattern says it
