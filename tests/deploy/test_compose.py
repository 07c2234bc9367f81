"""docker-compose.yml (and the real-cluster override) validate with docker-compose itself and
wire the services the way the README says."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.conftest import ROOT, need

PORTAL = ("migrate", "web", "worker", "beat")


def compose(*files: str, kubeconfig: Path | None = None) -> dict[str, Any]:
    env = {**os.environ, "KUBECONFIG_FILE": str(kubeconfig or "/nonexistent/kubeconfig")}
    env.pop("SECRET_KEY", None)
    args = [need("docker-compose")]
    for name in files:
        args += ["-f", str(ROOT / name)]
    out = subprocess.run(
        [*args, "config"], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def test_the_compose_file_validates_and_starts_everything_with_health_checks() -> None:
    services = compose("docker-compose.yml")["services"]
    assert set(services) == {"postgres", "redis", "demo-cluster", *PORTAL}
    for name in ("postgres", "redis", "demo-cluster", "web", "worker"):
        assert services[name]["healthcheck"]["test"], name
    for name in ("web", "worker", "beat"):
        depends = services[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}
        assert depends["postgres"] == {"condition": "service_healthy"}
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
    assert services["web"]["ports"][0]["published"] in (8000, "8000")
    for name in PORTAL:
        env = services[name]["environment"]
        assert env["DJANGO_SETTINGS_MODULE"] == "portal.settings.production"
        assert env["KUBE_URL"] == "http://demo-cluster:6443"
        assert services[name]["read_only"] is True
    assert services["demo-cluster"]["command"] == ["demo-cluster"]
    assert "load_demo" in " ".join(services["migrate"]["command"])


def test_the_cluster_override_uses_a_kubeconfig_and_no_demo(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    services = compose("docker-compose.yml", "docker-compose.cluster.yml", kubeconfig=kubeconfig)[
        "services"
    ]
    assert services["demo-cluster"]["profiles"] == ["demo"]
    assert services["migrate"]["command"] == ["migrate"]
    for name in ("web", "worker"):
        env = services[name]["environment"]
        assert (env["KUBE_URL"], env["KUBECONFIG"]) == ("", "/kube/config")
        assert services[name]["volumes"] == [f"{kubeconfig}:/kube/config:ro"]
    assert services["beat"]["environment"]["KUBE_URL"] == ""


def test_a_misspelt_key_is_refused(tmp_path: Path) -> None:
    text = (ROOT / "docker-compose.yml").read_text().replace("read_only:", "read_onyl:", 1)
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(text)
    out = subprocess.run(
        [need("docker-compose"), "-f", str(bad), "config", "-q"], capture_output=True, text=True
    )
    assert out.returncode != 0
    assert "read_onyl" in out.stderr


def test_the_entrypoint_knows_every_role_the_files_use() -> None:
    entrypoint = (ROOT / "deploy/docker/entrypoint.sh").read_text()
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    roles = {s["command"][0] for s in services.values() if s.get("image") == "quartermaster:local"}
    roles |= {"web"}
    for role in roles - {"sh"}:
        assert f"\n  {role})" in entrypoint, role
