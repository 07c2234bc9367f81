"""REST API of the cluster loop: the export of desired state."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support import bearer

pytestmark = pytest.mark.django_db


def test_a_bad_team_slug_in_the_export_is_a_field_error(client: Client, fleet: None) -> None:
    response = client.get("/api/v1/manifests/?team=a%00b", headers=bearer("admin"))
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["team"]
    response = client.get("/api/v1/manifests/?format=xml", headers=bearer("admin"))
    assert response.status_code == 400
    assert response.json()["errors"] == {"format": ['"xml" is not a valid choice.']}
