"""Clients that fetch the OpenAPI schema at the same time all get it, the same one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.test import Client

from portal.api import schema_view


@pytest.mark.django_db(transaction=True)
def test_the_schema_fetched_by_eight_clients_at_once_is_one_schema() -> None:
    schema_view._SCHEMAS.clear()

    def fetch(_: int) -> tuple[int, bytes]:
        response = Client().get("/api/schema/?format=json")
        return response.status_code, response.content

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(fetch, range(8)))
    assert {status for status, _ in answers} == {200}
    assert len({body for _, body in answers}) == 1
    assert b"/api/v1/teams/:" in answers[0][1]
