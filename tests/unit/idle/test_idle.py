"""Idle GPUs: found from DCGM readings (never from missing ones), the team told once per
spell, the list redacted per viewer in queries that do not grow with it, and the policy's
first switch-on waiting for a second person."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.models import (
    ObservedNode,
    ObservedPod,
    ObservedResourceClaim,
    ObservedResourceSlice,
)
from cluster.scope import settings_cluster_id
from costs.models import Price
from devcluster import dcgm as exporter
from fleet.models import NodePool
from gpus import dcgm
from health.collect import Collected
from health.services import store
from idle import policy
from idle.models import IdlePolicy, IdleSpell
from idle.runs import Reading, next_run, state_of
from idle.services import max_gap, record_readings
from portal.models import AuditEvent, Notification
from portal.vocabulary.errors import DomainError
from tests.factories import NamespaceFactory, ObservedNodeFactory, ObservedPodFactory

pytestmark = pytest.mark.django_db

NODE = "gpu-h100-02"
T0 = dt.datetime(2026, 12, 7, 8, 0, tzinfo=dt.UTC)
EVERY = dt.timedelta(minutes=1)


def _reading(util: float | None, pod: str = "nb-0") -> Reading:
    return Reading(NODE, 0, 0, "", "H100", "team-a", pod, util)


def test_a_device_is_idle_only_after_a_whole_period_read_without_a_gap() -> None:
    period, gap = dt.timedelta(minutes=10), dt.timedelta(minutes=3)
    run = None
    for minute in range(11):
        run = next_run(run, _reading(1.0), threshold=5, now=T0 + minute * EVERY, max_gap=gap)
    assert run is not None
    assert state_of(run, period=period, now=T0 + 10 * EVERY, max_gap=gap) == "idle"
    # a reading without utilisation, or a gap, starts again: not read, then not idle yet
    broken = next_run(run, _reading(None), threshold=5, now=T0 + 11 * EVERY, max_gap=gap)
    assert state_of(broken, period=period, now=T0 + 11 * EVERY, max_gap=gap) == "not read"
    late = next_run(run, _reading(1.0), threshold=5, now=T0 + 20 * EVERY, max_gap=gap)
    assert late.low_since == T0 + 20 * EVERY
    assert state_of(run, period=period, now=T0 + 20 * EVERY, max_gap=gap) == "not read"
    # used once: the run ends; another pod on the device: it starts again
    used = next_run(run, _reading(40.0), threshold=5, now=T0 + 11 * EVERY, max_gap=gap)
    assert used.low_since is None
    other = next_run(run, _reading(1.0, "nb-1"), threshold=5, now=T0 + 11 * EVERY, max_gap=gap)
    assert other.low_since == T0 + 11 * EVERY


def _collect(at: dt.datetime, idle: set[tuple[str, str]], pods: list[tuple[str, str]]) -> Any:
    """The demo cluster's exporter text for an H100 node running ``pods`` (one GPU each),
    read and stored as the health collection does, then kept by the idle app."""
    text = exporter.exposition(
        node=NODE,
        product="NVIDIA-H100-80GB-HBM3",
        memory_mib=81920,
        layout=[{} for _ in range(8)],
        pods=[(ns, name, "main", {"nvidia.com/gpu": 1}) for ns, name in pods],
        idle=frozenset(idle),
    )
    gpus = dcgm.gpus_by_node(dcgm.parse_exposition(text), default_node=NODE)
    rows = store(Collected(gpus=gpus), cluster_id=settings_cluster_id())
    return record_readings(settings_cluster_id(), rows, now=at)


@pytest.fixture
def notebook(team_a: Any, team_a_member: Any) -> list[tuple[str, str]]:
    """team-a's idle notebook (a Kueue workload) beside its busy trainer, on a node of a
    pool that judges over 10 minutes."""
    NamespaceFactory(name="team-a", team=team_a)
    NodePool.objects.create(
        cluster_id=settings_cluster_id(),
        name="h100",
        node_selector={"quartermaster.io/pool": "h100"},
        idle_period_minutes=10,
    )
    ObservedNodeFactory(name=NODE, labels={"quartermaster.io/pool": "h100"})
    ObservedPodFactory(
        name="nb-0", node_name=NODE, gpu_requests={"nvidia.com/gpu": "1"}, workload_name="job-nb"
    )
    ObservedPodFactory(name="train-0", node_name=NODE, gpu_requests={"nvidia.com/gpu": "1"})
    return [("team-a", "nb-0"), ("team-a", "train-0")]


def test_an_idle_workload_is_found_from_dcgm_readings_and_its_team_told_once(
    notebook: list[tuple[str, str]], team_a_member: Any, django_capture_on_commit_callbacks: Any
) -> None:
    idle = {("team-a", "nb-0")}
    for minute in range(0, 10):
        assert _collect(T0 + minute * EVERY, idle, notebook) == []
    with django_capture_on_commit_callbacks(execute=True):
        found = _collect(T0 + 10 * EVERY, idle, notebook)
    assert [(s.namespace, s.workload, s.gpus, s.idle_since) for s in found] == [
        ("team-a", "job-nb", 1.0, T0)
    ]
    told = Notification.objects.filter(user=team_a_member, event="idle.found")
    assert [(n.title, n.url, n.text.splitlines()[0]) for n in told] == [
        (
            "Idle: Workload team-a/job-nb holds 1 GPU unused for 0.2 h",
            "http://127.0.0.1:8000/idle/",
            "Team: team-a",
        )
    ]
    # found again at the next reading: the same spell, not told again
    with django_capture_on_commit_callbacks(execute=True):
        _collect(T0 + 11 * EVERY, idle, notebook)
    assert IdleSpell.objects.on(settings_cluster_id()).count() == 1
    assert told.count() == 1
    # used again: the spell ends
    _collect(T0 + 12 * EVERY, set(), notebook)
    assert IdleSpell.objects.on(settings_cluster_id()).get().ended_at == T0 + 12 * EVERY


def test_a_gpu_held_through_a_dra_claim_is_found_with_its_class_and_priced_at_it(
    notebook: list[tuple[str, str]], client: Any, team_a_admin: Any
) -> None:
    """DCGM names the pod on the GPU; the pod's allocated claim says the GPU came through the
    DeviceClass gpu.nvidia.com (a whole GPU of the NVIDIA driver's, as its slice publishes
    it): the spell keeps the class, and the list prices its hours at the class's price,
    not at the device plugin's."""
    cid = settings_cluster_id()
    ObservedNode.objects.on(cid).filter(name=NODE).update(gpu_product="NVIDIA-H100-80GB-HBM3")
    pod = ObservedPod.objects.on(cid).get(name="nb-0")
    pod.gpu_requests, pod.resource_claims = {}, [{"name": "gpu", "claim": "nb-0-gpu"}]
    pod.save()
    ObservedResourceSlice.objects.create(
        cluster_id=cid,
        name=f"{NODE}-gpu.nvidia.com",
        node_name=NODE,
        driver="gpu.nvidia.com",
        pool=NODE,
        devices=[{"name": "gpu-0", "attributes": {"type": "gpu", "uuid": "GPU-0"}}],
        last_changed=T0,
    )
    ObservedResourceClaim.objects.create(
        cluster_id=cid,
        namespace="team-a",
        name="nb-0-gpu",
        state=ObservedResourceClaim.State.ALLOCATED,
        requests=[{"name": "gpu", "device_class": "gpu.nvidia.com", "count": 1}],
        allocated=[{"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0"}],
        reserved_for=[{"resource": "pods", "name": "nb-0"}],
        last_changed=T0,
    )
    idle = {("team-a", "nb-0"), ("team-a", "train-0")}
    for minute in range(0, 11):
        found = _collect(T0 + minute * EVERY, idle, notebook)
    by_workload = {s.workload or s.pod: s for s in found}
    assert [d.get("device_class") for d in by_workload["job-nb"].devices] == ["gpu.nvidia.com"]
    assert [d.get("device_class") for d in by_workload["train-0"].devices] == [None]
    start = T0.date() - dt.timedelta(days=1)
    Price.objects.create(gpu_model="H100-80GB", per_hour="4.00", effective_from=start)
    Price.objects.create(
        gpu_model="H100-80GB", device_class="gpu.nvidia.com", per_hour="5.00", effective_from=start
    )
    IdleSpell.objects.filter(pk__in=[s.pk for s in found]).update(ended_at=T0 + 3 * 60 * EVERY)
    client.force_login(team_a_admin)
    cost = {
        row["workload"] or row["pod"]: row["cost"] for row in client.get("/api/v1/idle/").json()
    }
    assert cost == {"job-nb": "15.00", "train-0": "12.00"}  # 3 hours at 5.00, at 4.00


def test_missing_metrics_are_never_idle(notebook: list[tuple[str, str]]) -> None:
    idle = {("team-a", "nb-0")}
    for minute in range(0, 6):
        _collect(T0 + minute * EVERY, idle, notebook)
    # the exporter is silent for longer than the gap: the run starts again
    skipped = 6 + int(max_gap() / EVERY) + 1
    for minute in range(skipped, 12):
        assert _collect(T0 + minute * EVERY, idle, notebook) == []
    # a pod of the workload the poll sees on GPUs but no exporter reads: not read, not idle
    ObservedPodFactory(
        name="nb-1",
        node_name="gpu-h100-01",
        gpu_requests={"nvidia.com/gpu": "1"},
        workload_name="job-nb",
    )
    for minute in range(12, 12 + 11):
        assert _collect(T0 + minute * EVERY, idle, notebook) == []
    assert not IdleSpell.objects.on(settings_cluster_id()).exists()


def _spell(team: Any, name: str, **fields: Any) -> IdleSpell:
    now = timezone.now()
    values = {
        "cluster_id": settings_cluster_id(),
        "team": team,
        "namespace": f"{team.slug}-ns",
        "workload": name,
        "pod": "",
        "gpus": 1.0,
        "threshold": 5.0,
        "idle_since": now - dt.timedelta(hours=3),
        "found_at": now - dt.timedelta(hours=1),
        "last_seen": now,
    }
    return IdleSpell.objects.create(**(values | fields))


WHOLE = {"node": NODE, "gpu": 0, "instance": 0, "profile": "", "pod": "p-0", "util": 1.0}


def test_the_list_shows_a_lead_their_own_teams_only_in_queries_that_do_not_grow(
    client: Any, team_a: Any, team_b: Any, team_a_admin: Any, platform_admin: Any
) -> None:
    """With what each spell's GPU-hours cost at the price that held then ("no price" where
    none is set), priced in the same queries at one spell and at six."""
    _spell(team_b, "secret-train")
    NodePool.objects.create(
        name="h100", node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    )
    today = timezone.now().date()
    Price.objects.create(
        gpu_model="H100-80GB",
        per_hour="4.00",
        effective_from=today.replace(day=1) - dt.timedelta(days=400),
    )

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert client.get("/idle/").status_code == 200
            assert client.get("/api/v1/idle/").status_code == 200
        return len(seen)

    client.force_login(team_a_admin)
    _spell(team_a, "job-0", pool="h100", devices=[WHOLE])
    few = queries()
    for n in range(1, 6):
        _spell(team_a, f"job-{n}", pool="h100", devices=[WHOLE, {**WHOLE, "gpu": 1}], gpus=2.0)
    _spell(team_a, "job-mig", pool="a100", devices=[{**WHOLE, "profile": "3g.40gb"}])
    assert queries() == few
    page = client.get("/idle/").content.decode()
    api = client.get("/api/v1/idle/").json()
    assert "team-a-ns/job-5" in page and "secret-train" not in page
    assert {row["workload"] for row in api} == {f"job-{n}" for n in range(6)} | {"job-mig"}
    # 3 hours of one H100 at 4.00, of two; the a100 pool has no model known: no price
    cost = {row["workload"]: (row["gpu_hours"], row["cost"], row["currency"]) for row in api}
    assert cost["job-0"] == (3.0, "12.00", "USD")
    assert cost["job-5"] == (6.0, "24.00", "USD")
    assert cost["job-mig"] == (3.0, None, "USD")
    assert "12.00 USD" in page and "no price" in page and "They cost 132.00 USD" in page
    assert client.get("/api/v1/idle/?team=team-b").status_code == 404
    unknown = client.get("/api/v1/idle/?cluster=nowhere")
    assert unknown.status_code == 400 and "cluster" in unknown.json()["errors"]
    client.force_login(platform_admin)
    assert len(client.get("/api/v1/idle/").json()) == 8


def test_the_first_switch_on_waits_for_a_second_person(
    team_a: Any,
    team_a_admin: Any,
    team_a_member: Any,
    platform_admin: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with pytest.raises(PermissionDenied):
        policy.switch_on(actor=team_a_admin, team=team_a, source="web")
    with django_capture_on_commit_callbacks(execute=True):
        on = policy.switch_on(actor=platform_admin, team=team_a, source="web")
    assert on.state == IdlePolicy.State.AWAITING
    asked = Notification.objects.get(event="idle_policy.requested")  # the lead, not members
    assert (asked.user, asked.kind, asked.url) == (
        team_a_admin,
        "request",
        "http://127.0.0.1:8000/idle/teams/team-a/policy/",
    )
    with pytest.raises(DomainError):  # nobody approves their own
        policy.approve(actor=platform_admin, team=team_a, source="web")
    with pytest.raises(PermissionDenied):  # a member is not the lead
        policy.approve(actor=team_a_member, team=team_a, source="web")
    approved = policy.approve(actor=team_a_admin, team=team_a, source="web")
    assert (approved.state, approved.approved_by) == (IdlePolicy.State.ON, team_a_admin)
    policy.switch_off(actor=team_a_admin, team=team_a, source="web")
    again = policy.switch_on(actor=platform_admin, team=team_a, source="web")
    assert again.state == IdlePolicy.State.ON  # approved once: on at once
    events = list(
        AuditEvent.objects.filter(event__startswith="idle_policy.")
        .order_by("id")
        .values_list("event", "actor_name")
    )
    assert events == [
        ("idle_policy.requested", "padmin"),
        ("idle_policy.approved", "alice"),
        ("idle_policy.off", "alice"),
        ("idle_policy.on", "padmin"),
    ]


def test_a_collection_writes_in_the_same_statements_however_many_devices(
    notebook: list[tuple[str, str]],
) -> None:
    def statements(pods: list[tuple[str, str]], at: dt.datetime) -> int:
        text = exporter.exposition(
            node=NODE,
            product="NVIDIA-H100-80GB-HBM3",
            memory_mib=81920,
            layout=[{} for _ in range(8)],
            pods=[(ns, name, "main", {"nvidia.com/gpu": 1}) for ns, name in pods],
            idle=frozenset(pods),
        )
        gpus = dcgm.gpus_by_node(dcgm.parse_exposition(text), default_node=NODE)
        rows = store(Collected(gpus=gpus), cluster_id=settings_cluster_id())
        with CaptureQueriesContext(connection) as seen:
            record_readings(settings_cluster_id(), rows, now=at)
        return len(seen)

    for n in range(2, 6):
        ObservedPodFactory(
            name=f"nb-{n}",
            node_name=NODE,
            gpu_requests={"nvidia.com/gpu": "1"},
            workload_name=f"job-{n}",
        )
    more = [*notebook, *(("team-a", f"nb-{n}") for n in range(2, 6))]
    assert statements(notebook, T0) == statements(more, T0 + EVERY)
    # and once spells are open, the same again
    assert statements(notebook, T0 + 20 * EVERY) == statements(more, T0 + 21 * EVERY)


def test_the_policy_page_offers_each_person_what_they_may_do(
    client: Any, team_a: Any, team_a_admin: Any, platform_admin: Any
) -> None:
    client.force_login(platform_admin)
    answer = client.post("/idle/teams/team-a/policy/", {"action": "save", "grace_minutes": "x"})
    assert answer.status_code == 422 and b"Give a whole number of minutes." in answer.content
    client.post(
        "/idle/teams/team-a/policy/",
        {"action": "save", "grace_minutes": "45", "exempt_namespaces": "team-a-dev\nteam-a-ci"},
    )
    client.post("/idle/teams/team-a/policy/", {"action": "on"})
    page = client.get("/idle/teams/team-a/policy/").content.decode()
    assert "Switched on, awaiting approval" in page and 'value="approve"' not in page
    client.force_login(team_a_admin)
    page = client.get("/idle/teams/team-a/policy/").content.decode()
    assert 'value="approve"' in page and 'id="policy-form"' not in page
    client.post("/idle/teams/team-a/policy/", {"action": "approve"})
    saved = IdlePolicy.objects.get(team=team_a)
    assert (saved.state, saved.grace_minutes, saved.exempt_namespaces) == (
        "on",
        45,
        ["team-a-ci", "team-a-dev"],
    )


def test_an_off_policy_tells_a_lead_nothing_is_suspended_and_who_switches_it_on(
    client: Any, team_a: Any, team_a_admin: Any
) -> None:
    client.force_login(team_a_admin)
    page = client.get("/idle/teams/team-a/policy/").content.decode()
    assert "Once it is on, an idle Kueue workload" in page
    assert "Off: nothing of team-a is suspended. A platform admin switches it on" in page
    assert 'value="on"' not in page
