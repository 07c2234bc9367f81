"""The demo cluster's OpenAPI v2 and v3 documents: the index in the recorded shape, one
hashed document per group version, kinds with their group-version-kind, and field
validation of core kinds as the API server's strict decoding does it."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import kubernetes_validate
import orjson
import pytest

from devcluster import openapi
from tests.devcluster.test_recordings import Demo, expected, recording


@pytest.fixture
def simulated() -> Demo:
    return Demo()


def test_the_vendored_definitions_are_kubernetes_1_36s_for_the_served_kinds() -> None:
    source = (
        Path(kubernetes_validate.__file__).parent
        / "kubernetes-json-schema"
        / "v1.36.0-local"
        / "_definitions.json"
    )
    definitions = json.loads(source.read_text())["$defs"]
    vendored = json.loads(openapi.DATA.read_text())["definitions"]
    assert vendored == openapi.trim(definitions, openapi.core_roots())
    assert "io.k8s.api.core.v1.PodSpec" in vendored
    assert "io.k8s.api.apps.v1.Deployment" not in vendored


def test_the_v3_index_has_the_recorded_shape_and_each_hash_is_its_documents(
    simulated: Demo,
) -> None:
    response = simulated.replay("a9-get-openapi-v3-index")
    recorded = recording("a9-get-openapi-v3-index")["response"]
    assert response.status == 200
    assert response.headers["Content-Type"] == recorded["headers"]["Content-Type"]
    assert response.raw is not None
    index = orjson.loads(response.raw)["paths"]
    assert set(index) == {
        "api/v1",
        "apis/batch/v1",
        "apis/events.k8s.io/v1",
        "apis/kueue.x-k8s.io/v1beta1",
        "apis/kueue.x-k8s.io/v1beta2",
        "apis/policy/v1",
        "apis/resource.k8s.io/v1",
        "apis/scheduling.k8s.io/v1",
        "apis/scheduling.volcano.sh/v1beta1",
    }
    assert set(index) <= set(expected("a9-get-openapi-v3-index")[1]["paths"]) | {
        "apis/scheduling.volcano.sh/v1beta1"
    }
    for path, entry in index.items():
        url = entry["serverRelativeURL"]
        assert re.fullmatch(rf"/openapi/v3/{re.escape(path)}\?hash=[0-9A-F]{{128}}", url)
        document = simulated.call("GET", url)
        assert document.status == 200
        assert document.raw is not None
        assert url.endswith(hashlib.sha512(document.raw).hexdigest().upper())
        assert document.headers["Cache-Control"] == "public, immutable"
        assert document.headers["Etag"] == f'"{url.rpartition("=")[2]}"'


def test_a_stale_hash_is_redirected_to_the_current_one(simulated: Demo) -> None:
    response = simulated.call("GET", "/openapi/v3/api/v1?hash=0123")
    assert response.status == 301
    assert re.fullmatch(r"/openapi/v3/api/v1\?hash=[0-9A-F]{128}", response.headers["Location"])
    assert simulated.call("GET", "/openapi/v3/apis/apps/v1").status == 404


def v3(simulated: Demo, path: str) -> dict:
    response = simulated.call("GET", f"/openapi/v3/{path}")
    assert response.status == 200
    assert response.raw is not None
    return orjson.loads(response.raw)  # type: ignore[no-any-return]


def test_core_kinds_carry_their_group_version_kind_and_patches_take_field_validation(
    simulated: Demo,
) -> None:
    document = v3(simulated, "api/v1")
    schemas = document["components"]["schemas"]
    pod = schemas["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    assert pod["type"] == "object"
    assert pod["properties"]["spec"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}
    ]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["items"] == {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}
    assert "enum" not in pod["properties"]["kind"]
    patch = document["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "kind": "Pod", "version": "v1"}
    assert {p["name"] for p in patch["parameters"]} == {
        "dryRun",
        "fieldManager",
        "fieldValidation",
        "force",
    }
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    nodes = document["paths"]["/api/v1/nodes/{name}"]["patch"]
    assert nodes["x-kubernetes-group-version-kind"]["kind"] == "Node"


def test_kueue_kinds_are_their_crds_schemas_in_both_versions(simulated: Demo) -> None:
    for version, cohort in (("v1beta2", "cohortName"), ("v1beta1", "cohort")):
        document = v3(simulated, f"apis/kueue.x-k8s.io/{version}")
        schemas = document["components"]["schemas"]
        cq = schemas[f"io.x-k8s.kueue.{version}.ClusterQueue"]
        assert cq["x-kubernetes-group-version-kind"] == [
            {"group": "kueue.x-k8s.io", "kind": "ClusterQueue", "version": version}
        ]
        assert cohort in cq["properties"]["spec"]["properties"]
        assert cq["properties"]["metadata"] == {
            "allOf": [
                {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
            ]
        }
        assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas
        listing = schemas[f"io.x-k8s.kueue.{version}.ClusterQueueList"]
        assert listing["x-kubernetes-group-version-kind"][0]["kind"] == "ClusterQueueList"
        patch = document["paths"][f"/apis/kueue.x-k8s.io/{version}/clusterqueues/{{name}}"]["patch"]
        assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
        assert "fieldValidation" in {p["name"] for p in patch["parameters"]}


def test_v2_is_json_with_every_kind_and_protobuf_alone_is_not_acceptable(simulated: Demo) -> None:
    response = simulated.call("GET", "/openapi/v2")
    assert response.status == 200
    assert response.raw is not None
    document = orjson.loads(response.raw)
    assert document["swagger"] == "2.0"
    pod = document["definitions"]["io.k8s.api.core.v1.Pod"]
    assert pod["properties"]["spec"] == {
        "$ref": "#/definitions/io.k8s.api.core.v1.PodSpec",
        "description": pod["properties"]["spec"]["description"],
    }
    quantity = document["definitions"]["io.k8s.apimachinery.pkg.api.resource.Quantity"]
    assert quantity["type"] == "string"
    assert "io.x-k8s.kueue.v1beta2.LocalQueue" in document["definitions"]
    headers = {"accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
    assert simulated.api.handle("GET", "/openapi/v2", headers, b"").status == 406


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "typo", "namespace": "team-a"},
    "spec": {"containers": [{"name": "c", "image": "busybox", "colour": "red"}], "nodeNme": "x"},
}


def test_strict_field_validation_refuses_unknown_fields_of_core_kinds(simulated: Demo) -> None:
    response = simulated.call("POST", "/api/v1/namespaces/team-a/pods?fieldValidation=Strict", POD)
    assert (response.status, response.body) == (
        400,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
            'unknown field "spec.containers[0].colour", unknown field "spec.nodeNme"',
            "reason": "BadRequest",
            "code": 400,
        },
    )


def test_without_strict_validation_unknown_fields_are_warnings(simulated: Demo) -> None:
    response = simulated.call("POST", "/api/v1/namespaces/team-a/pods", POD)
    assert response.status == 201
    assert response.headers["Warning"] == (
        '299 - "unknown field \\"spec.containers[0].colour\\"", '
        '299 - "unknown field \\"spec.nodeNme\\""'
    )
