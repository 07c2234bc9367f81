"""The migrated template every test database is a copy of, kept on the database server the
tests use (the checkout's embedded one, or ``DATABASE_URL``'s) between runs, under a digest of
what the migrations make (``kept_template``).

Migrating an empty database took about 9 s of every run's start (7.5 CPU-seconds of Django
rendering model states, the test processes waiting for it): a developer's run of one test
file took 16.8 s, 5.7 s with the template kept. What a migration makes depends only on the
migration files, the project modules they import (operations, defaults, validators), every
other installed app's migrations (Django's own and third parties': ``migration_sources``),
and the one setting a data migration reads (``QM_CLUSTER_NAME``): while none of those
change, the database the last run migrated is the same one (a fresh clone's first run, on a
server of its own, migrates once). Nothing ever connects to a template (a copy could not be
made while anything did); a template unused for a week is dropped, as is one a killed run
left half-built.
"""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import django
from psycopg import errors, sql

from tests.support import alive

KEPT_DAYS = 7
MARK = "_tpl_"  # in every kept template's name, and only there
BUILDING = "_b"  # a template being built: "<its name>_b<pid>", renamed once migrated


def migration_sources(root: Path, apps: list[Path]) -> list[Path]:
    """Every migration file of the installed apps (``apps``: their folders, Django's own and
    third parties' among them), and the modules of the project under ``root`` they import
    (and those import, and so on), in a stable order."""
    packages = {path.parent.name for path in root.glob("*/__init__.py")}

    def file_of(module: str) -> Path | None:
        parts = module.split(".")
        if parts[0] not in packages:
            return None
        path = root.joinpath(*parts)
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def imported(path: Path) -> set[Path]:
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        return {found for name in names if (found := file_of(name)) is not None}

    migrations = sorted(path for app in apps for path in (app / "migrations").glob("*.py"))
    seen = set(migrations)
    waiting = list(migrations)
    while waiting:
        for found in imported(waiting.pop()) - seen:
            seen.add(found)
            waiting.append(found)
    return sorted(seen)


def template_digest(root: Path, apps: list[Path], *, cluster_name: str) -> str:
    """A digest of what the migrated template is made from (``migration_sources``)."""
    digest = hashlib.sha256()
    for path in migration_sources(root, apps):
        digest.update(f"{path.parent.parent.name}/{path.name}".encode())
        digest.update(b"\0" + path.read_bytes() + b"\0")
    digest.update(f"{django.__version__}\0{sys.version_info[:2]}\0{cluster_name}".encode())
    return digest.hexdigest()[:16]


def template_name(database: str, digest: str) -> str:
    """The kept template's name: within PostgreSQL's 63 bytes with its building suffix."""
    return f"test_{database[:24]}{MARK}{digest}"


def kept_template(
    server: Any, name: str, migrate: Callable[[str], None], *, now: dt.datetime | None = None
) -> str:
    """The template ``name`` on ``server`` (a maintenance connection in autocommit), migrated
    by ``migrate(database)`` only when no run kept it before; its last use stamped, and
    templates unused for ``KEPT_DAYS`` or left half-built by a run that is gone dropped."""
    now = now or dt.datetime.now(dt.UTC)
    drop_stale(server, now=now, keep=name)
    if not _exists(server, name):
        building = f"{name}{BUILDING}{os.getpid()}"
        _drop(server, building)
        server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
        try:
            migrate(building)
            _stamp(server, building, now)  # never a kept template without its stamp
            server.execute(
                sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                    sql.Identifier(building), sql.Identifier(name)
                )
            )
        except errors.DuplicateDatabase:
            pass  # another run kept the same template meanwhile: it is the same database
        finally:
            _drop(server, building)
    _stamp(server, name, now)
    return name


def _stamp(server: Any, name: str, now: dt.datetime) -> None:
    """When the template was last used, in its comment (``drop_stale`` reads it)."""
    server.execute(
        sql.SQL("COMMENT ON DATABASE {} IS {}").format(
            sql.Identifier(name), sql.Literal(f"used {now.isoformat()}")
        )
    )


def drop_stale(server: Any, *, now: dt.datetime, keep: str, among: str = "") -> list[str]:
    """Drop the kept templates (other than ``keep``; of those whose name starts with
    ``among``) last used more than ``KEPT_DAYS`` ago, and those being built by a process
    that is gone; their names."""
    rows = server.execute(
        "SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database "
        "WHERE strpos(datname, %s) > 0 AND starts_with(datname, %s)",
        [MARK, among],
    ).fetchall()
    stale = []
    for name, comment in rows:
        if name == keep:
            continue
        head, _, pid = name.rpartition(BUILDING)
        if MARK in head and pid.isdigit():
            if not alive(int(pid)):
                stale.append(name)
            continue
        used = _used(comment)
        if used is None or now - used > dt.timedelta(days=KEPT_DAYS):
            stale.append(name)
    for name in stale:
        _drop(server, name)
    return stale


def _drop(server: Any, name: str) -> None:
    server.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _used(comment: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat((comment or "").removeprefix("used "))
    except ValueError:
        return None


def _exists(server: Any, name: str) -> bool:
    return bool(server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone())
