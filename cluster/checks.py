"""Start-up checks of the clusters' stored credentials: ``manage.py migrate`` (and ``check
--database default``) fails, and a Celery worker refuses to start, when a stored credential
cannot be decrypted with QM_CREDENTIALS_KEY, or a key is not a Fernet key. It is a
database check (Django runs those only where a database is named: migrate does)."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import DatabaseError, connection

from cluster.credentials import CredentialKeyError, check_keys, check_stored_credentials


def credentials_readable(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Only where Django names a database (``migrate``, ``check --database``) are the
    stored credentials read; elsewhere the keys alone are checked."""
    try:
        if databases:
            check_stored_credentials()
        else:
            check_keys()
    except CredentialKeyError as exc:
        return [checks.Error(str(exc), id="cluster.E001")]
    except DatabaseError:  # no table yet (before the first migrate): the keys alone
        try:
            check_keys()
        except CredentialKeyError as exc:
            return [checks.Error(str(exc), id="cluster.E001")]
    return []


def refuse_to_start(**kwargs: Any) -> None:
    """Celery's worker_init: a worker that could not reach any registered cluster stops at
    once with the reason, not at its first task. Celery logs and forgets an exception a
    signal handler raises, so this exits (SystemExit is not an Exception). Its database
    connection is closed before the pool forks (a child must not share its socket)."""
    try:
        check_stored_credentials()
    except CredentialKeyError as exc:
        raise SystemExit(f"The worker does not start: {exc}") from exc
    finally:
        if not connection.in_atomic_block:  # (a test calling it holds a transaction)
            connection.close()


def readiness() -> str:
    """What /readyz reports (it runs in a pool thread: its connection ends with it)."""
    try:
        return check_stored_credentials()
    finally:
        connection.close()
