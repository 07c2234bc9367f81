"""Fixtures of the integration suite: a port that never answers (the fault tests), a
second demo cluster, the inference one, registered as a ``Cluster`` of the portal, and the
portal served over HTTP on the demo scenario for its clients (``qm``, ``qm-mcp``)."""

from __future__ import annotations

import copy
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.db import connection
from django.db.backends.base.creation import TEST_DATABASE_PREFIX

import devcluster
from cluster.connection import gateway_for
from cluster.models import Cluster
from cluster.services import save_cluster
from kube import Gateway
from portal.access.tokens import create_token
from portal.audit.record import SYSTEM
from tests.conftest import FAST
from tests.support import past_schemas

INFERENCE_TOKEN = "inference-cluster-token"


@pytest.fixture
def portal(portal_cluster: Any, live_server: Any, settings: Any) -> Any:
    """The portal on the demo scenario, served over HTTP; the broker emptied after (nothing
    runs what a decision queued)."""
    yield live_server.url
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


def token(username: str) -> str:
    """A personal API token of a demo user."""
    return create_token(user=User.objects.get(username=username), name="cli")[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers (a server stopped)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    yield server.getsockname()[1]
    server.close()


@dataclass
class SecondCluster:
    """The inference demo cluster, the portal's row for it, and the gateway its row gives."""

    demo: devcluster.DemoCluster
    row: Cluster
    token: str

    @property
    def gateway(self) -> Gateway:
        return gateway_for(self.row)


@pytest.fixture
def inference_cluster(db: Any) -> Iterator[SecondCluster]:
    """A second demo cluster beside ``demo_cluster``: ``--scenario inference`` behind a
    bearer token, on a free loopback port, its controllers at test speed, and the
    ``Cluster`` row ``inference`` (purpose inference, token connection, the token stored
    encrypted) pointing at it, as ``dev.py run`` registers it. Stopped after the test (it
    starts in a few milliseconds, like ``demo_cluster``)."""
    demo = devcluster.start(scenario="inference", token=INFERENCE_TOKEN, options=copy.copy(FAST))
    row = Cluster(
        name="inference",
        display_name="Inference (H100 / L40S)",
        purpose=Cluster.Purpose.INFERENCE,
        connection=Cluster.Connection.TOKEN,
        api_url=demo.url,
    )
    save_cluster(actor=SYSTEM, cluster=row, credential=INFERENCE_TOKEN, source="cli")
    yield SecondCluster(demo, row, INFERENCE_TOKEN)
    demo.stop()


@pytest.fixture(scope="session")
def past_schema(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict[str, str]]:
    """The schemas the migration tests start from, by test module: the previous release's
    (test_upgrade), before clusters were objects (test_cluster_migration), before rows named
    their cluster (test_cluster_rows_migration, its one cluster named ``gpu-main``), made by
    one migration in that order (each ahead of the one before), each test a copy of its own.
    The three are dealt to one test process together (tests/conftest.py's ``_unit``), each
    marked to use the test database: their scratch databases are made next to it."""
    name = connection.settings_dict["NAME"]
    assert name.startswith(TEST_DATABASE_PREFIX), f"not a test database: {name} (mark the test)"
    from tests.integration import test_cluster_migration as clusters
    from tests.integration import test_cluster_rows_migration as rows
    from tests.integration import test_upgrade as upgrade

    steps = [
        ("upgrade", upgrade.old_release, {}),
        ("clusters", lambda executor: clusters.targets(executor, clusters.BEFORE), {}),
        ("cluster_rows", rows.targets, {"QM_CLUSTER_NAME": "gpu-main"}),
    ]
    with django_db_blocker.unblock(), past_schemas(steps) as made:
        yield made
