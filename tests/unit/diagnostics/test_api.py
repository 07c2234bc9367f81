"""REST API of diagnostics."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support import bearer

pytestmark = pytest.mark.django_db


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
