"""Property tests of the served OpenAPI schema (schemathesis): for generated requests to
every operation, no 5xx, and every response matches the schema. Bounded examples."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from portal.tokens import create_token
from portal.wsgi_test import application


@pytest.fixture(autouse=True)
def keep_the_test_connection() -> Any:
    """As Django's test client does: requests must not close the test transaction's connection."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def token(demo: None) -> str:
    return create_token(user=User.objects.get(username="admin"), name="fuzz")[1]


@pytest.mark.django_db
def test_api_conforms_to_its_schema(token: str) -> None:
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 30
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=8, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def check(case: Any) -> None:
            # Business rules (an unknown team, a config the GPUs cannot take) refuse some
            # schema-valid input with 400 on purpose, so that check is left out.
            case.call_and_validate(
                headers={"Authorization": f"Bearer {token}"},
                excluded_checks=[positive_data_acceptance],
            )

        check()
