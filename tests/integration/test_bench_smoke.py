"""Every benchmark at its ``--smoke`` size (``bench/smoke.py``), end to end, as a developer
runs it: its own process, its own database, its machine-readable last line. A benchmark
that no longer builds its data as the product does, or no longer runs, fails here instead
of on the next person who measures with it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from tests.support import ROOT, database_url, maintenance_connection

# Each benchmark's command (from the repository's root); the database ones get a database.
BENCHES = {
    "api": ["bench/api.py"],
    "pages": ["bench/pages.py", "--scale"],  # the scale scenario's pages (issue 39's)
    "reports": ["bench/reports.py"],
    "poll": ["bench/poll.py"],
    "poll_clusters": ["bench/poll.py", "--clusters", "2"],
    "poll_scenario": ["bench/poll.py", "--scenario"],  # the scale scenario served (issue 39)
    "fuzz": ["bench/fuzz.py"],
    "estimate": ["bench/estimate.py"],
    "impact": ["bench/impact.py"],
    "planner": ["bench/planner.py"],
    "whatif": ["bench/whatif.py"],
    "scale": ["bench/scale.py"],
}
VARIANTS = {"poll_scenario"}  # another run of a bench above, not a script of its own
PURE = {"estimate", "impact", "planner", "scale", "whatif"}  # plain facts, no database
LAST_LINE = re.compile(r"\w+=\S+( \w+=\S+)*")


def test_every_benchmark_has_a_smoke() -> None:
    """Every bench/*.py that is a benchmark is in BENCHES (``poll_clusters`` runs as
    ``poll.py --clusters N``; the helpers the benches import are not benchmarks)."""
    helpers = {"loadkit", "smoke", "scale_db", "scale_cluster"}  # scale_cluster: a server
    scripts = {
        path.stem
        for path in (ROOT / "bench").glob("*.py")
        if path.stem not in helpers and not path.stem.endswith(("_settings", "_urls"))
    }
    assert scripts == set(BENCHES) - VARIANTS


@pytest.fixture(scope="session")
def bench_template(django_db_setup: Any) -> str:
    """The migrated database the benches' databases are copied from: the run's template,
    which the test databases are copies of too (tests/conftest.py; a copy of the test
    database itself would need every connection to it ended, the session's own among them)."""
    template: str = settings.DATABASES["default"]["TEST"]["TEMPLATE"]
    return template


@pytest.fixture
def bench_database(bench_template: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of the bench's own: a copy of the migrated template, so the bench's
    ``migrate`` has nothing to do; dropped after."""
    name = f"{connection.settings_dict['NAME']}_bench_{request.node.callspec.id}"
    with maintenance_connection() as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.execute(f'CREATE DATABASE "{name}" TEMPLATE "{bench_template}"')
    yield database_url(name)
    with maintenance_connection() as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("bench", sorted(BENCHES))
def test_the_benchmark_runs_at_its_smoke_size(bench: str, request: pytest.FixtureRequest) -> None:
    env = {**os.environ, "REDIS_URL": settings.REDIS_URL}
    env.pop("DJANGO_SETTINGS_MODULE")  # each bench names its own
    if bench not in PURE:
        env["DATABASE_URL"] = request.getfixturevalue("bench_database")
    run = subprocess.run(
        [sys.executable, *BENCHES[bench], "--smoke"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    last = run.stdout.strip().splitlines()[-1]
    assert LAST_LINE.fullmatch(last), output[-4000:]


@pytest.mark.parametrize("bench", ["api", "pages"])
def test_a_size_the_bench_cannot_measure_is_refused_before_it_fills_anything(bench: str) -> None:
    """Each of ``compare``'s two rounds sends ``--requests // 2`` split among the clients:
    fewer than two per client leaves a side without latencies, which the bench found out
    only after filling its database (a percentile of nothing). It says so at once."""
    run = subprocess.run(
        [sys.executable, *BENCHES[bench], "--smoke", "--requests", "3", "--clients", "2"],
        cwd=ROOT,
        # a database nothing answers at: a bench that went on would fail there, writing nothing
        env={
            **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
            "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--requests 3 over 2 clients" in run.stderr and "give at least 4" in run.stderr
    assert run.stdout == ""  # nothing filled, nothing measured
