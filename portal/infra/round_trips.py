"""Several reads in one round trip to PostgreSQL: a page that needs five small answers waits
for the database once, not five times (each wait is a trip through the server's and the
client's scheduler, which under load costs more than the query itself).

Each read is a ``Read``: its SQL (``%s`` placeholders) and parameters, and the model its rows
are, if any. Rows of a model come back as its instances, built as a raw queryset builds them
(columns matched by name, each field's conversion from the database applied); rows of no
model come back as tuples."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import psycopg
from django.core.exceptions import EmptyResultSet
from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Model, QuerySet
from django.db.models.base import DEFERRED, ModelState
from django.db.models.signals import post_init, pre_init

if TYPE_CHECKING:
    from portal.infra.process_cache import ProcessCache

# (cluster id, name) pairs as a relation: ``(cluster_id, namespace) IN {PAIRS}``, its two
# parameters from ``pairs_params``. Each name on its own cluster: another cluster may have a
# namespace or a queue of the same name, and another team's.
PAIRS = "(SELECT * FROM unnest(%s::bigint[], %s::text[]))"


def pairs_params(pairs: Sequence[tuple[int | None, str]]) -> list[list[Any]]:
    """The two array parameters of ``PAIRS``: the cluster ids, the names."""
    return [[pk for pk, _ in pairs], [name for _, name in pairs]]


@dataclass(frozen=True)
class Read:
    """``prepared``: whether it may be prepared once sent a few times (below). False for a
    read whose best plan depends on its parameters' values: after five runs of a prepared
    statement PostgreSQL may keep one generic plan, made without knowing them, and for
    some reads that plan is much worse (a sequential scan of a large table where the
    values would have used an index): such a read is planned anew each time."""

    sql: str
    params: Sequence[Any] = ()
    model: type[Model] | None = None
    prepared: bool = True


def read_together(*reads: Read) -> list[list[Any]]:
    """Each read's rows, in order, from one round trip.

    With prepared statements on (``DATABASE_PREPARED_STATEMENTS``), the reads go as one
    pipeline of statements, each prepared once it has been sent a few times: PostgreSQL then
    skips planning it, about half of what these reads cost it. Otherwise (and inside a
    transaction) they go as one multi-statement text. Either way they are logged and wrapped
    as one query."""
    if not reads:
        return []
    for read in reads:
        if ";" in read.sql:
            raise ValueError("one statement per read")
    sql = ";\n".join(read.sql for read in reads)
    params = [param for read in reads for param in read.params]
    connection.close_if_health_check_failed()  # as Django's cursor() does first
    connection.ensure_connection()
    raw = connection.connection
    sender = (
        _Pipelined(raw, reads)
        if raw.prepare_threshold is not None
        and connection.get_autocommit()  # a failed read could not be sent again in a transaction
        and psycopg.Pipeline.is_supported()
        else _Joined(raw, reads)
    )
    # As Django wraps a cursor of its own: logged, execute wrappers run, errors translated.
    connection.validate_thread_sharing()
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    with wrap(sender) as cursor:  # type: ignore[arg-type]
        cursor.execute(sql, params)
    return sender.answers


class _Sender:
    """A cursor as ``CursorWrapper`` drives one: ``execute`` sends the reads and keeps each
    one's rows in ``answers``."""

    def __init__(self, raw: psycopg.Connection[Any], reads: Sequence[Read]) -> None:
        self.raw = raw
        self.reads = reads
        self.answers: list[list[Any]] = []
        self.sql: str = ""
        self.params: Sequence[Any] = ()

    def execute(self, sql: str, params: Sequence[Any]) -> None:
        self.sql, self.params = sql, params  # for ``_query``
        self.send()

    def send(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    @property
    def _query(self) -> Any:
        """What was sent, as text, for Django's query log (read only when queries are logged,
        as psycopg's cursors have it)."""
        with psycopg.ClientCursor(self.raw) as cursor:
            return SimpleNamespace(query=cursor.mogrify(self.sql, self.params).encode())

    def _keep(self, read: Read, cursor: psycopg.Cursor[Any]) -> None:
        rows = cursor.fetchall()
        if read.model is not None and (result := cursor.pgresult) is not None:
            # The names straight from the result: ``description`` builds a column object
            # each, with its type looked up, which costs more than the rows.
            names = [(result.fname(index) or b"").decode() for index in range(result.nfields)]
            rows = _instances(read.model, names, rows)
        self.answers.append(rows)


class _Joined(_Sender):
    def send(self) -> None:
        with psycopg.ClientCursor(self.raw) as cursor:
            cursor.execute(self.sql, self.params)
            for index, read in enumerate(self.reads):
                if index and not cursor.nextset():
                    raise RuntimeError(f"read {index} of {len(self.reads)} has no answer")
                self._keep(read, cursor)


class _Pipelined(_Sender):
    def send(self) -> None:
        try:
            self._send()
        except psycopg.errors.FeatureNotSupported as error:
            # "cached plan must not change result type": a table a prepared read selects *
            # from has new columns (a migration ran under this process). Forget every
            # prepared statement and send the reads again.
            if "cached plan" not in str(error):
                raise
            with psycopg.Cursor(self.raw) as cursor:
                cursor.execute("DEALLOCATE ALL")  # psycopg forgets its own list on seeing it
            self.answers = []
            self._send()

    def _send(self) -> None:
        cursors = []
        try:
            with self.raw.pipeline():
                for read in self.reads:
                    cursor = psycopg.Cursor(self.raw)
                    cursors.append(cursor)
                    cursor.execute(read.sql, read.params, prepare=None if read.prepared else False)
            for read, cursor in zip(self.reads, cursors, strict=True):
                self._keep(read, cursor)
        finally:
            for cursor in cursors:
                cursor.close()


def _instances(model: type[Model], columns: list[str], rows: list[tuple[Any, ...]]) -> list[Any]:
    """The rows as instances of ``model`` (a column it has no field for is set on each as an
    attribute, as a raw queryset sets an annotation; a field no column gives is deferred)."""
    if not rows:
        return []
    position = {name: index for index, name in enumerate(columns)}
    if len(position) < len(columns):  # a join's columns (``select_related``): not one model's
        raise ValueError(f"columns of the same name in a read of {model.__name__}: {columns}")
    fields = model._meta.concrete_fields
    at = [position.get(str(field.column)) for field in fields]
    known = {str(field.column) for field in fields}
    extra = [(index, name) for index, name in enumerate(columns) if name not in known]
    convert = [
        (index, field.from_db_value)
        for index, field in enumerate(fields)
        if at[index] is not None and hasattr(field, "from_db_value")
    ]
    names = [field.attname for field in fields]
    alias = connection.alias
    build = _builder(model, alias, names)
    out = []
    for row in rows:
        values = [DEFERRED if index is None else row[index] for index in at]
        for index, from_db in convert:
            values[index] = from_db(values[index], None, connection)
        instance = build(values)
        for index, name in extra:
            setattr(instance, name, row[index])
        out.append(instance)
    return out


def _builder(model: type[Model], alias: str, names: list[str]) -> Callable[[list[Any]], Any]:
    """How an instance of ``model`` is made from its fields' values (``DEFERRED`` for one not
    read), as ``model.from_db`` makes it: its fields' attributes and a state of a row of
    database ``alias``. Without Django's ``Model.__init__`` where nothing would tell them
    apart (about a third of a page's reading of a few hundred rows): the model keeps
    Django's ``__init__`` and ``from_db``, and nothing listens to its ``pre_init`` or
    ``post_init``. A fresh instance has no related object cached, so a foreign key's id is
    set as ``__init__``'s ``setattr`` would set it. Anything else goes through
    ``from_db``."""
    if (
        model.__init__ is not Model.__init__
        or model.from_db.__func__ is not Model.from_db.__func__  # type: ignore[attr-defined]
        or pre_init.has_listeners(model)
        or post_init.has_listeners(model)
    ):
        return lambda values: model.from_db(alias, names, values)
    new = model.__new__

    def build(values: list[Any]) -> Any:
        instance = new(model)
        state = ModelState()
        state.adding, state.db = False, alias
        attributes = instance.__dict__
        attributes["_state"] = state
        for name, value in zip(names, values, strict=True):
            if value is not DEFERRED:
                attributes[name] = value
        return instance

    return build


def queryset_read(queryset: QuerySet[Any]) -> Read:
    """A queryset's rows as a read: its model's instances, its annotations set on each (not
    for a queryset that selects related objects: only its own model's rows are built)."""
    if queryset.query.select_related:
        raise ValueError("a read builds its model's rows only: no select_related")
    sql, params = queryset.query.sql_with_params()
    return Read(sql, params, queryset.model)


def page_together(
    queryset: QuerySet[Any],
    per_page: int,
    number: Any,
    *,
    rows: Callable[[QuerySet[Any]], QuerySet[Any]] | None = None,
) -> Page[Any]:
    """``Paginator(queryset, per_page).get_page(number)``, its count and its rows read in one
    round trip (a number out of range falls back as ``get_page`` does, reading that page
    after the count). ``rows``: what is read for the page's slice, when the page's own rows
    carry what is costly to compute (a subquery per row: in the sliced statement it would be
    computed for every row an offset skips too), e.g. the rows whose ``pk__in`` the slice."""
    paginator: Paginator[Any] = Paginator(queryset, per_page)
    read_of = rows or (lambda sliced: sliced)
    try:
        wanted = max(1, int(number))
    except (TypeError, ValueError):
        wanted = 1
    bottom = (wanted - 1) * per_page
    try:
        count_sql, count_params = queryset.order_by().values("pk").query.sql_with_params()
        page = queryset_read(read_of(queryset[bottom : bottom + per_page]))
    except EmptyResultSet:  # ``none()``: nothing to read
        return paginator.get_page(number)
    [(total,)], found = read_together(
        Read(f"SELECT count(*) FROM ({count_sql}) AS found", count_params), page
    )
    paginator.__dict__["count"] = total  # what ``Paginator.count`` would have read
    shown = paginator.get_page(number)
    if shown.number == wanted and not paginator.orphans:
        shown.object_list = found
    else:
        shown.object_list = read_of(shown.object_list)  # type: ignore[arg-type]
    return shown


def read_kept(
    cache: ProcessCache[tuple[Any, ...], tuple[Any, ...]],
    under: tuple[Any, ...],
    reads: Sequence[Read],
    keep: Sequence[bool],
) -> list[list[Any]]:
    """Each read's rows, as :func:`read_together` gives them, those of the reads marked in
    ``keep`` kept in ``cache`` under ``under`` (a version of everything they read, which
    the page read in its first round trip: ``portal.infra.process_cache``'s convention),
    their SQL and their parameters: only the reads not kept go to the database, in one
    round trip. A kept read returns plain rows (no model instances, which a request may
    change)."""
    keys: list[tuple[Any, ...] | None] = []
    for read, kept in zip(reads, keep, strict=True):
        if kept and read.model is not None:
            raise ValueError("a kept read returns plain rows, not model instances")
        keys.append((under, read.sql, repr(read.params)) if kept else None)
    found = cache.found(key for key in keys if key is not None)
    fresh = iter(read_together(*(r for r, k in zip(reads, keys, strict=True) if k not in found)))
    rows = [list(found[key]) if key in found else next(fresh) for key in keys]
    cache.keep(
        {
            k: tuple(row)
            for k, row in zip(keys, rows, strict=True)
            if k is not None and k not in found
        }
    )
    return rows
