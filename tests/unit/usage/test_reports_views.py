"""The Usage page, its CSV and the reports API: charts with their data, team scoping."""

from __future__ import annotations

import csv
import datetime as dt
import html
import io
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client, override_settings
from django.utils import timezone

from cluster.scope import settings_cluster_id
from tests.conftest import Snapshot, restore_demo, take_snapshot
from tests.factories import ObservedNodeFactory
from usage import reports
from usage.models import Rollup, Sample, WorkloadRecord
from usage.sampling import roll_up

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def history_snapshot(demo_snapshot: Snapshot, django_db_blocker: Any) -> Snapshot:
    """Three days of samples, three waits and their rollups, on the demo: made once for the
    module (1,152 samples rolled up took each test about a second) and restored for each
    test that asks for ``history``."""
    with django_db_blocker.unblock(), transaction.atomic():
        restore_demo(demo_snapshot)
        with override_settings(QM_SAMPLE_MAX_GAP_SECONDS=900):
            snapshot = take_snapshot(write_history)
        transaction.set_rollback(True)
    return snapshot


@pytest.fixture
def history(demo: None, history_snapshot: Snapshot) -> None:
    restore_demo(history_snapshot)


def write_history() -> None:
    # Three whole days, up to last midnight (reports cover whole days).
    now = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    start = now - dt.timedelta(days=3)
    cluster = settings_cluster_id()  # asked once, not by each of 1,152 rows built without it
    rows = []
    for minute in range(0, 3 * 24 * 60, 15):
        time = start + dt.timedelta(minutes=minute)
        rows += [
            Sample(
                cluster_id=cluster,
                time=time,
                kind="team",
                owner="team-a",
                scope="team-a",
                resource="nvidia.com/gpu",
                used=4,
                gpu_share=4,
                capacity=16,
            ),
            Sample(
                cluster_id=cluster,
                time=time,
                kind="team",
                owner="team-b",
                scope="team-b",
                resource="nvidia.com/mig-3g.40gb",
                used=8,
                gpu_share=4,
                capacity=8,
            ),
            Sample(
                cluster_id=cluster,
                time=time,
                kind="pool",
                owner="train",
                resource="nvidia.com/mig-3g.40gb",
                used=8,
                capacity=48,
                gpu_share=4,
            ),
            Sample(
                cluster_id=cluster,
                time=time,
                kind="queue",
                owner="cq-train",
                scope="ai-platform",
                flavor="h100-80gb",
                resource="nvidia.com/gpu",
                used=4,
                capacity=12,
                gpu_share=4,
            ),
        ]
    Sample.objects.bulk_create(rows)
    for index, wait in enumerate((30, 90, 600)):
        created = now - dt.timedelta(days=1, minutes=index)
        WorkloadRecord.objects.create(
            namespace="team-a",
            name=f"j{index}",
            cluster_queue="cq-train",
            created_at=created,
            admitted_at=created + dt.timedelta(seconds=wait),
        )
    roll_up(now=now + dt.timedelta(hours=1))


def login(username: str) -> Client:
    client = Client()
    client.force_login(User.objects.get(username=username))
    return client


def test_a_lead_sees_charts_and_numbers_of_their_teams_only(history: None) -> None:
    page = login("lead-a").get("/reports/?days=7").content.decode()
    assert 'role="img" aria-label="team-a: nvidia.com/gpu in use against the quota' in page
    assert "team-b" not in page.split('id="gpuh-title"')[1].split("</section>")[0]
    assert "<td>team-a</td><td>288</td><td>288</td>" in page  # 4 GPUs x 72 hours
    assert "Wait before admission per ClusterQueue" in page
    # The suggestions of the lead's own quotas only (team-b's is full, its slices too).
    suggestions = page.split('id="insights-title"')[1].split("</section>")[0]
    assert "team-a/team-a used 25% of its 16 nvidia.com/gpu on average" in suggestions
    assert "team-b" not in suggestions and "idle" not in suggestions


def test_admins_see_every_team_and_the_suggestions(history: None) -> None:
    page = login("admin").get("/reports/?days=7").content.decode()
    assert "<td>team-b</td><td>288</td><td>576</td>" in page  # 8 slices = 4 GPUs' worth
    assert "team-a/team-a used 25% of its 16 nvidia.com/gpu on average" in page
    assert "mig-3g.40gb sat 83% idle in pool train" not in page  # nothing else waited


def test_the_csv_is_the_table(history: None) -> None:
    response = login("lead-a").get("/reports/gpu-hours.csv?days=7")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="gpu-hours-')
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows == [
        {
            "team": "team-a",
            "gpu_hours": "288",
            "device_hours": "288",
            "default gpu_hours": "288",  # its part on each cluster
            "default device_hours": "288",
        }
    ]
    assert login("lead-a").get("/reports/nope.csv").status_code == 404


def test_the_api_gives_json_or_csv(history: None) -> None:
    client = login("approver")
    waits = client.get("/api/v1/reports/wait-times/?days=7").json()
    assert waits == [
        {
            "cluster": "default",
            "cluster_queue": "cq-train",
            "admitted": 3,
            "p50_s": 90.0,
            "p90_s": 498.0,
            "p99_s": 589.8,
        }
    ]
    text = client.get("/api/v1/reports/idle-capacity/?days=7&format=csv").content.decode()
    assert (
        text.splitlines()[0]
        == "cluster,pool,resource,average_allocatable,average_allocated,idle_share,"
        "idle_device_hours,average_allocatable_by_dra,average_allocated_by_dra"
    )
    assert client.get("/api/v1/reports/gpu-hours/?days=5").status_code == 400
    assert client.get("/api/v1/reports/nope/").status_code == 404
    assert Client().get("/api/v1/reports/gpu-hours/").status_code == 401


def test_a_team_page_and_its_chart_data(history: None) -> None:
    client = login("lead-a")
    assert 'href="/reports/?team=team-a"' in client.get("/").content.decode()
    page = client.get("/reports/?days=7&team=team-a").content.decode()
    assert "<h1>Usage of team-a</h1>" in page
    assert client.get("/reports/?team=team-b").status_code == 404  # not lead-a's team
    rows = list(
        csv.DictReader(
            io.StringIO(
                client.get("/reports/usage-over-time.csv?days=7&team=team-a").content.decode()
            )
        )
    )
    assert len(rows) == 3 and {r["team"] for r in rows} == {"team-a"}
    assert (rows[0]["average_used"], rows[0]["quota"]) == ("4", "16")


def test_suggestions_for_unused_quota_and_idle_profiles(settings: Any, demo: None) -> None:
    settings.QM_SAMPLE_MAX_GAP_SECONDS = 900
    now = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    rows = []
    for minute in range(0, 24 * 60, 15):
        time = now - dt.timedelta(days=1) + dt.timedelta(minutes=minute)
        rows += [
            # team-infer holds 8 GPUs of quota and uses 1.
            Sample(
                time=time,
                kind="team",
                owner="team-infer",
                scope="team-infer",
                resource="nvidia.com/gpu",
                used=1,
                capacity=8,
            ),
            # 3g.40gb slices wait in team-a while pool dev's 1g.10gb slices sit idle.
            Sample(
                time=time,
                kind="team",
                owner="team-a",
                scope="team-a",
                resource="nvidia.com/mig-3g.40gb",
                pending=1,
                capacity=-1,
            ),
            Sample(
                time=time,
                kind="pool",
                owner="dev",
                resource="nvidia.com/mig-1g.10gb",
                used=2,
                capacity=16,
            ),
        ]
    Sample.objects.bulk_create(rows)
    roll_up(now=now + dt.timedelta(hours=1))
    found = {i["kind"]: i for i in reports.insights(reports.Period.last(7))}
    assert found["unused quota"]["text"] == (
        "team-infer/team-infer used 12% of its 8 nvidia.com/gpu on average: lower the quota or "
        "lend the queue's share to the cohort."
    )
    assert found["unused quota"]["url"] == (
        "/quota/new/?team=team-infer&namespace=team-infer&resource=requests.nvidia.com%2Fgpu"
        "&cluster=default"
    )
    assert found["idle profile"]["text"] == (
        "nvidia.com/mig-1g.10gb sat 88% idle in pool dev while pods waited for "
        "nvidia.com/mig-3g.40gb: change the pool's MIG layout."
    )
    page = login("admin").get("/reports/?days=7").content.decode()
    assert "Open a prefilled request" in page
    assert (
        'href="/quota/new/?team=team-infer&amp;namespace=team-infer'
        '&amp;resource=requests.nvidia.com%2Fgpu&amp;cluster=default"'
    ) in page
    assert 'href="/changes/new/?pool=dev&amp;cluster=default"' in page


def test_the_suggestions_links_open_prefilled_forms(demo: None) -> None:
    from fleet.models import NodePool

    client = login("admin")
    page = client.get(
        "/quota/new/?team=team-infer&namespace=team-infer&resource=requests.nvidia.com%2Fgpu"
        "&cluster=default"
    ).content.decode()
    assert 'value="requests.nvidia.com/gpu"' in page
    now = timezone.now()
    pool = NodePool.objects.get(name="train")
    ObservedNodeFactory(
        name="gpu-z1",
        gpu_product="NVIDIA-A100-SXM4-80GB",
        gpu_count=8,
        mig_config="all-3g.40gb",
        labels={**pool.node_selector, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        allocatable={"nvidia.com/mig-3g.40gb": "16"},
        ready=True,
        first_seen=now,
        last_changed=now,
    )
    form = client.get("/changes/new/?pool=train").content.decode()
    box = form[form.index('value="gpu-z1"') - 80 : form.index('value="gpu-z1"') + 80]
    assert "checked" in box


def test_gpu_hours_per_cluster_queue(history: None) -> None:
    rows = login("lead-a").get("/api/v1/reports/queue-gpu-hours/?days=7").json()
    assert rows == [
        {
            "cluster": "default",
            "cluster_queue": "cq-train",
            "flavor": "h100-80gb",
            "resource": "nvidia.com/gpu",
            "gpu_hours": 288.0,
            "device_hours": 288.0,
        }
    ]
    page = login("lead-a").get("/reports/?days=7").content.decode()
    assert (
        "<td>cq-train</td><td>h100-80gb</td><td><code>nvidia.com/gpu</code></td><td>288</td>"
        in page
    )


def links(page: str, text: str) -> list[str]:
    """The hrefs of the links whose text is ``text`` (unescaped)."""
    return [html.unescape(h) for h in re.findall(rf'<a href="([^"]+)"[^>]*>{text}</a>', page)]


def test_each_chart_has_its_own_data_as_csv_and_json(history: None) -> None:
    client = login("lead-a")
    page = client.get("/reports/?days=7").content.decode()
    (csv_link,) = links(page, "CSV")[:1]
    (json_link,) = links(page, "JSON")[:1]
    assert csv_link == "/reports/usage-over-time.csv?days=7&team=team-a&resource=nvidia.com%2Fgpu"
    assert json_link == (
        "/api/v1/reports/usage-over-time/?days=7&team=team-a&resource=nvidia.com%2Fgpu&format=json"
    )
    rows = list(csv.DictReader(io.StringIO(client.get(csv_link).content.decode())))
    assert len(rows) == 3 and {(r["team"], r["resource"]) for r in rows} == {
        ("team-a", "nvidia.com/gpu")
    }
    assert (rows[0]["average_used"], rows[0]["quota"], rows[0]["covered_hours"]) == (
        "4",
        "16",
        "24",
    )
    assert rows[0]["partial"] == "no"
    data = client.get(json_link).json()
    # the same days: the API's ISO 8601 instants, the CSV's days as people read them
    assert [r["start"][:10] for r in data] == [r["start"] for r in rows]
    assert all(r["start"].endswith("T00:00:00+00:00") for r in data)
    assert data[0]["average_used"] == 4.0 and data[0]["partial"] is False


def test_a_chart_of_another_team_or_a_resource_column_that_is_not_there_is_refused(
    history: None,
) -> None:
    client = login("lead-a")
    assert client.get("/api/v1/reports/usage-over-time/?team=team-b").status_code == 404
    assert client.get("/reports/usage-over-time.csv?team=team-b").status_code == 404
    answer = client.get("/api/v1/reports/gpu-hours/?resource=nvidia.com/gpu")
    assert answer.status_code == 400
    assert answer.json()["errors"] == {"resource": ["The gpu-hours report has no resource column."]}
    plain = client.get("/reports/gpu-hours.csv?resource=nvidia.com/gpu")
    assert plain.status_code == 400
    assert plain.content.decode() == "The gpu-hours report has no resource column."
    # An admin may ask for any team that exists; a team of no such name is a 404.
    admin = login("admin")
    assert len(admin.get("/api/v1/reports/usage-over-time/?team=team-b").json()) == 3
    assert admin.get("/api/v1/reports/usage-over-time/?team=nope").status_code == 404
    assert admin.get("/reports/?team=nope").status_code == 404


def test_an_admin_chooses_a_team_and_the_page_is_that_teams(history: None) -> None:
    admin = login("admin")
    page = admin.get("/reports/?days=7").content.decode()
    select = page.split('<select id="f-team"')[1].split("</select>")[0]
    assert '<option value="">every team</option>' in select
    assert '<option value="team-b">team-b</option>' in select
    team_b = admin.get("/reports/?days=7&team=team-b").content.decode()
    assert "<h1>Usage of team-b</h1>" in team_b
    assert 'aria-label="team-b: nvidia.com/mig-3g.40gb in use' in team_b
    assert 'aria-label="team-a:' not in team_b
    assert '<option value="team-b" selected>team-b</option>' in team_b
    # A lead with one team has nothing to choose.
    assert 'id="f-team"' not in login("lead-a").get("/reports/?days=7").content.decode()


def test_a_leads_waits_are_their_teams_workloads(history: None) -> None:
    now = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    WorkloadRecord.objects.create(  # team-b's, waited an hour in the same queue
        namespace="team-b",
        name="b0",
        cluster_queue="cq-train",
        created_at=now - dt.timedelta(days=1),
        admitted_at=now - dt.timedelta(days=1) + dt.timedelta(hours=1),
    )
    lead = login("lead-a").get("/api/v1/reports/wait-times/?days=7").json()
    assert lead[0]["admitted"] == 3 and lead[0]["p99_s"] == 589.8
    everyone = login("approver").get("/api/v1/reports/wait-times/?days=7").json()
    assert everyone[0]["admitted"] == 4


def test_without_suggestions_the_page_says_what_it_checked(history: None) -> None:
    page = login("lead-b").get("/reports/?days=7").content.decode()
    section = page.split('id="insights-title"')[1].split("</section>")[0]
    assert (
        "None. Checked 1 namespace quota over 3 days: none used under 30% of its limit on "
        "average." in section
    )
    period = reports.last_days(7)
    everyone = reports.suggestions(period, since=reports.data_start(period), unused_below=0.2)
    assert everyone.items == []
    assert everyone.checked == (
        "Checked 2 namespace quotas over 3 days: none used under 20% of its limit on average; "
        "checked 1 MIG profile in 1 pool: none sat over 50% idle while pods waited for another "
        "profile."
    )
    Sample.objects.all().delete()
    Rollup.objects.all().delete()
    page = login("lead-b").get("/reports/?days=7").content.decode()
    assert "None. Nothing to check: no quota had samples in this period." in page


def test_a_user_of_no_team_sees_no_numbers(history: None) -> None:
    client = Client()
    client.force_login(User.objects.create_user("nobody"))
    page = client.get("/reports/?days=7").content.decode()
    assert "No samples in this period yet." in page and "team-a" not in page
    assert client.get("/reports/usage-over-time.csv?days=7").content == b""
    assert client.get("/api/v1/reports/wait-times/?days=7").json() == []


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [
        ("days=ten", "days", "Choose a period of 1, 7, 30 or 90 days."),
        ("days=14", "days", "Choose a period of 1, 7, 30 or 90 days."),
        ("days=-1", "days", "Choose a period of 1, 7, 30 or 90 days."),
        ("days=7&team=" + "x" * 64, "team", "at most 63 characters"),
    ],
)
def test_a_bad_period_or_team_is_refused_next_to_its_field(
    history: None, query: str, field: str, words: str
) -> None:
    from portal.models import AuditEvent

    client = login("lead-a")
    before = AuditEvent.objects.count()
    response = client.get(f"/reports/?{query}")
    body = html.unescape(response.content.decode())
    assert response.status_code == 400  # as the API answers the same parameters
    assert client.get(f"/api/v1/reports/gpu-hours/?{query}").status_code == 400
    box = body.split(f'name="{field}"')[1].split('<div class="field">')[0]
    assert 'aria-invalid="true"' in box.split(">")[0] and words in box
    assert 'class="error field-error"' in box
    if field == "days":  # no period shown as chosen that was not asked for
        assert '<option value="" selected disabled>choose a period</option>' in box
        assert " selected>" not in box.replace("selected disabled", "")
    # Nothing of the default period is shown as if it had been asked for.
    assert "GPU-hours" not in body and "<td>team-a</td>" not in body
    assert "above to see the usage." in body
    assert AuditEvent.objects.count() == before
    plain = client.get(f"/reports/gpu-hours.csv?{query}")
    assert plain.status_code == 400 and plain.content.decode().startswith(f"{field}: ")


def test_no_period_is_the_last_seven_days(history: None) -> None:
    page = login("lead-a").get("/reports/?days=").content.decode()
    assert '<option value="7" selected>last 7 days</option>' in page
    assert "<td>team-a</td><td>288</td><td>288</td>" in page
