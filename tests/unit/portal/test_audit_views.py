"""The Audit page, its CSV and the audit API as people and machines read them: per-field
changes, labels, links, the request id; the same team scope and filters everywhere; a fixed
number of queries whatever the number of rows."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.audit.record import SYSTEM, record_audit
from portal.audit.rows import CSV_COLUMNS
from portal.models import AuditEvent
from tenants.models import Namespace, Team
from tenants.services import set_namespace_quota

pytestmark = pytest.mark.django_db

QUOTA_LINE = "requests.nvidia.com/gpu: 16 → 24"


def client_for(username: str) -> Client:
    client = Client()
    client.force_login(User.objects.get(username=username))
    return client


def raise_team_a_quota() -> AuditEvent:
    namespace = Namespace.objects.get(name="team-a")
    hard = dict(namespace.quota_items.values_list("resource", "hard"))
    set_namespace_quota(
        actor=User.objects.get(username="admin"),
        namespace=namespace,
        hard={**hard, "requests.nvidia.com/gpu": "24"},
        source="web",
    )
    return AuditEvent.objects.filter(event="quota.changed").latest("id")


def audit_table(html: str) -> str:
    found = re.search(r'<table class="audit">.*?</table>', html, re.S)
    assert found, "no audit table on the page"
    return found.group(0)


def csv_rows(client: Client, query: str = "") -> list[dict[str, str]]:
    response = client.get(f"/audit/events.csv{query}")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="audit-')
    text = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    reader = csv.DictReader(io.StringIO(text))
    assert tuple(reader.fieldnames or ()) == CSV_COLUMNS
    return list(reader)


def test_the_page_shows_readable_changes_a_label_a_link_and_the_request_id(demo: None) -> None:
    event = raise_team_a_quota()
    AuditEvent.objects.filter(pk=event.pk).update(request_id="rid-quota-edit-1")
    namespace = Namespace.objects.get(name="team-a")
    table = audit_table(client_for("lead-a").get("/audit/").content.decode())
    assert QUOTA_LINE in table
    assert "Namespace quota changed" in table
    assert f'<a href="/#namespace-{namespace.pk}-title">team-a</a>' in table
    assert 'href="?request=rid-quota-edit-1"' in table
    # no raw dictionary anywhere in the rows, escaped or not
    for raw in ("{'", '{"', "{&#x27;", "{&quot;"):
        assert raw not in table


def test_the_request_id_filter_shows_every_event_of_one_request(demo: None) -> None:
    event = raise_team_a_quota()
    AuditEvent.objects.filter(pk=event.pk).update(request_id="rid-one")
    table = audit_table(client_for("admin").get("/audit/?request=rid-one").content.decode())
    assert table.count('<tr id="audit-event-') == 1
    assert QUOTA_LINE in table


def test_the_csv_has_the_readable_changes_and_the_recorded_json(demo: None) -> None:
    event = raise_team_a_quota()
    rows = csv_rows(client_for("admin"), "?event=quota.&actor=admin")
    assert [row["event"] for row in rows] == ["quota.changed"]
    row = rows[0]
    assert dt.datetime.fromisoformat(row["time"]) == event.time
    assert {k: row[k] for k in ("actor", "event_label", "target_type", "team", "source")} == {
        "actor": "admin",
        "event_label": "Namespace quota changed",
        "target_type": "tenants.namespace",
        "team": "team-a",
        "source": "web",
    }
    assert row["target_id"] == str(Namespace.objects.get(name="team-a").pk)
    assert row["changes"] == QUOTA_LINE
    assert json.loads(row["old"])["requests.nvidia.com/gpu"] == "16"
    assert json.loads(row["new"])["requests.nvidia.com/gpu"] == "24"


def test_a_team_leads_csv_has_only_their_teams_rows(demo: None) -> None:
    raise_team_a_quota()  # team-a's
    lead_b = User.objects.get(username="lead-b")
    record_audit(
        actor=lead_b, event="team.changed", source="web", team=Team.objects.get(slug="team-b")
    )
    rows = csv_rows(client_for("lead-b"))
    assert rows and {row["team"] for row in rows} == {"team-b"}
    # another team's slug is refused exactly like a slug no team has
    for team in ("team-a", "no-such-team"):
        refused = client_for("lead-b").get(f"/audit/events.csv?team={team}")
        assert (refused.status_code, refused.content) == (
            400,
            b"team: No such team among yours: use one of team-b.\n",
        )
    page = client_for("lead-b").get("/audit/").content.decode()
    assert page.count('<tr id="audit-event-') == len(rows)
    assert {row["team"] for row in csv_rows(client_for("admin"))} >= {"team-a", "team-b"}


def test_the_csv_link_carries_the_pages_filters(demo: None) -> None:
    raise_team_a_quota()
    page = client_for("admin").get("/audit/?event=quota.&team=team-a").content.decode()
    assert 'href="/audit/events.csv?team=team-a&amp;event=quota."' in page


def test_a_refused_filter_gets_no_csv(demo: None) -> None:
    response = client_for("admin").get("/audit/events.csv?since=yesterday")
    assert response.status_code == 400
    assert "A day as YYYY-MM-DD." in response.content.decode()


def test_a_formula_in_a_cell_is_not_run_by_a_spreadsheet(demo: None) -> None:
    AuditEvent.objects.create(actor_name="=HYPERLINK(1)", event="x.y", source="web")
    rows = csv_rows(client_for("admin"), "?event=x.y")
    assert rows[0]["actor"] == "'=HYPERLINK(1)"


def test_the_api_gives_the_readable_changes(demo: None) -> None:
    raise_team_a_quota()
    body = client_for("lead-a").get("/api/v1/audit/?event=quota.changed").json()
    result = body["results"][0]
    assert result["event_label"] == "Namespace quota changed"
    assert result["changes"] == [
        {
            "field": "requests.nvidia.com/gpu",
            "kind": "changed",
            "old": "16",
            "new": "24",
            "text": QUOTA_LINE,
        }
    ]


def add_rows(count: int) -> None:
    """``count`` rows of team-a with changes and a linked object each."""
    team = Team.objects.get(slug="team-a")
    namespace = Namespace.objects.get(name="team-a")
    AuditEvent.objects.bulk_create(
        AuditEvent(
            actor_name="admin",
            team=team,
            event="quota.changed",
            target_type="tenants.namespace",
            target_id=str(namespace.pk),
            target_repr=namespace.name,
            old={"pods": str(n)},
            new={"pods": str(n + 1)},
            source="web",
            request_id=f"rid-{n}",
        )
        for n in range(count)
    )


def queries(user: str, url: str, shows: str) -> int:
    """The queries of one answer (after the session is warm), checking it shows ``shows``."""
    client = client_for(user)
    client.get("/audit/")
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
        if response.streaming:
            body = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
        else:
            body = response.content.decode()
    assert shows in body, (url, shows)
    return len(captured)


@pytest.mark.parametrize("url", ["/audit/", "/audit/events.csv"])
@pytest.mark.parametrize("user", ["lead-a", "admin"])
def test_the_page_and_the_csv_query_the_same_whatever_the_rows(
    demo: None, url: str, user: str
) -> None:
    add_rows(5)
    small = queries(user, url, "pods: 4 → 5")
    add_rows(600)  # more than a page and more than one chunk of the CSV
    assert queries(user, url, "pods: 599 → 600") == small
    assert small <= 10, small


def test_other_teams_pods_are_counted_not_named_in_the_audit(demo: None) -> None:
    record_audit(
        actor=SYSTEM,
        event="mig_change.step.done",
        source="task",
        team=Team.objects.get(slug="team-a"),
        new={
            "node": "gpu-a100-03",
            "step": "evict",
            "message": "evicted team-b/dev-test-1g, team-a/own-pod; no GPU pods left",
            "evicted": ["team-a/own-pod", "team-b/dev-test-1g"],
        },
    )
    lead = client_for("lead-a")
    page = audit_table(lead.get("/audit/").content.decode())
    assert "dev-test-1g" not in page and "another team's pod" in page.replace("&#x27;", "'")
    assert "team-a/own-pod" in page  # the reader's own team's pod keeps its name
    assert all("dev-test-1g" not in str(row) for row in csv_rows(lead))
    api = lead.get("/api/v1/audit/").content.decode()
    assert "dev-test-1g" not in api and "another team's pod" in api
    assert "team-b/dev-test-1g" in client_for("approver").get("/audit/").content.decode()


def test_related_objects_are_named_not_numbered(demo: None) -> None:
    from queues.models import ClusterQueue, LocalQueue
    from queues.services import save_local_queue

    save_local_queue(
        actor=User.objects.get(username="admin"),
        local_queue=LocalQueue(
            name="team-a-extra",
            namespace=Namespace.objects.get(name="team-a"),
            cluster_queue=ClusterQueue.objects.get(name="cq-train"),
        ),
        source="web",
    )
    event = AuditEvent.objects.filter(event="local_queue.saved").latest("id")
    assert (event.new["namespace"], event.new["cluster_queue"]) == ("team-a", "cq-train")
    table = audit_table(client_for("admin").get("/audit/?event=local_queue.saved").content.decode())
    assert "cq-train" in table and not re.search(r"cluster_queue: \d", table)
