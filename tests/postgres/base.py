"""Django's PostgreSQL backend, with one change for the suite: a flush (what ends every
transactional test: a live server's, a worker's, a browser's) deletes the rows instead of
truncating the tables. A TRUNCATE of the 58 tables makes each one a new file and drops the
old ones: a second or more a flush on a busy 2-core machine, against tens of milliseconds for
DELETEs of the few rows a test writes. Every foreign key is deferrable (Django makes them so;
``tests/unit/test_flush.py`` checks it stays so), so the deletes' order does not matter: the
keys are checked at the flush's commit, as a TRUNCATE's are at once. A flush that resets
sequences (``reset_sequences``) or must reach tables outside its list (``allow_cascade``)
is left to Django's own statements."""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base, operations


class DatabaseOperations(operations.DatabaseOperations):
    def sql_flush(
        self,
        style: Any,
        tables: list[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if not tables or reset_sequences or allow_cascade:  # Django's own statements
            return list(
                super().sql_flush(
                    style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
                )
            )
        return ["SET CONSTRAINTS ALL DEFERRED"] + [
            f"DELETE FROM {self.quote_name(table)}" for table in tables
        ]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
