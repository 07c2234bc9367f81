"""``-p tests.cpu_report`` lists the tests that cost the most CPU, their own and their ended
children's, across pytest-xdist's test processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT

TESTS = """
import subprocess, sys, time

def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass

def test_burns_its_own():
    burn(0.3)

def test_burns_in_a_child():
    subprocess.run([sys.executable, "-c", "import time\\nt = time.process_time()\\n"
                    "while time.process_time() - t < 0.3: pass"], check=True)

def test_idle():
    time.sleep(0.05)
"""


def test_each_tests_own_and_childrens_cpu_is_listed_across_test_processes(tmp_path: Path) -> None:
    (tmp_path / "test_burn.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the project's settings
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(ROOT)
    # Only the plugins this needs: each of the three processes would import every installed
    # one (hypothesis, schemathesis, playwright...), seconds of CPU for nothing here.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    plugins = ["-p", "xdist.plugin", "-p", "tests.cpu_report", "-p", "no:cacheprovider"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-n", "2", "-q", "-c", "pytest.ini", "."],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    figures = {
        name: (float(total), float(own), float(children))
        for total, own, children, name in re.findall(
            r"^\s*([\d.]+)s\s+([\d.]+)s\s+([\d.]+)s\s+\S+::(test_\w+)$", run.stdout, re.M
        )
    }
    assert set(figures) == {"test_burns_its_own", "test_burns_in_a_child", "test_idle"}, run.stdout
    assert figures["test_burns_its_own"][1] >= 0.3
    assert figures["test_burns_in_a_child"][2] >= 0.3
    assert max(figures["test_idle"]) < 0.3
    assert list(figures)[-1] == "test_idle"  # listed most first
    assert re.search(r"^\s*[\d.]+s .* all 3 tests$", run.stdout, re.M), run.stdout
    assert re.search(r"^test processes done at [\d.]+, [\d.]+ s: the last ", run.stdout, re.M)
