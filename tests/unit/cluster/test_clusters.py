"""The clusters as objects: the one the settings connect to, editing it (its connection
stays the settings'), what a poll's discovery records, what is rendered for a cluster that
serves Kueue v1beta1 only or Volcano only (valid against the CRDs), and the list page's
queries whatever the number of clusters."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.discovery import Discovered
from cluster.models import Cluster
from cluster.scope import settings_cluster_id
from cluster.selectors import discovery_age
from cluster.services import record_discovery, save_cluster, settings_cluster
from loop.desired import collect_manifests
from portal.models import AuditEvent
from tests.schemas import schema_errors

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


def discovered(cluster: Cluster, kueue: tuple[str, ...], volcano: bool) -> Cluster:
    found = Discovered(
        "v1.36.2", kueue, volcano, True, "ClusterPolicy cluster-policy: ready", "mixed"
    )
    record_discovery(cluster, found, now=NOW)
    cluster.refresh_from_db()
    return cluster


def test_the_settings_cluster_is_the_migrations_and_comes_back_when_missing(
    settings: Any,
) -> None:
    first = settings_cluster()
    assert (first.name, first.connection, first.purpose) == ("default", "settings", "general")
    assert settings_cluster().pk == first.pk
    Cluster.objects.all().delete()
    settings.QM_CLUSTER_NAME = "gpu-main"
    again = settings_cluster()
    assert (again.name, again.display_name) == ("gpu-main", "Gpu main")


def test_the_settings_cluster_has_one_reader_whichever_is_asked(settings: Any) -> None:
    """The id (every cluster key's default) and the row are the same one, made once with
    the same name and purpose whichever asks first; either is one query when it is there."""
    Cluster.objects.all().delete()
    settings.QM_CLUSTER_NAME = "gpu-main"
    made = settings_cluster_id()
    found = Cluster.objects.get()
    assert (found.pk, found.name, found.purpose, found.connection) == (
        made,
        "gpu-main",
        "general",
        "settings",
    )
    for read in (settings_cluster_id, lambda: settings_cluster().pk):
        with CaptureQueriesContext(connection) as captured:
            assert read() == made
        assert len(captured) == 1
    Cluster.objects.all().delete()
    settings.QM_CLUSTER_NAME = "gpu-other"
    assert settings_cluster().pk == settings_cluster_id() == Cluster.objects.get().pk


def test_editing_the_settings_cluster_keeps_its_connection(
    platform_admin: Any, client: Client
) -> None:
    cluster = settings_cluster()
    client.force_login(platform_admin)
    response = client.post(
        f"/clusters/{cluster.name}/edit/",
        {
            "display_name": "Main training cluster",
            "purpose": "training",
            "connection": "token",
            "api_url": "https://elsewhere:6443",
            "credential": "sneaked-in",
        },
    )
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert (cluster.display_name, cluster.purpose) == ("Main training cluster", "training")
    assert (cluster.connection, cluster.api_url, cluster.credential) == ("settings", "", "")
    event = AuditEvent.objects.get(event="cluster.changed")
    assert event.old == {"display_name": "Default", "purpose": "general"}
    assert event.new == {"display_name": "Main training cluster", "purpose": "training"}


def test_a_second_settings_cluster_or_a_credential_it_cannot_use_is_refused(
    platform_admin: Any,
) -> None:
    settings_cluster()
    with pytest.raises(ValidationError):
        save_cluster(
            actor=platform_admin,
            cluster=Cluster(name="other", display_name="Other", connection="settings"),
            source="api",
        )
    with pytest.raises(ValidationError) as raised:
        save_cluster(
            actor=platform_admin,
            cluster=Cluster(name="pods", display_name="Pods", connection="in_cluster"),
            credential="a-token",
            source="api",
        )
    assert raised.value.message_dict == {
        "credential": ["A connection by In-cluster service account takes none."]
    }
    assert list(Cluster.objects.values_list("name", flat=True)) == ["default"]


def test_discovery_is_recorded_with_its_time_and_a_failure_keeps_it() -> None:
    cluster = discovered(settings_cluster(), ("v1beta1",), False)
    assert cluster.kueue_versions == ["v1beta1"] and cluster.discovered_at == NOW
    assert discovery_age(cluster, now=NOW + dt.timedelta(seconds=60)) == "fresh"
    assert discovery_age(cluster, now=NOW + dt.timedelta(minutes=5)) == "stale"
    record_discovery(cluster, None, now=NOW + dt.timedelta(minutes=1), error="refused")
    cluster.refresh_from_db()
    assert (cluster.kueue_versions, cluster.discovered_at, cluster.discovery_error) == (
        ["v1beta1"],
        NOW,
        "refused",
    )


@pytest.mark.parametrize(
    ("kueue", "volcano", "queue_api"),
    [
        (("v1beta2", "v1beta1"), False, "kueue.x-k8s.io/v1beta2"),
        (("v1beta1",), False, "kueue.x-k8s.io/v1beta1"),
        ((), True, "scheduling.volcano.sh/v1beta1"),
    ],
    ids=["v1beta2", "v1beta1-only", "volcano-only"],
)
def test_a_cluster_gets_the_objects_it_serves_valid_against_their_crds(
    demo: None,
    capsys: pytest.CaptureFixture[str],
    kueue: tuple[str, ...],
    volcano: bool,
    queue_api: str,
) -> None:
    cluster = discovered(settings_cluster(), kueue, volcano)
    manifests = collect_manifests(cluster=cluster)
    queue_objects = [m for m in manifests if m["kind"] in ("ClusterQueue", "Queue")]
    assert queue_objects and {m["apiVersion"] for m in queue_objects} == {queue_api}
    for manifest in manifests:
        assert schema_errors(manifest) == [], manifest["metadata"]["name"]
    call_command("export_manifests", "--cluster", cluster.name)
    assert list(yaml.safe_load_all(capsys.readouterr().out)) == manifests


def test_the_list_page_asks_the_same_queries_for_one_cluster_or_thirty(
    platform_admin: Any, client: Client
) -> None:
    client.force_login(platform_admin)
    settings_cluster()

    def queries_with(count: int) -> int:
        for i in range(Cluster.objects.count(), count):
            Cluster.objects.create(
                name=f"c{i}",
                display_name=f"C {i}",
                connection="in_cluster",
                kubernetes_version="v1.36.2",
                kueue_versions=["v1beta2"],
                discovered_at=timezone.now(),
            )
        with CaptureQueriesContext(connection) as captured:
            response = client.get("/clusters/")
            assert response.status_code == 200
        assert response.content.decode().count('-row">') == count
        return len(captured)

    assert queries_with(1) == queries_with(30) <= 8


def test_the_api_lists_clusters_with_their_discovery_for_admins(
    platform_admin: Any, client: Client
) -> None:
    cluster = discovered(settings_cluster(), ("v1beta1",), False)
    client.force_login(platform_admin)
    assert client.get("/api/v1/").json()["clusters"].endswith("/api/v1/clusters/")
    listed = client.get("/api/v1/clusters/").json()
    items = listed["results"] if isinstance(listed, dict) else listed
    assert [i["name"] for i in items] == [cluster.name]
    item = client.get(f"/api/v1/clusters/{cluster.name}/").json()
    assert {k: item[k] for k in ("connection", "kueue_versions", "mig_strategy")} == {
        "connection": "settings",
        "kueue_versions": ["v1beta1"],
        "mig_strategy": "mixed",
    }
    assert item["discovery"] == "stale"  # discovered at NOW, long ago
    assert item["purpose_meaning"].startswith("General platform:")
    assert client.get("/api/v1/clusters/no-such/").status_code == 404
    assert client.post("/api/v1/clusters/", {}, content_type="application/json").status_code == 405
