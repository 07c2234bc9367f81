"""Where a run's CPU goes, test by test: ``python3 dev.py test -p tests.cpu_report``.

The suite's time on two cores is CPU-bound from its first test to its tail, so the wall
durations pytest lists (``--durations``) say more about what ran beside a test than about
the test. This plugin adds, after them, the tests and the folders that cost the most CPU:
the test process's own (its threads too: the live server answering the test's requests) and
its children's (a schemathesis run, a benchmark, a worker), from setup to teardown; and when
each test process ran out of tests (the run's tail, where fewer than all of them work).

What it cannot see: a child counts only once it has ended and been waited for (a browser or
a demo cluster kept for a session counts in the test that ends it), and the servers' own
CPU (PostgreSQL, Redis) not at all. Across test processes (pytest-xdist) each test's figures
travel with its report."""

from __future__ import annotations

import resource
import time
from collections import defaultdict
from typing import Any

import pytest

STARTED = pytest.StashKey[tuple[float, float]]()
PROPERTY = "cpu_s"  # (own, children) on each test's teardown report
SHOWN = 25


def cpu_now() -> tuple[float, float]:
    """This process's CPU seconds, and its ended children's."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    item.stash[STARTED] = cpu_now()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown" and STARTED in item.stash:
        (own_before, children_before), (own, children) = item.stash[STARTED], cpu_now()
        report.user_properties.append((PROPERTY, (own - own_before, children - children_before)))


class Tally:
    """The figures of every test, gathered where the reports arrive."""

    def __init__(self) -> None:
        self.tests: dict[str, tuple[float, float]] = {}
        self.started = time.monotonic()
        self.done: dict[str, float] = {}  # each test process, when it ran out of tests

    @pytest.hookimpl
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started = time.monotonic()  # as pytest's "passed in" counts

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist: a test process ended (it had no more tests to take)."""
        self.done[str(getattr(node, "gateway", node).id)] = time.monotonic() - self.started

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == PROPERTY:
                own, children = value
                self.tests[report.nodeid] = (float(own), float(children))

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.tests:
            return
        write = terminalreporter.write_line
        terminalreporter.section(f"most CPU, {SHOWN} tests: in all, own, ended children's")
        ranked = sorted(self.tests.items(), key=lambda kv: -sum(kv[1]))
        for nodeid, (own, children) in ranked[:SHOWN]:
            write(f"{own + children:7.2f}s {own:7.2f}s {children:7.2f}s  {nodeid}")
        folders: defaultdict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for nodeid, (own, children) in self.tests.items():
            folder = "/".join(nodeid.split("::")[0].split("/")[:-1]) or "."
            folders[folder][0] += own
            folders[folder][1] += children
            folders[folder][2] += 1
        terminalreporter.section("CPU by folder: in all, own, ended children's")
        for folder, (own, children, count) in sorted(folders.items(), key=lambda f: -sum(f[1][:2])):
            write(f"{own + children:7.1f}s {own:7.1f}s {children:7.1f}s  {folder} ({count} tests)")
        own = sum(o for o, _ in self.tests.values())
        children = sum(c for _, c in self.tests.values())
        write(f"{own + children:7.1f}s {own:7.1f}s {children:7.1f}s  all {len(self.tests)} tests")
        if len(self.done) > 1:
            ends = sorted(self.done.values())
            write(
                "test processes done at "
                + ", ".join(f"{end:.1f}" for end in ends)
                + f" s: the last {ends[-1] - ends[0]:.1f} s with fewer than {len(ends)} at work"
            )


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the process the reports arrive at
        config.pluginmanager.register(Tally(), "cpu_report_tally")
