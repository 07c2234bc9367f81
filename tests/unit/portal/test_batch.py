"""Several reads in one round trip: each read's rows as a raw queryset gives them."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from django.db import ProgrammingError, connection
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from changes.models import MigChangeRequest
from cluster.models import ObservedPod
from portal.infra.round_trips import Read, page_together, queryset_read, read_together
from tests.factories import MigChangeRequestFactory, ObservedPodFactory

pytestmark = pytest.mark.django_db

FIELDS = [f.attname for f in ObservedPod._meta.concrete_fields]


# Pages read in autocommit, where the reads go as a pipeline of prepared statements; inside a
# transaction (and without prepared statements) they go as one multi-statement text.
BOTH_WAYS = pytest.mark.parametrize(
    "way",
    [
        pytest.param("joined", id="in-a-transaction"),
        pytest.param("pipelined", id="autocommit", marks=pytest.mark.django_db(transaction=True)),
    ],
)


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@BOTH_WAYS
def test_each_reads_rows_come_back_in_one_round_trip_as_a_raw_queryset_gives_them(
    way: str,
) -> None:
    started = timezone.now() - dt.timedelta(minutes=5)
    ObservedPodFactory(
        name="train-0",
        phase="Pending",
        gpu_requests={"nvidia.com/mig-3g.40gb": 2},
        started_at=started,
        pending_message="0/3 nodes are available",
    )
    ObservedPodFactory(name="notebook", gpu_requests={"nvidia.com/gpu": 1})
    MigChangeRequestFactory(assessment={"verdict": "needs_drain", "evictions": [{"team": "a"}]})
    pods_sql = f"SELECT * FROM {ObservedPod._meta.db_table} WHERE namespace = %s ORDER BY name"
    changes_sql = f"SELECT * FROM {MigChangeRequest._meta.db_table} WHERE state = ANY(%s)"
    with CaptureQueriesContext(connection) as captured:
        pods, counted, changes = read_together(
            Read(pods_sql, ["team-a"], ObservedPod),
            Read("SELECT count(*), %s::text FROM fleet_observedpod", ["pods"]),
            Read(changes_sql, [["pending"]], MigChangeRequest),
        )
    assert len(captured) == 1
    raw = list(ObservedPod.objects.raw(pods_sql, ["team-a"]))
    assert [p.name for p in pods] == ["notebook", "train-0"]
    for mine, theirs in zip(pods, raw, strict=True):
        assert isinstance(mine, ObservedPod) and not mine._state.adding
        assert {f: getattr(mine, f) for f in FIELDS} == {f: getattr(theirs, f) for f in FIELDS}
    assert pods[1].gpu_requests == {"nvidia.com/mig-3g.40gb": 2}  # jsonb decoded
    assert pods[1].started_at == started
    assert counted == [(2, "pods")]
    assert changes[0].assessment["evictions"] == [{"team": "a"}]
    assert changes[0].team.slug  # a related object is read as the ORM reads it
    assert connection.get_autocommit() == (way == "pipelined")


def test_a_column_the_read_leaves_out_is_deferred_and_read_when_asked() -> None:
    ObservedPodFactory(name="x", pending_message="why")
    (pods,) = read_together(
        Read(f"SELECT id, name FROM {ObservedPod._meta.db_table}", [], ObservedPod)
    )
    assert pods[0].name == "x"
    assert "pending_message" in pods[0].get_deferred_fields()
    assert pods[0].pending_message == "why"


def test_a_read_builds_each_row_as_the_models_from_db_builds_it() -> None:
    """Without Django's ``__init__`` (the faster way): the same attributes and state, and the
    row saved back is an update of the same row, not a new one."""
    pod = ObservedPodFactory(name="x", gpu_requests={"nvidia.com/gpu": 1})
    sql = f"SELECT * FROM {ObservedPod._meta.db_table} WHERE id = %s"
    (built,) = read_together(Read(sql, [pod.pk], ObservedPod))[0]
    (theirs,) = ObservedPod.objects.raw(sql, [pod.pk])
    mine = {k: v for k, v in vars(built).items() if k != "_state"}
    assert mine == {k: v for k, v in vars(theirs).items() if k != "_state"}
    assert (built._state.adding, built._state.db) == (False, "default")
    assert built.cluster.pk == pod.cluster_id  # its foreign key read as the ORM reads it
    built.phase = "Running"
    with CaptureQueriesContext(connection) as captured:
        built.save(update_fields=["phase"])
    assert captured[0]["sql"].startswith("UPDATE")
    assert ObservedPod.objects.on_every_cluster().get().phase == "Running"


def test_a_model_whose_instances_are_listened_to_is_built_by_its_init() -> None:
    """Where something listens to a model's ``post_init`` (a field that sets itself up, a
    receiver of ours one day), each row read still sends it."""
    ObservedPodFactory(name="x")
    ObservedPodFactory(name="y")
    heard: list[str] = []

    def listen(sender: type, instance: ObservedPod, **_: object) -> None:
        heard.append(instance.name)

    post_init.connect(listen, sender=ObservedPod)
    try:
        sql = f"SELECT * FROM {ObservedPod._meta.db_table} ORDER BY name"
        (pods,) = read_together(Read(sql, [], ObservedPod))
    finally:
        post_init.disconnect(listen, sender=ObservedPod)
    assert heard == ["x", "y"] == [p.name for p in pods]


def test_no_read_costs_no_query_and_a_read_is_one_statement() -> None:
    with CaptureQueriesContext(connection) as captured:
        assert read_together() == []
    assert len(captured) == 0
    with pytest.raises(ValueError, match="one statement"):
        read_together(Read("SELECT 1; SELECT 2"))


@pytest.mark.django_db(transaction=True)
def test_in_autocommit_a_read_sent_a_few_times_is_prepared_and_answers_the_same() -> None:
    ObservedPodFactory(name="a", namespace="team-a")
    sql = f"SELECT name FROM {ObservedPod._meta.db_table} WHERE namespace = %s"
    answers = [read_together(Read(sql, [namespace]))[0] for namespace in ["team-a", "x"] * 4]
    assert answers == [[("a",)], []] * 4
    assert any("WHERE namespace = $1" in statement for statement in prepared_statements())


@pytest.mark.django_db(transaction=True)
def test_a_read_that_must_not_be_prepared_is_planned_anew_each_time() -> None:
    """``prepared=False``: sent as often as a prepared one would be prepared, never is."""
    ObservedPodFactory(name="a", namespace="team-a")
    sql = f"SELECT name FROM {ObservedPod._meta.db_table} WHERE namespace = %s"
    answers = [
        read_together(Read(sql, [namespace], prepared=False))[0]
        for namespace in ["team-a", "x"] * 4
    ]
    assert answers == [[("a",)], []] * 4
    assert not any("WHERE namespace = $1" in statement for statement in prepared_statements())


def test_in_a_transaction_nothing_is_prepared() -> None:
    sql = f"SELECT name FROM {ObservedPod._meta.db_table} WHERE namespace = %s"
    for _ in range(8):
        read_together(Read(sql, ["team-a"]))
    assert not any("WHERE namespace" in statement for statement in prepared_statements())


@pytest.mark.django_db(transaction=True)
def test_a_prepared_read_of_a_table_another_process_changed_is_prepared_again() -> None:
    """A migration in another process adds a column to a table a prepared ``SELECT *``
    reads: PostgreSQL refuses the old plan, and the read is prepared again, not refused."""
    other = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    other.execute("CREATE TABLE batch_probe (a int)")
    try:
        other.execute("INSERT INTO batch_probe VALUES (1)")
        for _ in range(7):
            assert read_together(Read("SELECT * FROM batch_probe"), Read("SELECT 2")) == [
                [(1,)],
                [(2,)],
            ]
        assert any("batch_probe" in statement for statement in prepared_statements())
        other.execute("ALTER TABLE batch_probe ADD COLUMN b text DEFAULT 'new'")
        assert read_together(Read("SELECT * FROM batch_probe"), Read("SELECT 2")) == [
            [(1, "new")],
            [(2,)],
        ]
    finally:
        other.execute("DROP TABLE batch_probe")
        other.close()


@BOTH_WAYS
def test_a_failing_read_raises_the_databases_error_and_the_connection_goes_on(way: str) -> None:
    with pytest.raises(ProgrammingError, match="no_such_table"):
        read_together(Read("SELECT 1"), Read("SELECT * FROM no_such_table"))
    if way == "joined":
        return  # the test's transaction is aborted, as any failed statement leaves one
    assert read_together(Read("SELECT %s::int", [3])) == [[(3,)]]


@BOTH_WAYS
def test_a_page_and_its_count_come_in_one_round_trip_as_the_paginator_gives_them(
    way: str,
) -> None:
    from django.core.paginator import Paginator
    from django.db.models import F, Value

    for index in range(7):
        ObservedPodFactory(name=f"pod-{index}")
    pods = ObservedPod.objects.annotate(shown=Value("yes"), again=F("name")).order_by("name")
    for number in (1, 2, 3, 4, 99, 0, -1, "ten", "2.0", None):
        expected = Paginator(pods, 3).get_page(number)
        with CaptureQueriesContext(connection) as captured:
            page = page_together(pods, 3, number)
            rows = list(page.object_list)
        assert (page.number, page.paginator.num_pages) == (expected.number, 3), number
        assert [p.name for p in rows] == [p.name for p in expected.object_list], number
        assert all(p.shown == "yes" and p.again == p.name for p in rows)  # annotations
        out_of_range = number in (4, 99, 0, -1)  # get_page falls back to the last page
        assert len(captured) == (2 if out_of_range else 1), (number, len(captured))
    empty = page_together(ObservedPod.objects.none(), 3, 2)
    assert (empty.number, list(empty.object_list)) == (1, [])
    nothing = page_together(ObservedPod.objects.filter(name="none"), 3, 1)
    assert (nothing.number, nothing.paginator.count, list(nothing.object_list)) == (1, 0, [])


@pytest.mark.django_db(transaction=True)
def test_a_connection_the_server_closed_between_requests_is_opened_again() -> None:
    """A page's first read may be a batch: like Django's own cursor, it checks the kept
    connection at the start of a request and opens a new one when the server closed it."""
    assert read_together(Read("SELECT 1")) == [[(1,)]]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    other = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    try:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()
    connection.close_if_unusable_or_obsolete()  # what a request's start does
    assert read_together(Read("SELECT pg_backend_pid() <> %s", [pid])) == [[(True,)]]


def test_a_read_of_joined_rows_is_refused_not_built_from_the_wrong_columns() -> None:
    MigChangeRequestFactory()
    with pytest.raises(ValueError, match="select_related"):
        queryset_read(MigChangeRequest.objects.select_related("team"))
    sql = f"SELECT c.*, t.* FROM {MigChangeRequest._meta.db_table} c JOIN tenants_team t ON t.id = c.team_id"
    with pytest.raises(ValueError, match="same name"):
        read_together(Read(sql, [], MigChangeRequest))
