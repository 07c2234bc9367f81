"""A team lead's home shows each quota item as used of hard, as the cluster counts it (the
ResourceQuota's status.used, from the last poll), in one query however many namespaces."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
from tests.support import wait_for

pytestmark = pytest.mark.django_db

QUOTA = ObjectRef("v1", "ResourceQuota", "team-a-gpu-quota", "team-a")


def test_the_home_page_shows_the_clusters_count_of_each_quota_item(portal_cluster: Gateway) -> None:
    used = wait_for(
        lambda: portal_cluster.get(QUOTA).get("status", {}).get("used"),
        timeout=10,
        what="the quota's status.used",
    )
    poll_cluster(gateway=portal_cluster)
    client = Client()
    client.force_login(User.objects.get(username="lead-a"))
    page = client.get("/").content.decode()
    gpus = used["requests.nvidia.com/gpu"]
    assert f"{gpus} of 16" in page
    assert f'aria-label="{gpus} of 16 used"' in page
    assert f"{used['pods']} of 50" in page


def test_a_quota_the_cluster_has_not_counted_shows_a_dash(demo: None) -> None:
    client = Client()
    client.force_login(User.objects.get(username="lead-a"))
    page = client.get("/").content.decode()
    assert 'title="The cluster has not counted this quota yet">\u2013</span>' in page
