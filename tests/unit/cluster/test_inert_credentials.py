"""A stored kubeconfig is inert (cluster/kubeconfig.py): an exec plugin, an auth-provider's
cmd-path and every file path are refused with the reason, when saved (service and page)
and when used (one stored before the rule: "Test connection" and a poll run nothing, the
marker file a command would make stays absent); the operator may allow named exec
commands; a stored credential is bound to its endpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.test import Client

from cluster import credentials, kubeconfig
from cluster.connection import check_connection
from cluster.models import Cluster
from cluster.services import save_cluster
from loop.tasks import poll_cluster_task
from portal.models import AuditEvent

pytestmark = pytest.mark.django_db
TOKEN = "eyJhbGciOiJSUzI1NiJ9.remote-cluster-token.signature"


def config_with(user: dict[str, Any], cluster: dict[str, Any] | None = None) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "east",
            "clusters": [
                {"name": "east", "cluster": cluster or {"server": "https://10.0.0.2:6443"}}
            ],
            "users": [{"name": "east", "user": user}],
            "contexts": [{"name": "east", "context": {"cluster": "east", "user": "east"}}],
        }
    )


def hostile(marker: Path, secret_file: Path) -> dict[str, str]:
    """Kubeconfigs that run a command (which would make ``marker``) or read a file."""
    return {
        "exec": config_with(
            {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": "touch",
                    "args": [str(marker)],
                    "interactiveMode": "Never",
                }
            }
        ),
        "auth-provider": config_with(
            {
                "auth-provider": {
                    "name": "gcp",
                    "config": {"cmd-path": "touch", "cmd-args": str(marker)},
                }
            }
        ),
        "tokenFile": config_with({"tokenFile": str(secret_file)}),
        "client-key": config_with(
            {"client-certificate": str(secret_file), "client-key": str(secret_file)}
        ),
        "certificate-authority": config_with(
            {"token": TOKEN},
            {"server": "https://10.0.0.2:6443", "certificate-authority": str(secret_file)},
        ),
    }


def stored(name: str, text: str) -> Cluster:
    """A cluster whose kubeconfig was stored before the rule (straight into the table)."""
    return Cluster.objects.create(
        name=name,
        display_name=name,
        connection="kubeconfig",
        credential=credentials.encrypt(text),
    )


def test_a_kubeconfig_that_runs_or_reads_something_is_refused_when_saved(
    platform_admin: Any, client: Client, tmp_path: Path
) -> None:
    marker, secret = tmp_path / "ran", tmp_path / "service-account-token"
    secret.write_text("worker-sa-token")
    client.force_login(platform_admin)
    reasons = {
        "exec": "an exec credential plugin would run 'touch'",
        "auth-provider": "an auth-provider may run a command (cmd-path)",
        "tokenFile": "tokenFile would read a file on the portal's machines",
        "client-key": "client-key would read a file on the portal's machines",
        "certificate-authority": "certificate-authority would read a file",
    }
    for kind, text in hostile(marker, secret).items():
        cluster = Cluster(name="gpu-west", display_name="West", connection="kubeconfig")
        with pytest.raises(ValidationError) as raised:
            save_cluster(actor=platform_admin, cluster=cluster, credential=text, source="web")
        said = raised.value.message_dict["credential"]
        assert any(reasons[kind] in reason for reason in said), (kind, said)
        page = client.post(
            "/clusters/new/",
            {
                "name": "gpu-west",
                "display_name": "West",
                "purpose": "general",
                "connection": "kubeconfig",
                "credential": text,
            },
        )
        assert page.status_code == 422, kind
        assert reasons[kind] in page.content.decode().replace("&#x27;", "'"), kind
    assert not marker.exists()
    assert not Cluster.objects.filter(name="gpu-west").exists()


def test_a_stored_one_runs_nothing_at_test_connection_nor_at_a_poll(tmp_path: Path) -> None:
    marker, secret = tmp_path / "ran", tmp_path / "service-account-token"
    secret.write_text("worker-sa-token")
    for number, (kind, text) in enumerate(hostile(marker, secret).items()):
        cluster = stored(f"old-{number}", text)
        result = check_connection(cluster)
        assert not marker.exists(), kind
        assert not result.ok
        assert result.error.startswith("the stored kubeconfig is refused: "), kind
        poll_cluster_task(cluster.pk)
        assert not marker.exists(), kind


def test_the_operator_may_allow_named_exec_commands() -> None:
    plugin = {"exec": {"command": "aws", "args": ["eks", "get-token"]}}
    data = yaml.safe_load(config_with(plugin))
    assert kubeconfig.refusals(data, allowed_exec=["aws", "gke-gcloud-auth-plugin"]) == []
    assert kubeconfig.refusals(data, allowed_exec=[]) != []
    elsewhere = yaml.safe_load(config_with({"exec": {"command": "/tmp/aws"}}))
    assert kubeconfig.refusals(elsewhere, allowed_exec=["aws"]) != []  # the exact text only
    path = {"exec": {"command": "aws", "env": [{"name": "PATH", "value": "/tmp"}]}}
    assert kubeconfig.refusals(yaml.safe_load(config_with(path)), allowed_exec=["aws"]) == [
        "User 'east': the exec plugin may not set PATH (it would choose what runs)."
    ]
    inline = {"token": TOKEN, "client-certificate-data": "LS0t", "client-key-data": "LS0t"}
    assert kubeconfig.refusals(yaml.safe_load(config_with(inline))) == []


def test_an_allowed_exec_plugin_is_saved(platform_admin: Any, settings: Any) -> None:
    settings.QM_KUBECONFIG_EXEC_ALLOWED = ["aws"]
    text = config_with({"exec": {"command": "aws", "args": ["eks", "get-token"]}})
    cluster = Cluster(name="gpu-eks", display_name="EKS", connection="kubeconfig")
    save_cluster(actor=platform_admin, cluster=cluster, credential=text, source="web")
    assert Cluster.objects.get(name="gpu-eks").has_credential


def register(admin: Any) -> Cluster:
    cluster = Cluster(
        name="gpu-east",
        display_name="GPU east",
        purpose="training",
        connection="token",
        api_url="https://10.0.0.1:6443",
    )
    return save_cluster(actor=admin, cluster=cluster, credential=TOKEN, source="web")


def test_a_credential_is_bound_to_its_endpoint(platform_admin: Any, client: Client) -> None:
    register(platform_admin)
    cluster = Cluster.objects.get(name="gpu-east")
    cluster.api_url = "https://attacker.example.org:6443"
    with pytest.raises(ValidationError) as raised:
        save_cluster(actor=platform_admin, cluster=cluster, source="web")
    assert raised.value.message_dict == {
        "api_url": ["Changed without a new credential: enter the credential too."],
        "credential": [
            "Enter the credential again: the stored one is bound to the endpoint it was given "
            "for (the API server URL changed)."
        ],
    }
    for field, value in (("verify_tls", False), ("ca_certificate", "-----BEGIN CERT")):
        cluster = Cluster.objects.get(name="gpu-east")
        setattr(cluster, field, value)
        with pytest.raises(ValidationError) as raised:
            save_cluster(actor=platform_admin, cluster=cluster, source="web")
        assert field in raised.value.message_dict
    client.force_login(platform_admin)
    form = {
        "display_name": "GPU east",
        "purpose": "training",
        "connection": "token",
        "api_url": "https://attacker.example.org:6443",
        "verify_tls": "on",
        "credential": "",
    }
    page = client.post("/clusters/gpu-east/edit/", form)
    assert page.status_code == 422
    assert "Enter the credential again" in page.content.decode()
    assert Cluster.objects.get(name="gpu-east").api_url == "https://10.0.0.1:6443"
    # with the credential entered again, or an edit elsewhere: saved
    assert client.post("/clusters/gpu-east/edit/", {**form, "credential": "new"}).status_code == 302
    assert Cluster.objects.get(name="gpu-east").api_url == "https://attacker.example.org:6443"
    renamed = {**form, "display_name": "East", "api_url": "https://attacker.example.org:6443"}
    assert client.post("/clusters/gpu-east/edit/", renamed).status_code == 302
    assert AuditEvent.objects.filter(event="cluster.changed").count() == 2
