"""/readyz reports each cluster's Kubernetes API from its polls: one line for the one
cluster as before, each cluster under ``clusters`` by name, failing (reported, never
required) when any cluster is not ok."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import Cluster, SyncRun

pytestmark = pytest.mark.django_db(transaction=True)  # the check reads in a thread of its own


@pytest.fixture(autouse=True)
def _operator_token(settings: Any) -> None:
    settings.QM_METRICS_TOKEN = "operator"


def polled(seconds_ago: float, *, cluster: Cluster | None = None, error: str = "") -> SyncRun:
    started = timezone.now() - dt.timedelta(seconds=seconds_ago)
    return SyncRun.objects.create(
        **({"cluster": cluster} if cluster else {}),
        started_at=started,
        finished_at=started + dt.timedelta(seconds=1),
        error=error,
    )


def kubernetes(client: Client) -> dict[str, Any]:
    """What /readyz says of the clusters to an operator (the metrics' bearer token)."""
    response = client.get("/readyz", headers={"Authorization": "Bearer operator"})
    assert response.status_code == 200  # never required
    return response.json()["checks"]["kubernetes"]  # type: ignore[no-any-return]


def test_one_cluster_says_what_it_said_before(client: Client, settings: Any) -> None:
    settings.KUBE_URL = "http://127.0.0.1:1"
    polled(3)
    kube = kubernetes(client)
    assert kube["ok"] and kube["status"].startswith("ok (polled ")
    assert list(kube["clusters"]) == ["default"]


def test_each_cluster_is_reported_and_an_unreachable_one_named(
    client: Client, settings: Any
) -> None:
    settings.KUBE_URL = "http://127.0.0.1:1"
    infer = Cluster.objects.create(name="infer", display_name="Infer", connection="token")
    polled(3)
    polled(200, cluster=infer)
    down = polled(40, cluster=infer, error="cannot reach the Kubernetes API: refused")
    kube = kubernetes(client)
    assert (kube["ok"], kube["required"]) == (False, False)
    since = f"{down.started_at:%Y-%m-%d %H:%M:%S}"
    assert kube["status"] == (
        f"failed: infer: unreachable since {since} UTC: cannot reach the Kubernetes API: refused"
    )
    infer_said = kube["clusters"]["infer"]
    assert (infer_said["ok"], infer_said["state"]) == (False, "unreachable")
    assert infer_said["since"].startswith(down.started_at.strftime("%Y-%m-%dT%H:%M:%S"))
    assert infer_said["last_ok_at"] is not None
    assert kube["clusters"]["default"]["ok"] is True

    polled(1, cluster=infer)  # it answers again
    kube = kubernetes(client)
    assert (kube["ok"], kube["status"]) == (True, "ok (2 clusters)")


def test_without_the_settings_cluster_the_registered_ones_are_reported(
    client: Client, settings: Any
) -> None:
    settings.KUBE_URL = ""
    assert kubernetes(client)["status"] == "not configured"
    infer = Cluster.objects.create(name="infer", display_name="Infer", connection="token")
    polled(2, cluster=infer)
    kube = kubernetes(client)
    assert kube["ok"] and list(kube["clusters"]) == ["infer"]
