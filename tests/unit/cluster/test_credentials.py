"""Cluster credentials at rest: the database never holds a token in clear, a new key
re-encrypts them all, and a key that cannot read them stops the portal at start with a
clear error; the credential never comes back out (page, API, audit)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.db import connection
from django.test import Client

from cluster import checks, credentials
from cluster.connection import check_connection, gateway_for
from cluster.models import Cluster
from cluster.services import rotate_cluster_credentials, save_cluster
from portal.models import AuditEvent

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[3]
TOKEN = "eyJhbGciOiJSUzI1NiJ9.remote-cluster-token.signature"
OLD_KEY = "dGVzdC1vbmx5LWNsdXN0ZXItY3JlZGVudGlhbHMtayE="


def register(admin: Any, **fields: Any) -> Cluster:
    cluster = Cluster(
        name=fields.pop("name", "gpu-east"),
        display_name=fields.pop("display_name", "GPU east"),
        purpose=fields.pop("purpose", "training"),
        connection=fields.pop("connection", "token"),
        api_url=fields.pop("api_url", "https://10.0.0.1:6443"),
        **fields,
    )
    return save_cluster(actor=admin, cluster=cluster, credential=TOKEN, source="web")


def raw_credential(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT credential FROM cluster_cluster WHERE name = %s", [name])
        return str(cursor.fetchone()[0])


def test_the_database_never_holds_the_token_in_clear(platform_admin: Any) -> None:
    cluster = register(platform_admin)
    stored = raw_credential("gpu-east")
    assert stored and TOKEN not in stored and stored.startswith("gAAAA")  # a Fernet token
    assert credentials.decrypt(stored, cluster="gpu-east") == TOKEN
    gateway = gateway_for(cluster)
    assert gateway.api.configuration.api_key == {"BearerToken": TOKEN}
    event = AuditEvent.objects.get(event="cluster.registered")
    assert event.new["credential"] == "replaced" and TOKEN not in str(event.new)


def test_rotation_re_encrypts_under_the_new_key_and_drops_the_old(
    platform_admin: Any, settings: Any
) -> None:
    register(platform_admin)
    before = raw_credential("gpu-east")
    new_key = Fernet.generate_key().decode()
    settings.QM_CREDENTIALS_KEY = f"{new_key},{OLD_KEY}"
    assert credentials.decrypt(before, cluster="gpu-east") == TOKEN  # both keys read
    call_command("rotate_cluster_credentials", stdout=open("/dev/null", "w"))  # noqa: SIM115
    after = raw_credential("gpu-east")
    assert after != before
    settings.QM_CREDENTIALS_KEY = new_key  # the old key is gone: the rotated row still reads
    assert credentials.decrypt(after, cluster="gpu-east") == TOKEN
    assert rotate_cluster_credentials() == 1  # twice is fine
    assert AuditEvent.objects.filter(event="cluster.credentials_rotated").count() == 2


def test_a_wrong_key_stops_the_start_with_a_clear_error(platform_admin: Any, settings: Any) -> None:
    register(platform_admin)
    settings.QM_CREDENTIALS_KEY = Fernet.generate_key().decode()
    with pytest.raises(SystemExit) as raised:
        checks.refuse_to_start()  # a Celery worker at start (tests/integration/test_worker.py)
    assert "cluster 'gpu-east' cannot be decrypted with QM_CREDENTIALS_KEY" in str(raised.value)
    with pytest.raises(SystemCheckError, match=r"cluster\.E001.*'gpu-east' cannot be decrypted"):
        # as the web container starts (deploy/docker/entrypoint.sh), and as migrate does
        call_command("check", "--tag", "database", "--database", "default")
    web = (ROOT / "deploy/docker/entrypoint.sh").read_text().split("  web)")[1].split(";;")[0]
    assert "python manage.py check --tag database --database default\n" in web
    with pytest.raises(CommandError, match="cannot be decrypted"):
        call_command("rotate_cluster_credentials")
    with pytest.raises(credentials.CredentialKeyError):
        gateway_for(Cluster.objects.get(name="gpu-east"))
    tested = check_connection(Cluster.objects.get(name="gpu-east"))  # the page says so
    assert not tested.ok and "cannot be decrypted with QM_CREDENTIALS_KEY" in tested.error


def test_a_malformed_or_missing_key_is_named(platform_admin: Any, settings: Any) -> None:
    settings.QM_CREDENTIALS_KEY = f"{OLD_KEY},not-a-key"
    with pytest.raises(credentials.CredentialKeyError, match="key 2 of 2 is not a Fernet key"):
        credentials.check_keys()
    settings.QM_CREDENTIALS_KEY = ""
    credentials.check_keys()  # nothing stored yet: no key needed
    with pytest.raises(credentials.CredentialKeyError, match=r"QM_CREDENTIALS_KEY .* is not set"):
        register(platform_admin)
    assert not Cluster.objects.filter(name="gpu-east").exists()


def test_bad_input_gets_field_errors_and_saves_nothing(platform_admin: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        register(platform_admin, name="GPU_East", api_url="10.0.0.1")
    assert set(raised.value.message_dict) == {"name", "api_url"}
    with pytest.raises(ValidationError) as raised:
        save_cluster(
            actor=platform_admin,
            cluster=Cluster(name="b", display_name="B", connection="token", api_url="https://b"),
            credential="",
            source="web",
        )
    assert "credential" in raised.value.message_dict
    assert not Cluster.objects.exclude(connection="settings").exists()
    assert not AuditEvent.objects.filter(event__startswith="cluster.").exists()


def test_the_credential_never_comes_back_out(platform_admin: Any, client: Client) -> None:
    register(platform_admin)
    client.force_login(platform_admin)
    for url in (
        "/clusters/",
        "/clusters/gpu-east/",
        "/clusters/gpu-east/edit/",
        "/api/v1/clusters/",
        "/api/v1/clusters/gpu-east/",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        assert TOKEN not in body and raw_credential("gpu-east") not in body, url
    item = client.get("/api/v1/clusters/gpu-east/").json()
    assert item["has_credential"] is True and "credential" not in item


def test_only_platform_admins_see_or_register_clusters(
    team_a_admin: Any, approver: Any, client: Client
) -> None:
    for user in (team_a_admin, approver):
        client.force_login(user)
        assert client.get("/clusters/").status_code == 403
        assert client.get("/clusters/default/").status_code == 403
        assert client.get("/api/v1/clusters/").status_code == 403
        response = client.post(
            "/clusters/new/",
            {"name": "x", "display_name": "X", "connection": "token", "credential": TOKEN},
        )
        assert response.status_code == 403
    assert not Cluster.objects.filter(name="x").exists()


def test_registering_the_same_name_twice_is_a_field_error(
    platform_admin: Any, client: Client
) -> None:
    register(platform_admin)
    client.force_login(platform_admin)
    form = {
        "name": "gpu-east",
        "display_name": "Again",
        "purpose": "general",
        "connection": "token",
        "api_url": "https://10.0.0.2:6443",
        "credential": "another-token",
    }
    response = client.post("/clusters/new/", form)
    assert response.status_code == 422
    page = response.content.decode()
    assert 'id="id_name" name="name" value="gpu-east"' in page
    assert "Cluster with this Name already exists." in page
    assert "another-token" not in page
    assert Cluster.objects.get(name="gpu-east").display_name == "GPU east"
    assert AuditEvent.objects.filter(event="cluster.registered").count() == 1


def test_every_stored_credential_a_kubeconfig_too_is_encrypted_and_rotated(
    platform_admin: Any, settings: Any
) -> None:
    kubeconfig = (
        "apiVersion: v1\nkind: Config\ncurrent-context: east\n"
        "clusters: [{name: east, cluster: {server: 'https://10.0.0.2:6443'}}]\n"
        f"users: [{{name: east, user: {{token: {TOKEN}}}}}]\n"
        "contexts: [{name: east, context: {cluster: east, user: east}}]\n"
    )
    register(platform_admin)
    west = Cluster(
        name="gpu-west", display_name="GPU west", connection="kubeconfig", kubeconfig_context="east"
    )
    save_cluster(actor=platform_admin, cluster=west, credential=kubeconfig, source="web")
    for name in ("gpu-east", "gpu-west"):
        stored = raw_credential(name)
        assert TOKEN not in stored and "apiVersion" not in stored and "10.0.0.2" not in stored
    new_key = Fernet.generate_key().decode()
    settings.QM_CREDENTIALS_KEY = f"{new_key},{OLD_KEY}"
    out = io.StringIO()
    call_command("rotate_cluster_credentials", stdout=out)
    assert out.getvalue() == "re-encrypted 2 cluster credential(s) under the first key\n"
    settings.QM_CREDENTIALS_KEY = new_key  # only the new key: both still read
    assert credentials.decrypt(raw_credential("gpu-east"), cluster="gpu-east") == TOKEN
    assert credentials.decrypt(raw_credential("gpu-west"), cluster="gpu-west") == kubeconfig.strip()
    call_command("check", "--tag", "database", "--database", "default")  # starts: no E001
    assert gateway_for(Cluster.objects.get(name="gpu-west")).api.configuration.host == (
        "https://10.0.0.2:6443"
    )
