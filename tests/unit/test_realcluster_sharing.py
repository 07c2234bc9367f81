"""The real cluster's sharing between the test processes of one run (``tests/realcluster/kit.py``
``running``), with a kit whose scripts only write down that they ran: the first process
starts it, another joins it, the starter leaving first waits for the other before stopping
it, and a process that comes while it is being stopped starts it again after (the tier
leaves the cluster when its tests are done, not when the run ends)."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster import kit

SCRIPT = '#!/bin/sh\necho {name} >> "$QM_RC_ROOT/calls"\n'


@pytest.fixture
def fake_kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    folder = tmp_path / "kit"
    folder.mkdir()
    for name in ("start", "stop"):
        script = folder / f"{name}.sh"
        script.write_text(SCRIPT.format(name=name))
        script.chmod(0o755)
    monkeypatch.setattr(kit, "LOCK", tmp_path / "machine.lock")  # not the machine's own
    return folder, tmp_path / "root"


def hold(folder: Path, root: Path, joined: Any, leave: Any) -> None:
    """In a process of its own: the cluster held until told to leave."""
    with kit.running(folder, root, "run-1"):
        joined.set()
        leave.wait(30)


def calls(root: Path) -> list[str]:
    path = root / "calls"
    return path.read_text().split() if path.exists() else []


def until(condition: Any, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def test_the_last_process_to_leave_stops_it_and_one_that_comes_then_starts_it_again(
    fake_kit: tuple[Path, Path],
) -> None:
    folder, root = fake_kit
    forked = multiprocessing.get_context("fork")
    events = {name: (forked.Event(), forked.Event()) for name in ("starter", "joiner", "later")}
    processes = {
        name: forked.Process(target=hold, args=(folder, root, *events[name])) for name in events
    }
    processes["starter"].start()
    assert events["starter"][0].wait(15)
    assert calls(root) == ["stop", "start"]  # a start clears what a killed run left
    processes["joiner"].start()
    assert events["joiner"][0].wait(15)
    assert calls(root) == ["stop", "start"]  # joined, not started again

    events["starter"][1].set()  # the starter's tests are done; the joiner's are not
    time.sleep(1.5)
    assert calls(root) == ["stop", "start"] and processes["starter"].is_alive()
    # A test of the tier handed to a third process now: the cluster is being stopped (its
    # starter only waits for the joiner), so it is not joined but started again after.
    processes["later"].start()
    time.sleep(1.5)
    assert not events["later"][0].is_set()
    events["joiner"][1].set()
    processes["joiner"].join(15)
    processes["starter"].join(15)
    assert events["later"][0].wait(15)
    assert calls(root) == ["stop", "start", "stop", "stop", "start"]
    events["later"][1].set()
    processes["later"].join(15)
    until(lambda: calls(root) == ["stop", "start", "stop", "stop", "start", "stop"])
    assert not kit.LOCK.with_suffix(".owner").exists()
    assert all(process.exitcode == 0 for process in processes.values())
