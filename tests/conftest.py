"""Shared fixtures: the standard cast, the demo scenario (loaded once per test session and
restored in milliseconds for each test that asks for it), the demo cluster and the portal
on it. Tests are marked by their folder: ``integration`` (real Redis, Celery workers, the
demo cluster, subprocesses) and ``e2e`` (a real browser); the fast loop is
``python3 dev.py test -m "not integration and not e2e"``."""

from __future__ import annotations

import copy
import functools
import gc
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.apps import apps as django_apps
from django.conf import settings
from django.core.servers import basehttp
from django.db import connection, transaction
from django.db.backends.base.creation import TEST_DATABASE_PREFIX

import devcluster
from cluster.scope import settings_cluster_id
from demo.services import load_demo
from devcluster.controllers import Options
from kube import Gateway, connect
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from portal.models import PlatformRole
from tests.factories import MembershipFactory, NamespaceFactory, TeamFactory, UserFactory
from tests.support import Worker, database_url, maintenance_connection
from tests.template import kept_template, template_digest, template_name

TESTS = Path(__file__).resolve().parent
MARKS = {
    "integration": "integration",
    "deploy": "integration",
    "api": "integration",
    "e2e": "e2e",
    "realcluster": "realcluster",
}
# Controllers of the demo cluster at test speed (a MIG change takes a fraction of a second).
FAST = Options(
    mig_delay_seconds=0.2,
    retry_seconds=0.3,
    kubelet_start_seconds=0.05,
    kubelet_stop_seconds=0.1,
    tick=0.03,
)


# The live server (pytest-django's, Django's threaded WSGI server) answers a request in two
# writes, the status and headers, then the body: with Nagle's algorithm on, the body waits for
# the client's ACK of the headers, which the client's kernel delays by up to 40 ms. Every
# request of a browser test, the API fuzz and the CLI's and assistant's tests paid that
# (measured: 110 -> 51 ms for a list, 69 -> 22 ms for a refused request, on one machine).
# gunicorn, which serves the portal outside the tests, sets TCP_NODELAY on its sockets; so
# does the demo cluster's server.
basehttp.WSGIRequestHandler.disable_nagle_algorithm = True


# The cyclic collector less often in the test processes: a test makes tens of thousands of
# objects (model instances, querysets, rendered pages) that die with it by reference
# counting, and the default threshold (700 allocations) ran a collection every few hundred
# of them, each walking the young objects and, every hundredth, everything the process holds
# (Django, the product, the demo's snapshot). Timed with gc.callbacks over the unit tier at
# -n 2: 12 CPU-seconds in collections (11,400 of them) at the default, 2.6 s (94) here.
# Collections still run (memory made of cycles is still freed), every 50,000 allocations.
# The product's processes keep their own settings (portal/wsgi.py freezes what it imported).
GC_THRESHOLD = (50_000, 20, 100)


def pytest_configure(config: pytest.Config) -> None:
    gc.set_threshold(*GC_THRESHOLD)


def quick_gc(argv: list[str]) -> list[str]:
    """The command that runs the Python script ``argv[0]`` with its arguments under the same
    threshold: the template's migration renders every model state the migrations make,
    long-lived objects the default threshold walked again and again (migrate on an empty
    database: 7.4-8.6 -> 5.4-6.1 CPU-seconds, while the test processes wait for it)."""
    script = (
        f"import gc, runpy, sys; gc.set_threshold(*{GC_THRESHOLD!r}); sys.argv = {argv!r}; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    return [sys.executable, "-c", script]


# ------------------------------------------------------------------ the migrated template

# One migration, kept between runs: the first process (pytest-xdist's controller, or the only
# one) finds or migrates a template database (``tests/template.py``: kept on the server under
# a digest of what the migrations make), and every test process's database is a copy of it
# (Django's TEST["TEMPLATE"]), whose migrate then has nothing to do: four processes had each
# migrated from scratch (about 6 CPU-seconds and as many of the server's, each).
TEMPLATE_KEY = "qm_template_database"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts the test processes
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    parallel = (config.getoption("numprocesses", None) or 0) > 1
    warming = warm_imports(config.args) if parallel else None
    apps = [Path(app.path) for app in django_apps.get_app_configs()]
    digest = template_digest(TESTS.parent, apps, cluster_name=settings.QM_CLUSTER_NAME)
    name = template_name(settings.DATABASES["default"]["NAME"], digest)
    with maintenance_connection() as server:
        config.stash[TEMPLATE] = kept_template(server, name, migrate_template)
    if warming is not None:
        warming.wait(timeout=600)


def migrate_template(name: str) -> None:
    """The migrations applied to the empty database ``name``, as the run command applies them."""
    migrated = subprocess.run(
        quick_gc(["manage.py", "migrate", "--no-input", "-v", "0"]),
        cwd=TESTS.parent,
        env={**os.environ, "DATABASE_URL": database_url(name)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    if migrated.returncode:
        raise pytest.UsageError(f"the template database did not migrate:\n{migrated.stderr}")


def warm_imports(args: list[str]) -> subprocess.Popen[bytes]:
    """Collect the run's tests once, beside the template's migration, with bytecode written:
    the test processes then read the rewritten test modules and the compiled product from
    the caches instead of each rewriting and compiling all of them. Where
    ``PYTHONDONTWRITEBYTECODE`` is set (as on CI machines) nothing was ever cached, and
    every run paid that in each of its four processes."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", *args],
        cwd=TESTS.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: each test process is told the template's name."""
    node.workerinput[TEMPLATE_KEY] = node.config.stash.get(TEMPLATE, "")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None, request: pytest.FixtureRequest
) -> None:
    """The test database is made as a copy of the run's migrated template."""
    config = request.config
    name = getattr(config, "workerinput", {}).get(TEMPLATE_KEY) or config.stash.get(TEMPLATE, "")
    if name:
        settings.DATABASES["default"].setdefault("TEST", {})["TEMPLATE"] = name


TEMPLATE = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)  # after pytest-django's own ordering
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by its folder, and deal the marked ones (the slow kinds) evenly to the
    test processes of a parallel run (``spread``)."""
    for item in items:
        path = Path(str(item.fspath)).relative_to(TESTS)
        if path.parts[0] in MARKS:
            item.add_marker(getattr(pytest.mark, MARKS[path.parts[0]]))
    processes = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    slow = set(MARKS.values())
    items[:] = spread(items, processes, slow=lambda item: bool(slow & item.keywords.keys()))


def spread(items: list[Any], processes: int, *, slow: Callable[[Any], bool]) -> list[Any]:
    """``items`` reordered for pytest-xdist's work-stealing, which hands each test process an
    equal run of the list (a process that runs out takes the second half of the busiest
    one's rest): the slow tests are dealt round-robin, so each run holds its share of them
    (two long tests side by side in the collection go to two processes, not one after the
    other; the tests of a module-scoped fixture go to one, see ``_unit``), and the fast ones
    fill each run up. Each run starts with its slow tests (the real-control-plane tier
    first: one long unit), so that the longest ones start at once instead of at the end of
    a process's run, where the last of them alone kept the run going on one core; the fast
    ones follow, the part other processes steal. Otherwise each run keeps the order the
    items had. No module list kept by hand."""
    if processes < 2:
        return items
    place = {id(item): index for index, item in enumerate(items)}
    units: dict[Any, list[Any]] = {}  # the slow tests, those of a shared fixture together
    for item in items:
        if slow(item):
            units.setdefault(_unit(item), []).append(item)
    fast_ones = [item for item in items if not slow(item)]
    runs: list[list[Any]] = [[] for _ in range(processes)]
    for index, unit in enumerate(units.values()):
        runs[index % processes].extend(unit)
    left, start = len(items), 0
    for index, run in enumerate(runs):
        size = left // (processes - index)  # what the scheduler sends this process
        take = max(0, size - len(run))
        run.extend(fast_ones[start : start + take])
        start += take
        left -= size
    runs[-1].extend(fast_ones[start:])

    def first(item: Any) -> tuple[bool, bool, int]:
        return (not slow(item), _unit(item) != "realcluster", place[id(item)])

    return [item for run in runs for item in sorted(run, key=first)]


def _unit(item: Any) -> Any:
    """What is dealt as one: the real-control-plane tier (one real cluster per machine: its
    tests share the process that starts it), the tests of a module that share a module-scoped
    fixture (the image test's built venv: dealt apart, three processes would wait for the one
    building it), the migration tests (``past_schema``: one migration makes all their
    starting schemas), else the test alone."""
    path = Path(str(getattr(item, "fspath", "")))
    if (path.relative_to(TESTS) if path.is_absolute() else path).parts[:1] == ("realcluster",):
        return "realcluster"
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if "past_schema" in definitions:
        return "past_schema"  # the migration tests: one migration of their past schemas
    shared = any(d.scope in {"module", "package"} for ds in definitions.values() for d in ds)
    return str(item.fspath) if shared else id(item)


@pytest.fixture(scope="session", autouse=True)
def _close_stray_connections(django_db_setup: Any, django_db_blocker: Any) -> Any:
    """Live-server threads and killed workers can leave sessions on the test database; end
    them before it is dropped (torn down before ``django_db_setup``, which it depends on).
    Only a test database: when no test of the run asked for one, pytest-django sets none up
    and the connection is the developer's own database, whose sessions (the portal running
    beside, another test process) are not this run's to end."""
    yield
    if not connection.settings_dict["NAME"].startswith(TEST_DATABASE_PREFIX):
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(autouse=True)
def _empty_cache() -> Any:
    """Each test starts with no rate-limit history (the cache is a real Redis database)."""
    from django.core.cache import cache  # lazy: the cache is configured for the test run

    from portal.infra import outbox, shared_store

    cache.clear()
    shared_store.breaker.reset()  # a test that stopped Redis leaves no open breaker behind
    outbox._skip_until = 0.0
    yield


# ----------------------------------------------------------------------------- the demo

# The rows of every table the demo filled: (table, rows as COPY text, its id sequence), and the
# id the settings' cluster had when they were taken (the rows point at it).
Snapshot = tuple[int, list[tuple[str, bytes, str | None]]]


@pytest.fixture(scope="session")
def demo_snapshot(django_db_setup: Any, django_db_blocker: Any) -> Snapshot:
    """The seed chapter's scenario as ``load_demo`` writes it, taken once per session: the
    rows it added to every table, then rolled back (the test database stays as it was)."""
    with django_db_blocker.unblock():
        return take_snapshot(load_demo)


def take_snapshot(write: Callable[[], object]) -> Snapshot:
    """The rows ``write`` adds to every table, taken and then rolled back (the database stays
    as it was), for ``restore_demo`` to put back in milliseconds: rows that take a test
    seconds to make (the demo, a history of samples) are made once and restored for each
    test. Only added rows are taken: ``write`` must not change or delete rows there were."""
    with transaction.atomic():
        # The settings' cluster is there before (the rows point at it; a restore points
        # them at the one there is then), never one of the rows taken.
        taken_on = settings_cluster_id()
        tables = connection.introspection.table_names()
        before = {table: _last_id(table) for table in tables}
        counts = _row_counts(tables)
        write()
        after = _row_counts(tables)
        filled = [t for t, n in after.items() if n > counts[t]]
        rows = [(t, _copy_out(t, after_id=before[t]), _id_sequence(t)) for t in filled]
        transaction.set_rollback(True)
    return taken_on, rows


def _row_counts(tables: list[str]) -> dict[str, int]:
    with connection.cursor() as cursor:
        counts = {}
        for table in tables:
            cursor.execute(f'SELECT count(*) FROM "{table}"')
            counts[table] = cursor.fetchone()[0]
        return counts


def _last_id(table: str) -> int | None:
    """The largest id in ``table`` (0 when empty; None: it has no id column)."""
    if _id_sequence(table) is None:
        return None
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT coalesce(max(id), 0) FROM "{table}"')
        return int(cursor.fetchone()[0])


def _copy_out(table: str, *, after_id: int | None) -> bytes:
    query = f'(SELECT * FROM "{table}" WHERE id > {after_id})' if after_id else f'"{table}"'
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {query} TO STDOUT") as copy:
        return b"".join(bytes(chunk) for chunk in copy)


def _id_sequence(table: str) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_serial_sequence(%s, 'id') FROM information_schema.columns "
            "WHERE table_name = %s AND column_name = 'id'",
            [f'"{table}"', table],
        )
        row = cursor.fetchone()
        return row[0] if row else None


def restore_demo(snapshot: Snapshot) -> None:
    """Put the demo rows back (one transaction: foreign keys are checked at its end), on the
    settings' cluster as it is now (a flushed database made it anew), and move each id
    sequence past them."""
    taken_on, rows = snapshot
    cluster_id = settings_cluster_id()
    with transaction.atomic(), connection.cursor() as cursor:
        for table, copied, sequence in rows:
            with cursor.cursor.copy(f'COPY "{table}" FROM STDIN') as copy:
                copy.write(copied)
            if cluster_id != taken_on and _has_column(table, "cluster_id"):
                cursor.execute(
                    f'UPDATE "{table}" SET cluster_id = %s WHERE cluster_id = %s',
                    [cluster_id, taken_on],
                )
            if sequence:
                cursor.execute(
                    f'SELECT setval(%s, GREATEST((SELECT max(id) FROM "{table}"), '
                    f"(SELECT last_value FROM {sequence})))",
                    [sequence],
                )


@functools.cache  # the test database's tables do not change during a run
def _has_column(table: str, column: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = %s AND column_name = %s",
            [table, column],
        )
        return cursor.fetchone() is not None


@pytest.fixture
def demo(db: Any, demo_snapshot: Snapshot) -> None:
    """The seed chapter's scenario, exactly as the run command loads it (restored from the
    session's snapshot: tests of ``load_demo`` itself call it)."""
    restore_demo(demo_snapshot)


# ----------------------------------------------------------------------------- the cast


@pytest.fixture
def team_a(db: Any) -> Any:
    return TeamFactory(slug="team-a", name="Team A")


@pytest.fixture
def team_a_on_the_cluster(team_a: Any) -> Any:
    """A namespace of team-a on the settings' cluster: the clusters a user may see are those
    their teams' namespaces are on (platform admins and approvers: every one)."""
    return NamespaceFactory(name="team-a-work", team=team_a)


@pytest.fixture
def team_b(db: Any) -> Any:
    return TeamFactory(slug="team-b", name="Team B")


@pytest.fixture
def team_a_admin(team_a: Any) -> Any:
    """The lead (tenant admin) of team-a."""
    user = UserFactory(username="alice")
    MembershipFactory(user=user, team=team_a, role="lead")
    return user


@pytest.fixture
def team_a_member(team_a: Any) -> Any:
    user = UserFactory(username="bob")
    MembershipFactory(user=user, team=team_a, role="member")
    return user


@pytest.fixture
def team_b_member(team_b: Any) -> Any:
    user = UserFactory(username="charlie")
    MembershipFactory(user=user, team=team_b, role="member")
    return user


@pytest.fixture
def platform_admin(db: Any) -> Any:
    user = UserFactory(username="padmin")
    PlatformRole.objects.create(user=user, role="admin")
    return user


@pytest.fixture
def approver(db: Any) -> Any:
    user = UserFactory(username="dana")
    PlatformRole.objects.create(user=user, role="approver")
    return user


# ----------------------------------------------------------------------------- the cluster


@pytest.fixture
def demo_cluster(request: pytest.FixtureRequest) -> Iterator[devcluster.DemoCluster]:
    """The demo cluster on a free loopback port, its controllers at test speed. A test
    asks for others with ``@pytest.mark.demo_cluster(options=Options(...), users={...})``
    (``users`` may be a function, called when the cluster starts)."""
    marker = request.node.get_closest_marker("demo_cluster")
    # A copy each time: a test may slow its cluster's controllers down.
    arguments = {"options": copy.copy(FAST), **(marker.kwargs if marker else {})}
    if callable(arguments.get("users")):
        arguments["users"] = arguments["users"]()
    cluster = devcluster.start(**arguments)
    yield cluster
    cluster.stop()


@pytest.fixture
def gateway(demo_cluster: devcluster.DemoCluster) -> Gateway:
    """The real client's gateway to the demo cluster."""
    return connect(url=demo_cluster.url, token="any")


@pytest.fixture
def portal_cluster(
    settings: Any, demo: None, demo_cluster: devcluster.DemoCluster, gateway: Gateway
) -> Gateway:
    """The demo scenario applied to the demo cluster and polled once: portal and cluster in
    step, as after ``dev.py run``. The poll waits for the demo cluster to catch up with the
    apply (``settle``): polled at once, a queue's status could be read from before a
    workload that the list of workloads, read after, already had."""
    settings.KUBE_URL = demo_cluster.url
    settings.QM_MIG_POLL_SECONDS = 0
    apply_desired_state(gateway=gateway)
    demo_cluster.settle()
    poll_cluster(gateway=gateway)
    return gateway


@pytest.fixture
def worker(settings: Any, demo_cluster: devcluster.DemoCluster) -> Iterator[Worker]:
    """A real Celery worker process on the test database, the test broker and the demo
    cluster; the broker is emptied before and after (unacknowledged tasks of a killed
    worker included, or the next test's worker would run them)."""
    settings.KUBE_URL = demo_cluster.url
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.flushdb()
    process = Worker(demo_cluster.url, QM_MIG_POLL_SECONDS="1")
    process.start()
    yield process
    process.stop()
    broker.flushdb()
