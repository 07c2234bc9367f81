"""Several reads in one round trip to PostgreSQL: a page that needs five small answers waits
for the database once, not five times (each wait is a trip through the server's and the
client's scheduler, which under load costs more than the query itself).

Each read is a ``Read``: its SQL (``%s`` placeholders) and parameters, and the model its rows
are, if any. Rows of a model come back as its instances, built as a raw queryset builds them
(columns matched by name, each field's conversion from the database applied); rows of no
model come back as tuples."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Model
from django.db.models.base import DEFERRED

# (cluster id, name) pairs as a relation: ``(cluster_id, namespace) IN {PAIRS}``, its two
# parameters from ``pairs_params``. Each name on its own cluster: another cluster may have a
# namespace or a queue of the same name, and another team's.
PAIRS = "(SELECT * FROM unnest(%s::bigint[], %s::text[]))"


def pairs_params(pairs: Sequence[tuple[int | None, str]]) -> list[list[Any]]:
    """The two array parameters of ``PAIRS``: the cluster ids, the names."""
    return [[pk for pk, _ in pairs], [name for _, name in pairs]]


@dataclass(frozen=True)
class Read:
    sql: str
    params: Sequence[Any] = ()
    model: type[Model] | None = None


def read_together(*reads: Read) -> list[list[Any]]:
    """Each read's rows, in order, from one statement sent once."""
    if not reads:
        return []
    for read in reads:
        if ";" in read.sql:
            raise ValueError("one statement per read")
    answers: list[list[Any]] = []
    with connection.cursor() as cursor:
        cursor.execute(
            ";\n".join(read.sql for read in reads),
            [param for read in reads for param in read.params],
        )
        for index, read in enumerate(reads):
            if index and not cursor.nextset():
                raise RuntimeError(f"read {index} of {len(reads)} has no answer")
            rows = cursor.fetchall()
            if read.model is not None:
                rows = _instances(read.model, [column.name for column in cursor.description], rows)
            answers.append(rows)
    return answers


def _instances(model: type[Model], columns: list[str], rows: list[tuple[Any, ...]]) -> list[Any]:
    """The rows as instances of ``model`` (a column it has no field for is left out; a field
    no column gives is deferred)."""
    if not rows:
        return []
    position = {name: index for index, name in enumerate(columns)}
    fields = model._meta.concrete_fields
    at = [position.get(str(field.column)) for field in fields]
    convert = [
        (index, field.from_db_value)
        for index, field in enumerate(fields)
        if at[index] is not None and hasattr(field, "from_db_value")
    ]
    names = [field.attname for field in fields]
    alias = connection.alias
    out = []
    for row in rows:
        values = [DEFERRED if index is None else row[index] for index in at]
        for index, from_db in convert:
            values[index] = from_db(values[index], None, connection)
        out.append(model.from_db(alias, names, values))
    return out
