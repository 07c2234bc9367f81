"""The suite's flush (tests/postgres): rows deleted, keys checked at its end, so it holds only
while every foreign key is deferrable."""

from __future__ import annotations

import pytest
from django.core.management.color import no_style
from django.db import connection

from tenants.models import Namespace, Team
from tests.factories import NamespaceFactory

pytestmark = pytest.mark.django_db


def test_every_foreign_key_is_deferrable() -> None:
    """A key checked at once would refuse deletes in the wrong order (a TRUNCATE does not
    care): a migration that adds one must say so here."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, conname FROM pg_constraint "
            "WHERE contype = 'f' AND NOT condeferrable"
        )
        assert cursor.fetchall() == []


def test_a_flush_empties_every_table_whatever_points_where() -> None:
    """The parent listed before its children: the deletes' order does not matter."""
    NamespaceFactory(name="team-x-work")
    tables = connection.introspection.django_table_names(only_existing=True)
    parents_first = sorted(tables, key=lambda table: table != Team._meta.db_table)
    statements = connection.ops.sql_flush(no_style(), parents_first)
    assert all(s.startswith(("SET CONSTRAINTS", "DELETE FROM")) for s in statements)
    connection.ops.execute_sql_flush(statements)
    assert not Team.objects.exists() and not Namespace.objects.exists()
