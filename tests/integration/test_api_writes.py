"""API writes that hold under concurrency and refuse what they cannot read: real threads,
each with its own PostgreSQL connection, against the demo data."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import Client

from portal.models import AuditEvent
from tenants.models import Namespace
from tests.support import bearer

# Committed data: every thread's own connection sees it.
pytestmark = pytest.mark.django_db(transaction=True)

QUOTA = "/api/v1/namespaces/team-a/quota/"


def racing_puts(url: str, bodies: list[dict[str, object]], etag: str) -> list[int]:
    """Each body PUT from its own thread at the same moment, with the same If-Match."""
    barrier = threading.Barrier(len(bodies))
    answers: list[int] = []

    def put(body: dict[str, object]) -> None:
        try:
            headers = {**bearer("admin"), "If-Match": etag}  # committed: other threads see it
            barrier.wait()
            answers.append(
                Client()
                .put(url, body, content_type="application/json", headers=headers)
                .status_code
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=put, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(answers)


def test_concurrent_if_match_quota_writes_let_exactly_one_through(demo: None) -> None:
    read = Client().get("/api/v1/namespaces/team-a/", headers=bearer("admin"))
    etag, before = read.headers["ETag"], read.json()["quota"]
    bodies: list[dict[str, object]] = [{"hard": {**before, "pods": str(60 + i)}} for i in range(8)]
    assert racing_puts(QUOTA, bodies, etag) == [200] + [412] * 7
    written = AuditEvent.objects.filter(event="quota.changed", source="api")
    assert written.count() == 1  # one write, from the value that was read
    assert written.get().old["pods"] == before["pods"]
    pods = Namespace.objects.get(name="team-a").quota_items.get(resource="pods").hard
    assert pods == written.get().new["pods"]


def test_concurrent_if_match_queue_writes_let_exactly_one_through(demo: None) -> None:
    url = "/api/v1/cluster-queues/cq-train/"
    read = Client().get(url, headers=bearer("admin"))
    etag, groups = read.headers["ETag"], read.json()["resource_groups"]
    bodies = []
    for i in range(6):  # lower the H100 quota, each writer to another value: no promise asked
        lowered = [dict(g) for g in groups]
        lowered[0] = {
            **groups[0],
            "flavors": [
                {
                    **groups[0]["flavors"][0],
                    "resources": [
                        {**groups[0]["flavors"][0]["resources"][0], "nominalQuota": str(4 + i)}
                    ],
                }
            ],
        }
        bodies.append({"resource_groups": lowered})
    assert racing_puts(url + "quotas/", bodies, etag) == [200] + [412] * 5
    assert AuditEvent.objects.filter(event="cluster_queue.saved", source="api").count() == 1


def test_a_form_encoded_quota_put_is_refused_and_the_quota_kept(client: Client, demo: None) -> None:
    admin = bearer("admin")
    before = client.get("/api/v1/namespaces/team-a/", headers=admin).json()["quota"]
    for content_type, body in (
        ("application/x-www-form-urlencoded", 'hard={"requests.nvidia.com/gpu":"24"}'),
        (
            "multipart/form-data; boundary=x",
            '--x\r\nContent-Disposition: form-data; name="hard"\r\n\r\n{}\r\n--x--\r\n',
        ),
    ):
        answer = client.generic("PUT", QUOTA, body, content_type=content_type, headers=admin)
        assert answer.status_code == 415, content_type
        assert answer.json()["code"] == "unsupported_media_type"
    assert client.get("/api/v1/namespaces/team-a/", headers=admin).json()["quota"] == before
    assert not AuditEvent.objects.filter(event="quota.changed", source="api").exists()
