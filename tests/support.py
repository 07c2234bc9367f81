"""Helpers shared by the integration and browser tests: waiting, and a real Celery worker."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from cluster.models import Cluster
from diagnostics.selectors import explain_waiting
from kube import NotFound, ObjectRef
from loop.written import cluster_written
from portal.access.tokens import create_token
from portal.vocabulary.names import PodNames

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")
EVERY_NAME = PodNames(True, frozenset())  # whose pods a viewer who sees every team may name


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    """``predicate``'s first true value, asked again after 0.05 s, then half as long again
    each time up to half a second: a short wait ends at once, and a long one (a real Kueue
    admitting, a worker's poll) does not list a cluster or query the database ten times a
    second while the suite's other tests want the cores."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        try:
            value = predicate()
        except NotFound:
            value = None
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(pause, left))
        pause = min(pause * 1.5, 0.5)
    raise AssertionError(f"timed out waiting for {what or 'a condition'}")


def leaves_fitting(executor: MigrationExecutor, pinned: dict[str, str]) -> list[tuple[str, str]]:
    """Every other app's newest migration that needs none past ``pinned`` (each app's
    migration there): the other apps as they were then. An app whose migrations all came
    later (it did not exist yet) is left out, so a plan to ``pinned`` only goes one way."""
    graph = executor.loader.graph
    allowed = {app: set(graph.forwards_plan((app, name))) for app, name in pinned.items()}

    def fits(node: tuple[str, str]) -> bool:
        return all(n in allowed[n[0]] for n in graph.forwards_plan(node) if n[0] in allowed)

    newest: dict[str, tuple[str, str]] = {}
    for node in sorted(graph.nodes, key=lambda n: len(graph.forwards_plan(n))):
        if node[0] not in pinned and fits(node):
            newest[node[0]] = node  # a later one of the app needs all the earlier ones
    return list(newest.values())


@contextmanager
def scratch_database(
    alias: str,
    targets: Callable[[MigrationExecutor], list[tuple[str, str]]] | None = None,
    *,
    template: str = "",
) -> Iterator[MigrationExecutor]:
    """A database of its own next to the test database, reachable as ``alias``: a copy of
    ``template`` (a database nothing is connected to), or empty; then migrated to
    ``targets(executor)`` when given. Dropped afterwards. (Open it inside
    ``django_db_blocker.unblock()``.)"""
    default = connections["default"]
    name = f"{default.settings_dict['NAME']}_{alias}"
    copied = f' TEMPLATE "{template}"' if template else ""
    with default.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'CREATE DATABASE "{name}"{copied}')
    connections.databases[alias] = {**default.settings_dict, "NAME": name}
    try:
        executor = MigrationExecutor(connections[alias])
        if targets is not None:
            executor.migrate(targets(executor))
        yield executor
    finally:
        connections[alias].close()
        del connections[alias]
        del connections.databases[alias]
        with default.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def past_schemas(
    steps: list[tuple[str, Callable[[MigrationExecutor], list[tuple[str, str]]], dict[str, Any]]],
) -> Iterator[dict[str, str]]:
    """Databases at past schemas, made by one migration that goes on from each to the next
    (each step's targets ahead of the one before; its settings overridden while it runs):
    step name -> the database to copy (``scratch_database(template=...)``). Each migration
    test had migrated its own from nothing, rendering the same early states again."""
    from django.test import override_settings

    default = connections["default"]
    made: dict[str, str] = {}
    try:
        with scratch_database("past_schemas") as executor:
            for name, targets, overrides in steps:
                executor.loader.build_graph()
                with override_settings(**overrides):
                    executor.migrate(targets(executor))
                connections["past_schemas"].close()  # a template has no one connected
                made[name] = f"{default.settings_dict['NAME']}_past_{name}"
                source = connections.databases["past_schemas"]["NAME"]
                with default.cursor() as cursor:
                    cursor.execute(f'DROP DATABASE IF EXISTS "{made[name]}"')
                    cursor.execute(f'CREATE DATABASE "{made[name]}" TEMPLATE "{source}"')
        yield made
    finally:
        with default.cursor() as cursor:
            for copy in made.values():
                cursor.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')


def maintenance_connection() -> psycopg.Connection[Any]:
    """A connection to the test server's maintenance database (to create and drop
    databases)."""
    db = connection.settings_dict
    return psycopg.connect(
        dbname="postgres",
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or None,
        user=db["USER"] or None,
        password=db["PASSWORD"] or None,
        autocommit=True,
    )


def database_url(name: str | None = None) -> str:
    """The test database's URL (or that of the database ``name`` on the same server)."""
    db = connection.settings_dict
    host = quote(db["HOST"] or "127.0.0.1", safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    auth = quote(db["USER"] or "", safe="") + (
        f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    )
    return f"postgres://{auth}@{host}{port}/{name or db['NAME']}"


_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


class HeldByAFolder(Generic[T]):
    """A thing the tests of one folder share (a browser, the real cluster), entered when the
    first of them asks for it (``enter``: a context manager) and left after the last of them
    a process runs one after the other (its next test is not one of the folder's), once that
    test's fixtures are torn down, or when the run ends; their next test enters it again.
    The folder's conftest (whose hooks see only its tests) takes its teardown hook and
    session fixture, and its fixtures ask that fixture for it."""

    def __init__(self, folder: Path, enter: Callable[[], AbstractContextManager[T]]) -> None:
        self._folder, self._enter = folder, enter
        self._held: tuple[ExitStack, T] | None = None

    def get(self) -> T:
        if self._held is None:
            stack = ExitStack()
            self._held = (stack, stack.enter_context(self._enter()))
        return self._held[1]

    def release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held[0].close()

    def teardown_hook(self) -> Callable[..., Iterator[None]]:
        """The folder's ``pytest_runtest_teardown``."""

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_teardown(
            item: pytest.Item, nextitem: pytest.Item | None
        ) -> Iterator[None]:
            yield
            if nextitem is None or not nextitem.path.is_relative_to(self._folder):
                self.release()

        return pytest_runtest_teardown

    def session_fixture(self, name: str) -> Any:
        """A session fixture ``name`` giving this, released when the run's fixtures are torn
        down (before the live server and the test database they may hold on to), also
        when the run stopped before the folder's last test."""

        @pytest.fixture(scope="session", name=name)
        def held() -> Iterator[HeldByAFolder[T]]:
            yield self
            self.release()

        return held


def alive(pid: int) -> bool:
    """Whether the process ``pid`` runs (one that ended but is not reaped yet counts as
    ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def die_with_the_tests() -> None:
    """In a child the tests start, before it runs (``preexec_fn``): SIGTERM when the test
    process that started it dies. A test run stopped from outside (a timeout, an interrupt)
    otherwise leaves its Celery workers running in their own sessions, taking the next
    run's tasks from the shared broker into a database that is gone. Linux sends it when
    the *thread* that started the child ends: start such children from the test's own
    thread (as the fixtures do), not from a helper thread that may end first."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Worker:
    """A `celery worker` process with the test database, test broker and demo cluster."""

    def __init__(self, kube_url: str, **extra_env: str) -> None:
        from django.conf import settings

        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "portal.settings.test",
            "QM_TEST_WORKER": "true",
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "KUBE_URL": kube_url,
            "CELERY_VISIBILITY_TIMEOUT": "4",
            "CELERY_RESTORE_INTERVAL": "1",
            **extra_env,
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix="worker-", suffix=".log")[1])

    def start(self) -> None:
        offset = self.log.stat().st_size
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "portal",
                    "worker",
                    "--pool",
                    "prefork",
                    "--concurrency",
                    "1",
                    "--without-gossip",
                    "--without-mingle",
                    "--loglevel",
                    "INFO",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=die_with_the_tests,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if b" ready." in self.log.read_bytes()[offset:]:
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"the worker did not start:\n{self.log.read_text()[-3000:]}")

    def tail(self, size: int = 4000) -> str:
        """The end of the worker's log, for a failing test's message."""
        return self.log.read_text(errors="replace")[-size:]

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """The test is over: no task of it needs finishing (the broker is purged after)."""
        self.kill()
        self.log.unlink(missing_ok=True)


def served_schema(client: Any) -> dict[str, Any]:
    """The OpenAPI schema the portal serves, as JSON (a test client's request)."""
    response = client.get(
        "/api/schema/", headers={**bearer("admin"), "Accept": "application/vnd.oai.openapi+json"}
    )
    return json.loads(response.content)  # type: ignore[no-any-return]


def bearer(username: str) -> dict[str, str]:
    """The Authorization header of a new API token of ``username``."""
    _, text = create_token(user=User.objects.get(username=username), name="test")
    return {"Authorization": f"Bearer {text}"}


def protect_dev_pod(gateway: Any) -> None:
    """A PodDisruptionBudget that keeps team-b's dev pod from being evicted: a change on its
    node waits at evict (until the eviction timeout)."""
    gateway.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "dev", "namespace": "team-b"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "dev-test"}}},
        }
    )
    # The assessment reads the budget's status: a change asked before the disruption
    # controller wrote it would be stale by its approval.
    ref = ObjectRef("policy/v1", "PodDisruptionBudget", "dev", "team-b")
    wait_for(
        lambda: "disruptionsAllowed" in (gateway.get(ref).get("status") or {}),
        timeout=10,
        what="the status of PodDisruptionBudget dev",
    )


def run_job_on_node(cluster: Any, name: str, namespace: str, node: str) -> str:
    """A Job (backoffLimit 0, as Kueue's recorded Jobs have it) whose one pod runs on
    ``node`` with a 1g.10gb slice, created in the demo cluster as kubectl would; the pod's
    name once it runs."""
    from devcluster.jobs import JOBS, PODS  # lazy: only the tests that run Jobs need them

    container = {
        "name": "main",
        "image": "trainer:latest",
        "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}},
    }
    template = {"nodeName": node, "restartPolicy": "Never", "containers": [container]}
    cluster.cluster.create(
        JOBS,
        namespace,
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "backoffLimit": 0,
                "template": {"metadata": {"labels": {"app": name}}, "spec": template},
            },
        },
        manager="kubectl",
    )

    def running() -> str:
        for pod in cluster.cluster.all(PODS):
            meta = pod["metadata"]
            if meta.get("labels", {}).get("job-name") == name and (
                pod.get("status", {}).get("phase") == "Running"
            ):
                return str(meta["name"])
        return ""

    wait_for(lambda: bool(running()), timeout=10, what=f"the pod of Job {name} to run")
    return running()


def written(*clusters: Any) -> None:
    """What a poll does after writing a cluster's rows (``loop.written``: why its work waits
    is explained and stored), for rows a test wrote itself; no cluster: every cluster."""
    ids = [c if isinstance(c, int) else c.pk for c in clusters]
    for cluster_id in ids or Cluster.objects.order_by("pk").values_list("pk", flat=True):
        cluster_written(cluster_id, now=timezone.now())


def explained(namespaces: list[str], cluster_id: int) -> tuple[list[Any], list[Any], list[Any]]:
    """What waits in these namespaces of the cluster, as its poll explains it now and a
    viewer who sees every team is shown it."""
    written(cluster_id)
    return explain_waiting(namespaces, cluster_id=cluster_id, names=EVERY_NAME)
