"""The house's rules, checked on the code itself: every import points down the loop's
layers, no module imports itself in a circle, imports sit at the module's top unless a
comment says why one must wait, no function is longer than a screen, and SQL written by hand
sits only behind a selector (or the loop's writer)."""

from __future__ import annotations

import ast
import copy
import functools
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
# The product: every package but the demo cluster (a test double that imports nothing of
# ours; it is checked on its own) and the benchmark scripts.
PRODUCT = [p for p in CONFIG["root_packages"] if p != "devcluster"]
LONGEST = 80  # lines of one function


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*CONFIG["root_packages"], cache_dir=None)


def layers_contract(container: str = "") -> LayersContract:
    """The layers contract of the product's packages, or of one package's (``portal``)."""
    (options,) = [
        c
        for c in CONFIG["contracts"]
        if c["type"] == "layers" and c.get("containers", [""]) == [container]
    ]
    return LayersContract(
        name=options["name"],
        session_options={"root_packages": CONFIG["root_packages"]},
        contract_options={k: v for k, v in options.items() if k not in ("name", "type")},
    )


def test_every_import_points_down_the_layers(graph: grimp.ImportGraph) -> None:
    assert layers_contract().check(graph, verbose=False).kept


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("cluster.models", "tenants.models"),  # observation reading intent
        ("fleet.models", "queues.models"),  # the fleet reading the queues it backs
        ("tenants.services", "loop.tasks"),  # intent calling the loop (it announces instead)
        ("health.models", "changes.models"),  # observed GPU health reading reviewed changes
        ("portal.views", "tenants.selectors"),  # the ground floor reading an app
        ("loop.poll", "changes.models"),  # the loop reading reviewed changes
        ("gpus.catalog", "portal.vocabulary.quantity"),  # pure knowledge importing the portal
    ],
)
def test_an_upward_import_breaks_the_layers(
    graph: grimp.ImportGraph, importer: str, imported: str
) -> None:
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="")
    try:
        assert not layers_contract().check(graph, verbose=False).kept
    finally:
        graph.remove_import(importer=importer, imported=imported)


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("portal.vocabulary.quantity", "portal.infra.round_trips"),  # vocabulary using infra
        ("portal.infra.outbox", "portal.access.permissions"),  # infra asking who may
        ("portal.audit.record", "portal.notifications.send"),  # the audit log notifying
    ],
)
def test_an_upward_import_breaks_the_ground_floors_rooms(
    graph: grimp.ImportGraph, importer: str, imported: str
) -> None:
    contract = layers_contract("portal")
    assert contract.check(copy.deepcopy(graph), verbose=False).kept  # (it drops ignored imports)
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="")
    try:
        assert not contract.check(copy.deepcopy(graph), verbose=False).kept
    finally:
        graph.remove_import(importer=importer, imported=imported)


def test_imports_inside_functions_are_in_the_graph(graph: grimp.ImportGraph) -> None:
    """A lazy import (inside a function) is an import all the same: the layers and the
    circles are checked on a graph that holds every one of them."""
    lazy = []
    for path in product_files():
        parts = path.relative_to(ROOT).with_suffix("").parts
        importer = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if importer not in graph.modules:
            continue  # dev.py, manage.py
        for function in parsed(path)[1]:
            for node in imports_in(function):
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    for alias in node.names:
                        module = f"{node.module}.{alias.name}"
                        lazy.append((importer, module if module in graph.modules else node.module))
    ours = [(a, b) for a, b in lazy if b.split(".")[0] in PRODUCT]
    assert len(ours) > 10  # AppConfig.ready's subscriptions, at least
    assert [(a, b) for a, b in ours if not graph.direct_import_exists(importer=a, imported=b)] == []


def test_no_module_imports_itself_in_a_circle(graph: grimp.ImportGraph) -> None:
    modules = {m for m in graph.modules if m.split(".")[0] in PRODUCT}
    assert _cycles(graph, modules) == []


def test_a_circle_would_be_found(graph: grimp.ImportGraph) -> None:
    """changes.mig queues work through changes.tasks, which runs changes.executor: the
    executor calling back into the services would close a circle."""
    graph.add_import(
        importer="changes.executor", imported="changes.mig", line_number=1, line_contents=""
    )
    try:
        modules = {m for m in graph.modules if m.split(".")[0] in PRODUCT}
        assert ["changes.executor", "changes.mig", "changes.tasks"] in _cycles(graph, modules)
    finally:
        graph.remove_import(importer="changes.executor", imported="changes.mig")


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                imported = graph.find_modules_directly_imported_by(child) & modules
                work.append((child, iter(sorted(imported))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def product_files() -> Iterator[Path]:
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path
    yield ROOT / "dev.py"
    yield ROOT / "manage.py"


def functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


Function = ast.FunctionDef | ast.AsyncFunctionDef


@functools.cache
def parsed(path: Path) -> tuple[str, list[Function]]:
    """A product file's source and its functions (nested ones too): parsed once for the
    module's three tests that read them (each had parsed every file again)."""
    source = path.read_text()
    return source, list(functions(ast.parse(source)))


@functools.cache
def imports_in(function: Function) -> list[ast.Import | ast.ImportFrom]:
    """The imports written inside ``function`` (those of functions nested in it too)."""
    return [n for n in ast.walk(function) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_imports_sit_at_the_top_unless_a_comment_says_why() -> None:
    """An import inside a function hides a dependency (and once hid three import cycles):
    allowed only after a ``# lazy: <why>`` comment in that function."""
    hidden = []
    for path in product_files():
        source, found = parsed(path)
        lines = source.splitlines()
        for function in found:
            for node in imports_in(function):
                before = lines[function.lineno - 1 : node.lineno]
                if not any("# lazy:" in line for line in before):
                    hidden.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert hidden == []


def test_no_function_is_longer_than_a_screen() -> None:
    long = []
    for path in product_files():
        for function in parsed(path)[1]:
            length = (function.end_lineno or function.lineno) - function.lineno + 1
            if length > LONGEST:
                long.append(f"{path.relative_to(ROOT)}:{function.name} ({length} lines)")
    assert long == []


# Where SQL written by hand may sit besides an app's ``selectors.py``, each with why
# (docs/architecture.md, "Hand-written SQL"). Pages and services reach it through these.
SQL_KEPT = {
    "loop/write.py": "the loop's writer: COPY and one upsert per poll",
    "changes/facts.py": "the changes' selector of an assessment's facts (reads only)",
    "usage/reports.py": "the usage app's reports: its selectors, named for what they read",
    "queues/observed.py": "the queues' reads of what the cluster shows of Kueue (the what-if's "
    "and the Queues page's selectors, beneath queues/selectors.py, which imports them)",
    "portal/access/permissions.py": "a request's first question (roles, unread count), which "
    "the permission checks themselves ask: the access selectors import them",
    "portal/infra/round_trips.py": "the machinery that sends the selectors' reads together",
    "portal/infra/readiness.py": "SELECT 1: whether the database answers",
    "portal/infra/locks.py": "advisory locks, not rows",
    "portal/infra/embedded.py": "the embedded server's database made (psql), not rows",
}
_SQL = re.compile(r"""\.cursor\(|\bRawSQL\(|\.raw\(|["']\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\s""")


def sql_by_hand(source: str) -> bool:
    return bool(_SQL.search(source))


def test_hand_written_sql_sits_behind_selectors() -> None:
    """A statement written out (a cursor, RawSQL, ``.raw``, a ``Read`` of SQL text) is in
    an app's ``selectors.py`` or in one of the modules ``SQL_KEPT`` names, so a page or a
    service reaches it through a selector."""
    outside = [
        str(path.relative_to(ROOT))
        for path in product_files()
        if path.name != "selectors.py"
        and str(path.relative_to(ROOT)) not in SQL_KEPT
        and sql_by_hand(path.read_text())
    ]
    assert outside == []
    assert all(sql_by_hand((ROOT / kept).read_text()) for kept in SQL_KEPT)  # none stale


def test_sql_written_in_a_page_would_be_found() -> None:
    assert sql_by_hand('PODS_SQL = f"SELECT * FROM {table} WHERE phase = %s"')
    assert sql_by_hand("with connection.cursor() as cursor:")
    assert sql_by_hand("ObservedPod.objects.raw(sql, params)")
    assert not sql_by_hand('help_text="Select the nodes a pool holds"')
