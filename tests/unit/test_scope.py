"""The cluster scope, checked on the code itself: outside the loop, every read of an observed
model says its cluster (``.on(cluster)``) or that it spans every one
(``.on_every_cluster()``), and a hand-written read of one names ``cluster_id``.

Checked on the source (AST), not at run time: a guard on the queryset would see only the
paths the tests happen to run, would have to tell ``.filter(cluster=…)`` from
``.filter(cluster__name=…)`` and a related manager from a bare one, and would need an
opt-out for the loop and the admin; the source says on every line which one it meant. What
the check cannot see is a manager kept in a variable, and SQL in a ``portal.infra.round_trips.Read``:
those are the selectors' own (each takes its cluster id as a parameter).
"""

from __future__ import annotations

import ast

import pytest

from cluster.models import ObservedNode
from cluster.scope import ScopedManager
from tests.unit.test_architecture import ROOT, product_files

# The loop writes and compares the observed rows of the cluster it polls; the admin lists
# every cluster's. Everything else reads through ``.on`` / ``.on_every_cluster``.
LOOP = {
    "loop/apply.py",
    "loop/poll.py",
    "loop/write.py",
    "loop/drift.py",
    "cluster/removal.py",
}
SCOPED = {"on", "on_every_cluster", "none"}  # ``none()`` reads nothing at all


def observed_models() -> set[str]:
    """The models of ``cluster/models.py`` that belong to a cluster (a ``cluster_key``)."""
    tree = ast.parse((ROOT / "cluster" / "models.py").read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(
            isinstance(item, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "cluster" for t in item.targets)
            for item in node.body
        )
    }


def _sql_text(node: ast.expr, known: dict[str, str]) -> str:
    """The constant parts of a string, an f-string or a concatenation, a module constant's
    by its name (what can be known of a query's text without running it)."""
    parts = []
    for part in ast.walk(node):
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            parts.append(part.value)
        elif isinstance(part, ast.Name):
            parts.append(known.get(part.id, ""))
    return " ".join(parts)


def unscoped_reads(source: str, models: set[str]) -> list[int]:
    """The lines of ``source`` reading one of ``models`` without saying its cluster."""
    tree = ast.parse(source)
    known: dict[str, str] = {}
    for node in tree.body:  # module constants holding SQL, for ``raw(NAME, …)``
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                known[target.id] = _sql_text(node.value, known)
    lines = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr in ("objects", "_default_manager")
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id in models
        ):
            continue
        if node.attr in SCOPED:
            continue
        if node.attr == "raw" and _raw_names_its_cluster(tree, node, known):
            continue
        lines.append(node.lineno)
    return lines


def _raw_names_its_cluster(tree: ast.AST, attribute: ast.Attribute, known: dict[str, str]) -> bool:
    """Whether the ``raw(sql, …)`` call of ``attribute`` has SQL that names ``cluster_id``."""
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and call.func is attribute and call.args:
            return "cluster_id" in _sql_text(call.args[0], known)
    return False


def test_every_read_of_an_observed_model_says_its_cluster() -> None:
    models = observed_models()
    assert {"ObservedNode", "ObservedPod", "ObservedWorkload", "Drift"} <= models
    found = []
    for path in product_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative in LOOP or path.name == "admin.py":
            continue
        found += [f"{relative}:{line}" for line in unscoped_reads(path.read_text(), models)]
    assert found == []


def test_an_unscoped_read_is_found() -> None:
    source = (
        "from cluster.models import ObservedNode, ObservedWorkload\n"
        "SQL = 'SELECT * FROM fleet_observedworkload WHERE namespace = %s'\n"
        "def nodes(cluster):\n"
        "    here = ObservedNode.objects.on(cluster).filter(name='a')\n"
        "    every = ObservedNode.objects.on_every_cluster().count()\n"
        "    scoped = ObservedWorkload.objects.raw(SQL + ' AND cluster_id = %s', [1, 2])\n"
        "    forgot = ObservedNode.objects.filter(name='a')\n"
        "    raw = ObservedWorkload.objects.raw(SQL, ['team-a'])\n"
        "    return here, every, scoped, forgot, raw\n"
    )
    assert unscoped_reads(source, {"ObservedNode", "ObservedWorkload"}) == [7, 8]


def test_the_scope_refuses_none() -> None:
    """``None`` is no cluster: it is refused, not read as one or as all of them."""
    assert isinstance(ObservedNode.objects, ScopedManager)
    with pytest.raises(TypeError, match="no cluster given"):
        ObservedNode.objects.on(None)


# Intent rows are named per cluster (a ClusterQueue, a namespace, a pool of the same name may
# be on two clusters): a read by name says its cluster in the same call, or spans them out
# loud (``.on_every_cluster()``, ``.on(cluster)``, which this check does not look inside).
NAMED_PER_CLUSTER = {"Namespace", "ClusterQueue", "Cohort", "ResourceFlavor", "NodePool"}


def reads_by_name_without_cluster(source: str, models: set[str]) -> list[int]:
    """The lines of ``source`` calling ``<Model>.objects.<method>(name=…)`` (or ``name__in``)
    of one of ``models`` without a ``cluster…`` keyword beside it."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        manager = node.func.value
        if not (
            isinstance(manager, ast.Attribute)
            and manager.attr == "objects"
            and isinstance(manager.value, ast.Name)
            and manager.value.id in models
        ):
            continue
        keywords = {k.arg for k in node.keywords if k.arg}
        if keywords & {"name", "name__in"} and not any(k.startswith("cluster") for k in keywords):
            lines.append(node.lineno)
    return lines


def test_every_read_of_an_intent_row_by_name_says_its_cluster() -> None:
    found = []
    for path in product_files():
        relative = path.relative_to(ROOT).as_posix()
        found += [
            f"{relative}:{line}"
            for line in reads_by_name_without_cluster(path.read_text(), NAMED_PER_CLUSTER)
        ]
    assert found == []


def test_a_read_by_name_without_its_cluster_is_found() -> None:
    source = (
        "from queues.models import ClusterQueue\n"
        "def queue(cluster, name):\n"
        "    here = ClusterQueue.objects.on(cluster).filter(name=name)\n"
        "    said = ClusterQueue.objects.filter(cluster=cluster, name=name)\n"
        "    every = ClusterQueue.objects.on_every_cluster().filter(name=name)\n"
        "    forgot = ClusterQueue.objects.filter(name=name)\n"
        "    also = ClusterQueue.objects.get(name__in=[name])\n"
        "    return here, said, every, forgot, also\n"
    )
    assert reads_by_name_without_cluster(source, {"ClusterQueue"}) == [6, 7]
