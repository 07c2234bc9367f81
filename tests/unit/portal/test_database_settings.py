"""The portal's PostgreSQL connections: JIT compilation off unless asked for
(``DATABASE_JIT``). Its reads that walk JSON arrays are estimated at millions of rows' cost
while they read dozens, which set off the JIT compiler: a lead's home on a small
installation spent 3.0 s compiling a statement that runs in 1.4 ms (PostgreSQL 15 with
LLVM, as Debian and the official images ship it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[3]
SHOW = "import portal.settings.production as s; print(s.DATABASES['default']['OPTIONS'])"


def production_options(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")}
    run = subprocess.run(
        [sys.executable, "-c", SHOW],
        cwd=ROOT,
        env={
            **clean,
            "SECRET_KEY": "x" * 50,
            "DATABASE_URL": "postgres://qm@db.example:5432/qm",
            **env,
        },
        capture_output=True,
        text=True,
        check=True,
    )
    return run.stdout


@pytest.mark.django_db
def test_the_portals_connection_has_jit_off() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone() == ("off",)


def test_database_jit_true_leaves_the_servers_setting() -> None:
    assert "-c jit=off" in production_options()
    assert "jit" not in production_options(DATABASE_JIT="true")
