"""A child the tests start with ``tests.support.die_with_the_tests`` ends when the test
process that started it is killed: a stopped run leaves no Celery worker behind to take the
next run's tasks from the shared broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import alive

ROOT = Path(__file__).resolve().parents[2]
# A stand-in for a test process: it starts a long child in its own session, as the tests
# start a worker, says its pid, then waits to be killed.
PARENT = """
import subprocess, sys, time
import django
django.setup()
from tests.support import die_with_the_tests
child = subprocess.Popen(
    ["sleep", "60"], start_new_session=True, preexec_fn=die_with_the_tests
)
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="prctl(2) is Linux's")
def test_a_child_of_a_killed_test_process_ends_with_it() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test"},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the child outlived the test process that started it"
