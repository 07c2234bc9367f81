"""Bodies the API cannot take are answered in its error shape, never with a 500 or an HTML
page: too big (413), nested too deep or not JSON (400); nothing changes."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from portal.api.parsers import MAX_DEPTH, too_deep
from tenants.models import Namespace
from tests.support import bearer

pytestmark = pytest.mark.django_db
QUOTA = "/api/v1/namespaces/team-a/quota/"


def quota_before() -> dict[str, str]:
    items = Namespace.objects.get(name="team-a").quota_items.all()
    return {item.resource: item.hard for item in items}


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 5000, 100_000])
def test_a_body_nested_too_deep_is_a_400_in_the_api_shape(demo: None, depth: int) -> None:
    before = quota_before()
    body = "[" * depth + "]" * depth
    answer = Client().put(
        QUOTA, body, content_type="application/json", headers={**bearer("admin"), "If-Match": "*"}
    )
    assert answer.status_code == 400
    assert answer["Content-Type"] == "application/json"
    payload = answer.json()
    assert payload["code"] == "parse_error"
    assert payload["detail"] == "The body nests deeper than 32 levels."
    assert quota_before() == before


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_body_over_the_upload_limit_is_a_413_in_the_api_shape(
    demo: None, idempotent: bool
) -> None:
    headers = bearer("lead-a")
    if idempotent:
        headers["Idempotency-Key"] = "big-1"
    big = json.dumps({"reason": "x" * 3_000_000})
    answer = Client().post(
        "/api/v1/quota-requests/", big, content_type="application/json", headers=headers
    )
    assert answer.status_code == 413
    assert answer.json() == {
        "detail": "The request body is larger than 2621440 bytes.",
        "code": "too_large",
    }


def test_a_body_that_is_not_json_says_where(demo: None) -> None:
    answer = Client().post(
        "/api/v1/quota-requests/",
        '{"team": "team-a",',
        content_type="application/json",
        headers=bearer("lead-a"),
    )
    assert answer.status_code == 400
    assert answer.json()["detail"].startswith("The body is not valid JSON:")


def test_depth_is_counted_without_recursion() -> None:
    nested: list[object] = []
    for _ in range(200_000):
        nested = [nested]
    assert too_deep(nested)
    assert not too_deep({"a": [{"b": [1, 2, {"c": "d"}]}]})
    assert too_deep([[[1]]], limit=2) and not too_deep([[1]], limit=2)
