"""The Kubernetes manifests under deploy/ render, validate and are safe to run."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.conftest import OVERLAYS, ROOT, kustomize
from tests.schemas import schema_errors

WORKLOADS = {"Deployment", "Job"}


def pod_specs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]
        for o in objects
        if o["kind"] in WORKLOADS
    }


@pytest.mark.parametrize("folder", OVERLAYS)
def test_every_rendered_object_validates_against_the_kubernetes_schemas(folder: str) -> None:
    objects = kustomize(folder)
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Deployment",
        "Deployment",
        "Ingress",
        "Job",
        "Namespace",
        "PodDisruptionBudget",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    ]
    for obj in objects:
        assert schema_errors(obj) == [], (obj["kind"], obj["metadata"]["name"])


def test_a_misspelt_field_would_be_caught() -> None:
    (web,) = [
        o
        for o in kustomize("deploy/base")
        if o["metadata"]["name"] == "quartermaster-web" and o["kind"] == "Deployment"
    ]
    web["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/"}}
    assert schema_errors(web)


def test_pods_run_as_non_root_with_a_read_only_root_and_no_capabilities() -> None:
    specs = pod_specs(kustomize("deploy/overlays/production"))
    assert set(specs) == {
        "quartermaster-web",
        "quartermaster-worker",
        "quartermaster-beat",
        "quartermaster-migrate",
    }
    for name, spec in specs.items():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in spec.get("initContainers", []) + spec["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert security["readOnlyRootFilesystem"] is True, (name, container["name"])
            assert security["capabilities"] == {"drop": ["ALL"]}, (name, container["name"])
            assert container["resources"]["requests"], (name, container["name"])
            assert container["resources"]["limits"]["memory"], (name, container["name"])
            assert container["image"] == "registry.example.org/platform/quartermaster:0.1.0"


def test_only_pods_that_talk_to_kubernetes_get_a_token() -> None:
    specs = pod_specs(kustomize("deploy/overlays/production"))
    assert specs["quartermaster-web"]["serviceAccountName"] == "quartermaster"
    assert specs["quartermaster-worker"]["serviceAccountName"] == "quartermaster"
    assert specs["quartermaster-beat"]["automountServiceAccountToken"] is False
    assert specs["quartermaster-migrate"]["automountServiceAccountToken"] is False


def test_web_probes_and_the_budget_keep_it_up() -> None:
    objects = kustomize("deploy/overlays/production")
    web = pod_specs(objects)["quartermaster-web"]["containers"][0]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    budgets = {
        o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "PodDisruptionBudget"
    }
    assert budgets["quartermaster-web"]["minAvailable"] == 1
    deployments = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Deployment"}
    assert deployments["quartermaster-web"]["replicas"] >= 2
    assert deployments["quartermaster-beat"]["replicas"] == 1
    assert deployments["quartermaster-beat"]["strategy"] == {"type": "Recreate"}


def test_the_production_overlay_sets_the_host_everywhere_it_is_needed() -> None:
    objects = {
        (o["kind"], o["metadata"]["name"]): o for o in kustomize("deploy/overlays/production")
    }
    ingress = objects[("Ingress", "quartermaster")]["spec"]
    assert ingress["rules"][0]["host"] == "gpu-portal.example.org"
    assert ingress["tls"][0]["hosts"] == ["gpu-portal.example.org"]
    config = objects[("ConfigMap", "quartermaster")]["data"]
    assert config["ALLOWED_HOSTS"] == "gpu-portal.example.org"
    assert config["CSRF_TRUSTED_ORIGINS"] == "https://gpu-portal.example.org"
    assert config["DJANGO_SETTINGS_MODULE"] == "portal.settings.production"
    assert all(
        o["metadata"].get("namespace", "quartermaster") == "quartermaster" for o in objects.values()
    )


def test_the_remote_cluster_base_grants_the_portals_cluster_role_through_a_token() -> None:
    """deploy/remote-cluster: what another cluster needs for the portal to serve it — the
    same ClusterRole as the portal's own, bound to a ServiceAccount whose long-lived token
    the token controller puts in a Secret; nothing of the portal's workloads."""
    objects = kustomize("deploy/remote-cluster")
    assert sorted(o["kind"] for o in objects) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Namespace",
        "Secret",
        "ServiceAccount",
    ]
    for obj in objects:
        assert schema_errors(obj) == [], obj["kind"]
    by_kind = {o["kind"]: o for o in objects}
    (own_role,) = [o for o in kustomize("deploy/base") if o["kind"] == "ClusterRole"]
    assert by_kind["ClusterRole"]["rules"] == own_role["rules"]
    account = by_kind["ServiceAccount"]["metadata"]
    binding = by_kind["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == by_kind["ClusterRole"]["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    secret = by_kind["Secret"]
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["namespace"] == account["namespace"]
    assert secret["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": account["name"]
    }
    assert "data" not in secret  # the token controller fills it in; no token in the repo


def test_the_dashboards_render_as_one_configmap_for_grafanas_sidecar() -> None:
    (config_map,) = kustomize("deploy/grafana")
    assert config_map["kind"] == "ConfigMap"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert schema_errors(config_map) == []
    folder = ROOT / "deploy" / "grafana"
    shipped = {p.name: p.read_text() for p in folder.glob("*.json")}
    assert config_map["data"] == shipped  # every dashboard, none left out
