"""Schemathesis over the served schema, as CI and the long run use it: every check in every
phase (examples, coverage, fuzzing, stateful) against a running portal, as one user.

The command line runs it (``schemathesis run``) with ``tests/api/schemathesis.toml``; its
JSON report gives the figures."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFIG = Path(__file__).with_name("schemathesis.toml")
PHASES = "examples,coverage,fuzzing,stateful"
NO_UNEXPECTED_METHODS = "\n[phases.coverage]\nunexpected-methods = []\n"
# The coverage phase's valid boundaries alone (its negative cases, three in four of its
# cases, are the long run's: bench/fuzz.py).
VALID_BOUNDARIES = '\n[phases.coverage.generation]\nmode = "positive"\n'
SCHEMA_SECONDS = 300


@dataclass(frozen=True)
class FuzzRun:
    """One run's outcome: its figures, and what it printed (the failures, reproducible)."""

    user: str
    exit_code: int
    operations: int
    cases: int
    failures: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    seconds: float
    output: str

    @property
    def failed(self) -> int:
        return sum(int(f["count"]) for f in self.failures)

    @property
    def links(self) -> str:
        """The stateful phase's links, as schemathesis counts them (covered / selected)."""
        found = re.search(r"API Links:\s+(.+)", self.output)
        return found.group(1).strip() if found else "none"

    def line(self) -> str:
        return (
            f"{self.user}: {self.operations} operations, {self.cases} cases, "
            f"{self.failed} failures, {sum(int(e['count']) for e in self.errors)} errors, "
            f"{self.seconds:.0f} s; links {self.links}"
        )


def served_schema(base_url: str, token: str) -> bytes:
    """The schema as the portal serves it, fetched here rather than by schemathesis, whose
    10-second read timeout the first request (the one that generates the schema) could
    outlast on a loaded machine: the run then failed having tested nothing. As JSON (asked
    for by its media type: the API takes no ``?format=``), which schemathesis reads with a
    JSON parser; the YAML the page serves by default took a YAML parser 0.2 CPU-s more in
    each run."""
    request = urllib.request.Request(
        f"{base_url}/api/schema/",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/vnd.oai.openapi+json"},
    )
    with urllib.request.urlopen(request, timeout=SCHEMA_SECONDS) as response:
        body: bytes = response.read()
    return body


def fuzz(
    base_url: str,
    token: str,
    *,
    user: str,
    max_examples: int,
    seed: int | None = None,
    workers: int = 1,
    phases: str = PHASES,
    operations: tuple[str, ...] = (),
    unexpected_methods: bool = True,
    invalid_boundaries: bool = True,
) -> FuzzRun:
    """Run schemathesis against ``base_url`` with ``token``; never raises on failures.

        ``operations``: schemathesis's filter options (``--include-method GET``), to test a part
        of the operations. ``unexpected_methods``: whether the coverage phase also sends each
    operation the methods its path does not take (a 405 whoever asks: one user's run is enough).
    ``invalid_boundaries``: whether the coverage phase also sends the values just outside
    each boundary the schema states (its negative cases); without, only those on and inside.
    One worker by default: schemathesis's worker threads can crash CPython 3.11's parser
        (``SystemError: AST constructor recursion depth mismatch``, hypothesis describing a
        lambda in two threads at once)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        schema = Path(scratch) / "schema.json"  # as fetched (``served_schema``)
        schema.write_bytes(served_schema(base_url, token))
        config = CONFIG
        extra = "" if unexpected_methods else NO_UNEXPECTED_METHODS
        extra += "" if invalid_boundaries else VALID_BOUNDARIES
        if extra:
            config = Path(scratch) / CONFIG.name
            config.write_text(CONFIG.read_text() + extra)
        command = [
            str(Path(sys.executable).with_name("schemathesis")),
            "--config-file",
            str(config),
            "--no-color",
            "run",
            str(schema),
            "--url",
            base_url,
            "--checks",
            "all",
            "--phases",
            phases,
            "--max-examples",
            str(max_examples),
            "--workers",
            str(workers),
            "--header",
            f"Authorization: Bearer {token}",
            "--report",
            "json",
            "--report-json-path",
            str(report),
            "--generation-database",
            "none",
            *(["--seed", str(seed)] if seed is not None else []),
            *operations,
        ]
        started = time.monotonic()
        done = subprocess.run(command, cwd=scratch, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
        summary = json.loads(report.read_text()) if report.exists() else {}
    operations = summary.get("operations") or {}
    return FuzzRun(
        user=user,
        exit_code=done.returncode,
        operations=int(operations.get("tested", 0)),
        cases=int((summary.get("test_cases") or {}).get("generated", 0)),
        failures=list(summary.get("failures", [])),
        errors=list(summary.get("errors", [])),
        seconds=seconds,
        output=done.stdout + done.stderr,
    )
