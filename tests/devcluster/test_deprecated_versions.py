"""The demo cluster warns of a deprecated Kueue version on every request for it, as the API
server does for a CRD version marked ``deprecated`` (the text is the CRD's
``deprecationWarning``); the current version carries no warning."""

from __future__ import annotations

import pytest

from tests.devcluster.test_recordings import Demo

DEPRECATED = '299 - "This version is deprecated. Use v1beta2 instead."'


@pytest.mark.parametrize(
    "path",
    [
        "/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
        "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues",
        "/apis/kueue.x-k8s.io/v1beta1/resourceflavors",
        "/apis/kueue.x-k8s.io/v1beta1/cohorts",
    ],
)
def test_a_request_for_v1beta1_carries_the_deprecation_warning(path: str) -> None:
    response = Demo().call("GET", path)
    assert response.status == 200
    assert response.headers["Warning"] == DEPRECATED


def test_an_apply_through_v1beta1_is_warned_of_too() -> None:
    body = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\n"
        "metadata:\n  name: old-api\nspec: {}\n"
    )
    response = Demo().call(
        "PATCH",
        "/apis/kueue.x-k8s.io/v1beta1/resourceflavors/old-api?fieldManager=portal",
        body,
        content_type="application/apply-patch+yaml",
    )
    assert response.status == 201
    assert response.headers["Warning"] == DEPRECATED


@pytest.mark.parametrize(
    "path",
    [
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
        "/api/v1/namespaces",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
    ],
)
def test_current_versions_carry_no_warning(path: str) -> None:
    response = Demo().call("GET", path)
    assert response.status == 200
    assert "Warning" not in response.headers
