"""The kept template (``tests/template.py``): its digest follows what the migrations make and
nothing else, and the database is migrated once, reused, and dropped when stale."""

from __future__ import annotations

import datetime as dt
import os
import secrets
from pathlib import Path

import psycopg
from psycopg import sql

from tests.support import database_url, maintenance_connection
from tests.template import (
    BUILDING,
    KEPT_DAYS,
    drop_stale,
    kept_template,
    migration_sources,
    template_digest,
    template_name,
)


def project(root: Path) -> list[Path]:
    """An app whose migration imports an operation module, which imports another."""
    (root / "app" / "migrations").mkdir(parents=True)
    files = {
        "app/__init__.py": "",
        "app/migrations/__init__.py": "",
        "app/migrations/0001_initial.py": "from app.ops import op\nimport json\n",
        "app/ops.py": "from app import deep\n",
        "app/deep.py": "X = 1\n",
        "app/views.py": "from app.ops import op\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    return [root / "app"]


def test_the_digest_follows_the_migrations_and_what_they_import(tmp_path: Path) -> None:
    apps = project(tmp_path)
    sources = {str(p.relative_to(tmp_path)) for p in migration_sources(tmp_path, apps)}
    assert sources == {
        "app/__init__.py",  # ``from app import deep`` runs the package first
        "app/migrations/__init__.py",
        "app/migrations/0001_initial.py",
        "app/ops.py",
        "app/deep.py",  # imported by what a migration imports
    }
    first = template_digest(tmp_path, apps, cluster_name="default")
    (tmp_path / "app/views.py").write_text("# a view changed\n")
    assert template_digest(tmp_path, apps, cluster_name="default") == first
    assert template_digest(tmp_path, apps, cluster_name="gpu-main") != first
    (tmp_path / "app/deep.py").write_text("X = 2\n")
    assert template_digest(tmp_path, apps, cluster_name="default") != first


def _tables(name: str) -> list[str]:
    with psycopg.connect(database_url(name)) as db:
        rows = db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return [table for (table,) in rows.fetchall()]


def test_a_template_is_migrated_once_reused_and_dropped_when_stale() -> None:
    name = template_name("qmtest", secrets.token_hex(8))
    migrated: list[str] = []

    def migrate(database: str) -> None:
        migrated.append(database)
        with psycopg.connect(database_url(database), autocommit=True) as db:
            db.execute("CREATE TABLE made (id int)")

    now = dt.datetime(2026, 12, 7, 12, tzinfo=dt.UTC)
    with maintenance_connection() as server:
        try:
            assert kept_template(server, name, migrate, now=now) == name
            assert kept_template(server, name, migrate, now=now) == name
            assert len(migrated) == 1 and migrated[0].startswith(f"{name}{BUILDING}")
            assert _tables(name) == ["made"]
            stamp = server.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                [name],
            ).fetchone()
            assert stamp == (f"used {now.isoformat()}",)
            # a half-built template of a process that is gone, and one another run is
            # migrating now (this process stands for it): only the first is dropped
            left = f"{name}{BUILDING}999999999"
            building = f"{name}{BUILDING}{os.getpid()}"
            for database in (left, building):
                server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
            later = now + dt.timedelta(days=KEPT_DAYS - 1)
            assert drop_stale(server, now=later, keep="", among=name) == [left]
            server.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(building)))
            assert drop_stale(server, now=later + dt.timedelta(days=2), keep="", among=name) == [
                name
            ]
            listed = server.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s", [f"{name}%"]
            ).fetchall()
            assert listed == []
        finally:
            for leftover in (name, f"{name}{BUILDING}999999999", f"{name}{BUILDING}{os.getpid()}"):
                server.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(leftover)
                    )
                )
