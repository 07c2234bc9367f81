"""How ``qm`` words the API's refusals for a person at a terminal."""

from __future__ import annotations

import json

import requests

from cli.client import describe


def answer(status: int, body: object) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response._content = json.dumps(body).encode()
    return response


def test_a_missing_cluster_says_how_to_name_one() -> None:
    said = describe(
        answer(
            400,
            {
                "detail": "Invalid input.",
                "code": "invalid",
                "errors": {"cluster": ["Choose the cluster: default, inference."]},
            },
        )
    )
    assert "cluster: Choose the cluster: default, inference." in said
    assert "--cluster NAME" in said


def test_another_field_error_gets_no_cluster_hint() -> None:
    said = describe(
        answer(400, {"detail": "Invalid input.", "errors": {"namespace": ["No such namespace."]}})
    )
    assert "namespace: No such namespace." in said and "--cluster" not in said
