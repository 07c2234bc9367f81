"""The house's rules, checked on the code itself: every import points down the loop's
layers, no module imports itself in a circle, imports sit at the module's top unless a
comment says why one must wait, and no function is longer than a screen."""

from __future__ import annotations

import ast
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


def layers_contract() -> LayersContract:
    (options,) = [c for c in CONFIG["contracts"] if c["type"] == "layers"]
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
        ("tenants.models", "cluster.models"),  # desired state reading the loop
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


def test_imports_sit_at_the_top_unless_a_comment_says_why() -> None:
    """An import inside a function hides a dependency (and once hid three import cycles):
    allowed only after a ``# lazy: <why>`` comment in that function."""
    hidden = []
    for path in product_files():
        source = path.read_text()
        lines = source.splitlines()
        for function in functions(ast.parse(source)):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    before = lines[function.lineno - 1 : node.lineno]
                    if not any("# lazy:" in line for line in before):
                        hidden.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert hidden == []


def test_no_function_is_longer_than_a_screen() -> None:
    long = []
    for path in product_files():
        for function in functions(ast.parse(path.read_text())):
            length = (function.end_lineno or function.lineno) - function.lineno + 1
            if length > LONGEST:
                long.append(f"{path.relative_to(ROOT)}:{function.name} ({length} lines)")
    assert long == []
