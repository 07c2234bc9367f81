"""Operations: request ids in every log line and response, JSON logs, and Prometheus metrics
shared by every process through Redis."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from portal.infra import metrics
from portal.infra.observability import JsonFormatter, RequestIdFilter, TextFormatter, request_id
from tests.factories import UserFactory


@pytest.fixture(autouse=True)
def _empty_metrics() -> None:
    metrics.connection().delete(metrics.HTTP_KEY, metrics.TASK_KEY)


def scrape(client: Client, **headers: str) -> dict[str, Any]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples: dict[str, Any] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_a_request_id_is_answered_and_a_sane_one_from_the_caller_is_kept(client: Client) -> None:
    first = client.get("/healthz")
    assert len(first["X-Request-ID"]) == 32
    assert client.get("/healthz", headers={"X-Request-ID": "abc-123"})["X-Request-ID"] == "abc-123"
    forged = client.get("/healthz", headers={"X-Request-ID": "bad id\nInjected: yes"})
    assert forged["X-Request-ID"] != "bad id\nInjected: yes" and len(forged["X-Request-ID"]) == 32


@pytest.mark.django_db
def test_the_access_line_is_json_with_the_request_id(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    user = UserFactory(username="lead-x")
    client.force_login(user)
    with caplog.at_level(logging.INFO, logger="quartermaster.access"):
        response = client.get("/", headers={"X-Request-ID": "req-42"})
    (record,) = [r for r in caplog.records if r.name == "quartermaster.access"]
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == "req-42" == response["X-Request-ID"]
    assert line["message"].startswith("GET / 200 ")
    assert (line["method"], line["path"], line["route"], line["status"], line["user"]) == (
        "GET",
        "/",
        "home",
        200,
        "lead-x",
    )
    assert line["level"] == "INFO" and line["logger"] == "quartermaster.access"
    assert isinstance(line["duration_ms"], float)


def test_a_path_cannot_forge_a_text_access_line(
    client: Client, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    forged = "/x%0D%0A2026-01-01 00:00:00,000 INFO quartermaster.access [-] GET /admin/ 200%1B[2J%E2%80%AE"
    with caplog.at_level(logging.INFO, logger="quartermaster.access"):
        client.get(forged)
    (record,) = [r for r in caplog.records if r.name == "quartermaster.access"]
    RequestIdFilter().filter(record)
    text = TextFormatter(settings.LOGGING["formatters"]["text"]["format"]).format(record)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text
    assert "\u202e" not in text
    assert "/x\\r\\n2026-01-01 00:00:00,000 INFO" in text and "\\x1b[2J\\u202e" in text
    line = JsonFormatter().format(record)
    assert "\u202e" not in line and json.loads(line)["path"].endswith("\u202e")


def test_log_lines_inside_a_request_or_task_carry_its_id() -> None:
    record = logging.LogRecord("fleet", logging.WARNING, __file__, 1, "node %s", ("a",), None)
    token = request_id.set("task-7")
    try:
        RequestIdFilter().filter(record)
    finally:
        request_id.reset(token)
    line = json.loads(JsonFormatter().format(record))
    assert (line["message"], line["request_id"], line["level"]) == ("node a", "task-7", "WARNING")


def test_an_exception_is_one_json_line_with_its_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    text = JsonFormatter().format(record)
    assert "\n" not in text
    assert "ValueError: boom" in json.loads(text)["exception"]


@pytest.mark.django_db
def test_request_latency_is_counted_by_route_and_status(client: Client) -> None:
    for _ in range(3):
        client.get("/healthz")
    client.get("/no-such-page/")
    samples = scrape(client)
    health = (("method", "GET"), ("route", "healthz"), ("status", "200"))
    assert samples[("quartermaster_http_request_duration_seconds_count", health)] == 3
    bucket = tuple(sorted((*health, ("le", "+Inf"))))
    assert samples[("quartermaster_http_request_duration_seconds_bucket", bucket)] == 3
    unmatched = (("method", "GET"), ("route", "unmatched"), ("status", "404"))
    assert samples[("quartermaster_http_request_duration_seconds_count", unmatched)] == 1
    assert samples[("quartermaster_metrics_store_up", ())] == 1


@pytest.mark.django_db
def test_state_gauges_come_from_the_database(client: Client, demo: None) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from cluster.models import Cluster, SyncRun
    from cluster.services import settings_cluster

    now = timezone.now()
    SyncRun.objects.create(
        started_at=now - timedelta(seconds=95),
        finished_at=now - timedelta(seconds=90),
        duration_ms=4200,
    )
    SyncRun.objects.create(
        started_at=now - timedelta(seconds=35),
        finished_at=now - timedelta(seconds=30),
        error="boom",
    )
    other = Cluster.objects.create(name="infer", display_name="Infer", connection="token")
    SyncRun.objects.create(
        cluster=other, started_at=now - timedelta(seconds=5), finished_at=now, duration_ms=900
    )
    samples = scrape(client)
    mine = (("cluster", settings_cluster().name),)
    assert samples[("quartermaster_sync_duration_seconds", mine)] == 0  # the failed one
    assert samples[("quartermaster_sync_last_ok", mine)] == 0
    assert 89 < samples[("quartermaster_sync_age_seconds", mine)] < 120
    theirs = (("cluster", "infer"),)  # each cluster its own
    assert samples[("quartermaster_sync_duration_seconds", theirs)] == 0.9
    assert samples[("quartermaster_sync_last_ok", theirs)] == 1
    assert samples[("quartermaster_sync_age_seconds", theirs)] < 5
    assert samples[("quartermaster_pending_approvals", (("kind", "mig_change"),))] == 0
    assert ("quartermaster_pending_approvals", (("kind", "quota"),)) in samples
    assert samples[("quartermaster_drift_open", (("kind", "mig_layout"),))] == 0


def test_task_outcomes_are_counted(client: Client, db: Any) -> None:
    class Task:
        name = "loop.tasks.poll"

    metrics.TaskTimer.prerun(task_id="t1")
    metrics.TaskTimer.postrun(task_id="t1", task=Task(), state="SUCCESS")
    metrics.TaskTimer.prerun(task_id="t2")
    metrics.TaskTimer.postrun(task_id="t2", task=Task(), state="FAILURE")
    samples = scrape(client)
    for outcome in ("success", "failure"):
        key = (("outcome", outcome), ("task", "loop.tasks.poll"))
        assert samples[("quartermaster_task_duration_seconds_count", key)] == 1


@pytest.mark.django_db
def test_metrics_can_require_a_token(client: Client, settings: Any) -> None:
    settings.QM_METRICS_TOKEN = "s3cret"
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    scrape(client, Authorization="Bearer s3cret")


@pytest.mark.django_db
def test_metrics_kept_private_answer_no_one_without_a_token(settings: Any) -> None:
    settings.QM_METRICS_PUBLIC, settings.QM_METRICS_TOKEN = False, ""
    refused = Client().get("/metrics")
    assert refused.status_code == 403
    assert b"set QM_METRICS_TOKEN" in refused.content
    settings.QM_METRICS_TOKEN = "s3cret"
    scrape(Client(), Authorization="Bearer s3cret")


@pytest.mark.django_db
def test_made_up_methods_add_no_series(client: Client) -> None:
    for method in ("BREW", "PROPFIND", "X" * 200):
        client.generic(method, "/healthz")
    client.options("/healthz")
    samples = scrape(client)
    methods = {
        dict(labels)["method"]
        for name, labels in samples
        if name == "quartermaster_http_request_duration_seconds_count"
    }
    assert methods == {"OPTIONS", "other"}
    other = (("method", "other"), ("route", "healthz"), ("status", "200"))
    assert samples[("quartermaster_http_request_duration_seconds_count", other)] == 3


@pytest.mark.django_db
def test_without_redis_requests_still_work_and_the_scrape_says_so(
    client: Client, settings: Any
) -> None:
    settings.QM_METRICS_REDIS_URL = "redis://127.0.0.1:1/0"
    assert client.get("/healthz").status_code == 200
    samples = scrape(client)
    assert samples[("quartermaster_metrics_store_up", ())] == 0


@pytest.mark.django_db
def test_audit_events_record_the_request_id(client: Client) -> None:
    from portal.models import AuditEvent

    client.force_login(UserFactory(username="lead-y"))
    response = client.post(
        "/tokens/", {"name": "ci", "days": "30"}, headers={"X-Request-ID": "req-audit-1"}
    )
    assert response.status_code == 200
    event = AuditEvent.objects.get(event="api_token.created")
    assert event.request_id == "req-audit-1"


def test_a_nul_character_is_refused_before_any_view(client: Client, fleet: None) -> None:
    from tests.support import bearer

    api = client.get("/api/v1/mig-configs/?node=%17%00x", headers=bearer("lead-a"))
    assert api.status_code == 400
    assert api.json()["errors"] == {"node": ["Null characters are not allowed."]}
    client.force_login(User.objects.get(username="lead-a"))
    page = client.post("/tokens/", {"name": "a\x00b", "days": "7"})
    assert page.status_code == 400
    assert page.content.decode() == "Invalid input. name: Null characters are not allowed."
