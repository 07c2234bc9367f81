"""The Grafana dashboards under deploy/grafana draw only series the portal exports: every
PromQL expression (panels' targets, variables' queries) is read for the metric names it
uses and the labels it groups or matches by, and each is checked against a real scrape of
/metrics on the demo scenario (applied to the demo cluster and polled once)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from health.services import collect_gpu_health

DASHBOARDS = Path(__file__).resolve().parents[2] / "deploy" / "grafana"

# Series name -> the labels its samples carry (histograms as _bucket, _sum and _count).
Exported = dict[str, set[str]]

TOKEN = re.compile(
    r"""\s+
    |(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    |(?P<range>\[[^\]]*\])
    |(?P<variable>\$\{[^}]*\}|\$\w+)
    |(?P<number>\d[\w.]*)
    |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    |(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){},])
    """,
    re.VERBOSE,
)
AGGREGATIONS = {
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
    "count_values", "group", "limitk", "limit_ratio",
}  # fmt: skip
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = (
    AGGREGATIONS | GROUPING | {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}
)
MATCH = {"=", "!=", "=~", "!~"}


def tokens(expr: str) -> list[tuple[str, str]]:
    out, at = [], 0
    while at < len(expr):
        found = TOKEN.match(expr, at)
        if not found:
            raise ValueError(f"cannot read {expr[at:]!r} in {expr!r}")
        at = found.end()
        if found.lastgroup:
            out.append((found.lastgroup, found.group(found.lastgroup)))
    return out


def closing(toks: list[tuple[str, str]], start: int) -> int:
    """The index of the bracket that closes the one at ``start``."""
    pair = {"(": ")", "{": "}"}[toks[start][1]]
    depth = 0
    for i in range(start, len(toks)):
        if toks[i][1] == toks[start][1]:
            depth += 1
        elif toks[i][1] == pair:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced brackets")


def opening(toks: list[tuple[str, str]], end: int) -> int:
    """The index of the "(" that the ")" at ``end`` closes."""
    depth = 0
    for i in range(end, -1, -1):
        if toks[i][1] == ")":
            depth += 1
        elif toks[i][1] == "(":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced brackets")


def problems(expr: str, exported: Exported) -> list[str]:
    """What in ``expr`` the portal does not export: unknown series, and labels matched on
    or grouped by that the series do not carry."""
    toks = tokens(expr)
    found: list[str] = []
    metrics: dict[int, str] = {}  # token index -> series name
    skip: set[int] = set()  # label names inside {} and grouping clauses
    for i, (kind, text) in enumerate(toks):
        if kind == "op" and text == "{":
            end = closing(toks, i)
            owner = metrics.get(i - 1)
            for j in range(i + 1, end):
                if toks[j][0] == "ident" and j + 1 < end and toks[j + 1][1] in MATCH:
                    skip.add(j)
                    if owner is None:
                        found.append(f"matcher {toks[j][1]} names no series in {expr!r}")
                    elif owner in exported and toks[j][1] not in exported[owner] | {"__name__"}:
                        found.append(f"{owner} has no label {toks[j][1]!r}")
        if kind != "ident" or i in skip:
            continue
        following = toks[i + 1][1] if i + 1 < len(toks) else ""
        if text in GROUPING and following == "(":
            end = closing(toks, i + 1)
            labels = [toks[j][1] for j in range(i + 2, end) if toks[j][0] == "ident"]
            skip.update(range(i + 2, end))
            if text in ("by", "without"):
                if end + 1 < len(toks) and toks[end + 1][1] == "(":  # sum by (x) (expr)
                    span = range(end + 1, closing(toks, end + 1))
                else:  # sum (expr) by (x)
                    span = range(opening(toks, i - 1), i)
                grouped = [j for j in span if toks[j][0] == "ident"]
                found.extend(_grouping(toks, labels, grouped, exported))
            else:
                names = {t for k, t in toks if k == "ident"} & set(exported)
                for label in labels:
                    if not any(label in exported[n] for n in names):
                        found.append(f"no series of {expr!r} has the label {label!r}")
            continue
        if following == "(" or text in KEYWORDS:
            continue
        metrics[i] = text
        if text not in exported:
            found.append(f"{text} is not a series the portal exports")
    return found


def _grouping(
    toks: list[tuple[str, str]], labels: list[str], grouped: list[int], exported: Exported
) -> list[str]:
    """Each label of a ``by``/``without`` clause is on every series it aggregates."""
    names = [
        toks[j][1]
        for j in grouped
        if toks[j][1] not in KEYWORDS
        and (j + 1 >= len(toks) or toks[j + 1][1] != "(")
        and not _inside_braces(toks, j)
    ]
    return [
        f"{name} has no label {label!r} to group by"
        for name in names
        if name in exported
        for label in labels
        if label not in exported[name]
    ]


def _inside_braces(toks: list[tuple[str, str]], at: int) -> bool:
    depth = 0
    for i in range(at):
        depth += {"{": 1, "}": -1}.get(toks[i][1], 0)
    return depth > 0


LABEL_VALUES = re.compile(r"^\s*label_values\((?:(?P<expr>.*),)?\s*(?P<label>\w+)\s*\)\s*$")


def query_problems(query: str, exported: Exported) -> list[str]:
    """A variable's query: ``label_values(expr, label)`` (or any PromQL expression)."""
    shape = LABEL_VALUES.match(query)
    if not shape:
        return problems(query, exported)
    label, expr = shape["label"], shape["expr"]
    if expr is None:
        ok = any(label in labels for labels in exported.values())
        return [] if ok else [f"no series has the label {label!r}"]
    found = problems(expr, exported)
    names = {t for k, t in tokens(expr) if k == "ident"} & set(exported)
    found += [f"{n} has no label {label!r}" for n in names if label not in exported[n]]
    return found


def expressions(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target (rows' panels too) and every query variable."""
    out = []
    panels = list(board.get("panels", []))
    while panels:
        panel = panels.pop()
        panels.extend(panel.get("panels", []))
        for target in panel.get("targets", []):
            if target.get("expr"):
                out.append((f"panel {panel.get('title')!r}", target["expr"]))
    for variable in board["templating"]["list"]:
        if variable.get("type") == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            out.append((f"variable {variable['name']!r}", text))
    return out


def dashboard_problems(path: Path, exported: Exported) -> list[str]:
    board = json.loads(path.read_text())
    found = []
    names = {v["name"]: v for v in board["templating"]["list"]}
    if names.get("datasource", {}).get("type") != "datasource":
        found.append(f"{path.name}: no datasource variable")
    for where, expr in expressions(board):
        check = query_problems if where.startswith("variable") else problems
        found += [f"{path.name}, {where}: {p}" for p in check(expr, exported)]
        if "cluster" in names and where.startswith("panel"):
            for kind, text in tokens(expr):
                carries = kind == "ident" and "cluster" in exported.get(text, set())
                if carries and 'cluster=~"$cluster"' not in expr:
                    found.append(f"{path.name}, {where}: {text} not filtered by $cluster")
    return found


def scrape_names(text: str) -> Exported:
    exported: Exported = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            exported.setdefault(sample.name, set()).update(sample.labels)
    return exported


@pytest.fixture
def exported(client: Client, portal_cluster: Any, settings: Any) -> Exported:
    """Every series /metrics reports on the demo, GPU health collected."""
    settings.QM_METRICS_PUBLIC = True
    settings.QM_DCGM_SOURCE = "proxy"
    collect_gpu_health(portal_cluster)
    client.get("/healthz")  # a request, so the request histogram has series too
    response = client.get("/metrics")
    assert response.status_code == 200
    return scrape_names(response.content.decode())


def test_every_dashboard_draws_series_the_portal_exports(exported: Exported) -> None:
    boards = sorted(DASHBOARDS.glob("*.json"))
    assert len(boards) >= 5
    assert "quartermaster_workload_wait_seconds_bucket" in exported  # histograms' suffixes
    found = []
    uids = set()
    for path in boards:
        board = json.loads(path.read_text())
        assert board["schemaVersion"] >= 39, path.name
        assert board["uid"] not in uids, path.name
        uids.add(board["uid"])
        assert expressions(board), path.name
        found += dashboard_problems(path, exported)
    assert found == []


def test_a_dashboard_naming_a_series_or_label_the_portal_lacks_is_caught(tmp_path: Path) -> None:
    exported: Exported = {
        "quartermaster_gpu_allocatable": {"cluster", "pool", "resource"},
        "quartermaster_workload_wait_seconds_bucket": {"cluster", "cluster_queue", "le"},
    }
    fine = 'histogram_quantile(0.9, sum by (le) (quartermaster_workload_wait_seconds_bucket{cluster=~"$cluster"}[5m]))'
    assert problems(fine, exported) == []
    made_up = 'sum by (pool) (quartermaster_gpu_free{cluster=~"$cluster"})'
    assert problems(made_up, exported) == [
        "quartermaster_gpu_free is not a series the portal exports"
    ]
    assert problems(
        'sum by (pod) (quartermaster_gpu_allocatable{cluster=~"$cluster"})', exported
    ) == ["quartermaster_gpu_allocatable has no label 'pod' to group by"]
    assert problems('sum(quartermaster_gpu_allocatable{team="a"}) by (pool)', exported) == [
        "quartermaster_gpu_allocatable has no label 'team'"
    ]
    assert query_problems("label_values(quartermaster_gpu_allocatable, flavor)", exported) == [
        "quartermaster_gpu_allocatable has no label 'flavor'"
    ]
    board = json.loads((DASHBOARDS / "fleet-capacity.json").read_text())
    board["panels"][-1]["targets"][0]["expr"] = made_up
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(board))
    assert any("quartermaster_gpu_free" in p for p in dashboard_problems(path, exported))
