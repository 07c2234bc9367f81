"""The run command's banner: every demo login (the approver too), the address, and where
the processes' logs are (they go to files, so nothing scrolls the banner away). The test
command: its test processes and their distribution, and the static checks beside them."""

from __future__ import annotations

import importlib
import os
import secrets
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import dev
from demo.data import DEMO_PASSWORD, USERS
from devcluster.__main__ import command_line as devcluster_command_line
from tests.conftest import spread

ROOT = Path(dev.__file__).resolve().parent


def test_the_banner_lists_every_demo_login_and_where_the_logs_are() -> None:
    logins = [(user.username, user.description) for user in USERS]
    text = dev.banner("http://127.0.0.1:8000/", logins, ROOT / ".data" / "logs")
    lines = text.splitlines()
    assert lines[2] == "Quartermaster is running at http://127.0.0.1:8000/"
    assert lines[3] == f"Demo logins, each with the password {DEMO_PASSWORD}:"
    assert lines[4] == "  admin       platform admin (also http://127.0.0.1:8000/admin/)"
    assert lines[5] == "  approver    approver of change requests"
    for user in USERS:
        assert any(line.startswith(f"  {user.username} ") for line in lines), user.username
    assert "Logs of web, worker and beat: .data/logs/ (e.g. tail -f .data/logs/worker.log)" in lines
    assert lines[1] == lines[-1] == "=" * max(len(line) for line in lines[2:-1])
    assert not any(line.startswith("Mail ") for line in lines)


def test_the_banner_says_where_the_mail_lands_in_one_line() -> None:
    logins = [(user.username, user.description) for user in USERS]
    text = dev.banner(
        "http://127.0.0.1:8000/", logins, ROOT / ".data" / "logs", mail=ROOT / ".data" / "mail"
    )
    mail = [line for line in text.splitlines() if "mail" in line.lower()]
    assert mail == ["Mail the portal sends (one file a message): .data/mail/"]


def test_the_dev_settings_send_mail_to_the_runs_outbox() -> None:
    """The run command's settings write each mail to a file in .data/mail/ (or where
    ``QM_MAIL_DIR`` says); nothing leaves the machine."""
    dev_settings = vars(importlib.import_module("portal.settings.dev"))
    assert dev_settings["EMAIL_BACKEND"] == "django.core.mail.backends.filebased.EmailBackend"
    assert dev_settings["EMAIL_FILE_PATH"] in (
        str(ROOT / ".data" / "mail"),
        os.environ.get("QM_MAIL_DIR"),
    )


def test_the_banners_password_is_the_demos() -> None:
    assert dev.DEMO_PASSWORD == DEMO_PASSWORD


def test_the_banner_reads_the_logins_from_the_demo_data() -> None:
    logins = dev.demo_logins({})
    assert logins == [(user.username, user.description) for user in USERS]
    assert ("approver", "approver of change requests") in logins


def test_the_tail_of_a_log(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert dev.log_tail(log, 3) == "line 97\nline 98\nline 99"
    assert dev.log_tail(tmp_path / "missing.log") == ""


def test_the_banner_names_both_demo_clusters_and_their_addresses() -> None:
    logins = [(user.username, user.description) for user in USERS]
    clusters = [("default (training)", "http://127.0.0.1:6443"), ("inference", "http://[::1]:1")]
    lines = dev.banner("http://127.0.0.1:8000/", logins, ROOT / ".data" / "logs", clusters)
    shown = lines.splitlines()
    start = shown.index("Demo clusters (a kubeconfig of each in .data/):")
    assert shown[start + 1 : start + 3] == [
        "  default (training)  http://127.0.0.1:6443",
        "  inference           http://[::1]:1",
    ]
    assert "Ctrl-C stops web, worker and beat and the demo clusters." in shown
    alone = dev.banner("http://127.0.0.1:8000/", logins, ROOT / ".data" / "logs")
    assert "Demo clusters" not in alone and "Ctrl-C stops web, worker and beat." in alone


def test_every_demo_cluster_is_synced_before_the_backfill_and_read_last() -> None:
    """GPU health last, just before the pages open: a reading taken before the minutes of
    the backfill was too old to go on into the worker's, so the demo's idle notebook was
    found five minutes after the pages opened plus however long the backfill took."""
    steps = dev.first_look(["default", "inference"])
    backfill = steps.index(["backfill_usage", "--days=14"])
    assert steps[backfill + 1] == ["demo_budgets"]  # set from the history backfilled
    for name in ("default", "inference"):
        assert steps.index(["sync_cluster", "--full", f"--cluster={name}"]) < backfill
        # the MIG policy's grants are checked against the profiles the sync read
        assert steps.index(["sync_cluster", "--full", f"--cluster={name}"]) < steps.index(
            ["demo_mig_policy"]
        )
    assert steps[-2:] == [
        ["collect_gpu_health", "--cluster=default"],
        ["collect_gpu_health", "--cluster=inference"],
    ]


def test_a_demo_cluster_starts_with_a_token_that_looks_like_an_option(tmp_path: Path) -> None:
    """A random token begins with ``-`` about one time in 64: the run command's line for the
    inference cluster still parses, the token whole (it used to stop the run with
    "argument --token: expected one argument")."""
    for token in ("-x" + secrets.token_urlsafe(24), "--help", "-"):
        command = dev.demo_cluster_command(
            tmp_path / "-inference.kubeconfig", "-1", dev.inference_cluster_options(token)
        )
        assert command[1:3] == ["-m", "devcluster"]
        args = devcluster_command_line().parse_args(command[3:])
        assert (args.token, args.scenario, args.fair_sharing) == (token, "inference", True)
        assert args.kubeconfig == tmp_path / "-inference.kubeconfig" and args.port == -1


def test_the_portals_processes_take_values_that_look_like_options(tmp_path: Path) -> None:
    """Each value from the environment or a path rides inside its option (or after ``--``)."""
    commands = dev.portal_commands("-host", "8000", tmp_path / "-data")
    assert commands["web"][-2:] == ["--", "-host:8000"]
    assert f"--schedule={tmp_path / '-data' / 'celerybeat-schedule'}" in commands["beat"]
    steps = dev.first_look(["-cluster"])
    assert ["sync_cluster", "--full", "--cluster=-cluster"] in steps


def test_the_static_checks_run_at_the_lowest_priority() -> None:
    """Beside the tests, a check gets only what the test processes leave of the cores."""
    probe = {"priority": [sys.executable, "-c", "import os; print(os.nice(0))"]}
    (process,) = dev.start_checks(dict(os.environ), probe).values()
    output, _ = process.communicate(timeout=60)
    assert output.strip() == "19"


def test_the_suite_is_spread_by_work_stealing_with_its_slowest_tests_listed() -> None:
    command = dev.pytest_command([], cpus=2)
    assert command[command.index("--dist") + 1] == "worksteal"
    assert command[command.index("-n") + 1] == "4"
    assert "--durations=25" in command
    assert "loadscope" not in command
    # four processes at most (the test settings give each its own Redis databases)
    assert dev.pytest_command([], cpus=8)[command.index("-n") + 1] == "4"
    # durations asked for otherwise win
    assert "--durations=25" not in dev.pytest_command([], cpus=2, addopts="--durations=60")
    assert "--durations=25" not in dev.pytest_command(["--durations=5"], cpus=2)


def test_the_slow_tests_are_dealt_evenly_to_the_test_processes() -> None:
    """Two long tests side by side in the collection go to two test processes; each
    process's run starts with its long test, then keeps the collection's order."""
    items = [f"unit-{i:02d}" for i in range(10)] + ["story-1", "story-2"]
    items += [f"unit-{i:02d}" for i in range(10, 20)]
    order = spread(items, 2, slow=lambda item: item.startswith("story"))
    assert sorted(order) == sorted(items)
    first, second = order[:11], order[11:]  # what work-stealing hands each process first
    assert first[0] == "story-1" and second[0] == "story-2"
    assert first[1:] == [item for item in items if item in first[1:]]
    assert second[1:] == [item for item in items if item in second[1:]]
    assert spread(items, 1, slow=lambda item: True) == items


def test_the_tests_of_a_module_scoped_fixture_go_to_one_test_process() -> None:
    """The image test's tests share the venv a module-scoped fixture builds: dealt to four
    processes, three would wait for the one building it; they go to one, and the other slow
    tests are dealt to the others."""

    def test(module: str, name: str, scope: str) -> SimpleNamespace:
        fixtures = {"fixture": [SimpleNamespace(scope=scope)]}
        return SimpleNamespace(
            fspath=module, name=name, _fixtureinfo=SimpleNamespace(name2fixturedefs=fixtures)
        )

    image = [test("deploy/test_image.py", f"image-{i}", "module") for i in range(4)]
    stories = [test("e2e/test_story.py", f"story-{i}", "function") for i in range(3)]
    units = [test("unit/test_x.py", f"unit-{i:02d}", "function") for i in range(20)]
    items = [*units[:10], *image, *stories, *units[10:]]
    order = spread(items, 4, slow=lambda item: item in image or item in stories)
    first = order[: len(order) // 4]  # the run work-stealing hands the first process
    assert all(item in first for item in image)
    assert not any(item in first for item in stories)


def test_the_real_control_plane_tier_goes_to_one_test_process() -> None:
    """One real cluster runs on a machine at a time: the tier's tests, in any of its modules,
    are dealt as one to the process that starts it."""

    def test(module: str, name: str) -> SimpleNamespace:
        fixtures = {"real_cluster": [SimpleNamespace(scope="session")]}
        return SimpleNamespace(
            fspath=module, name=name, _fixtureinfo=SimpleNamespace(name2fixturedefs=fixtures)
        )

    tier = [test(f"realcluster/test_{m}.py", f"real-{m}-{i}") for m in "ab" for i in range(3)]
    stories = [test("e2e/test_story.py", f"story-{i}") for i in range(3)]
    units = [test("unit/test_x.py", f"unit-{i:02d}") for i in range(20)]
    order = spread([*units, *tier, *stories], 4, slow=lambda item: item in tier or item in stories)
    runs, left, start = [], len(order), 0
    for index in range(4):  # the runs work-stealing hands the four processes
        size = left // (4 - index)
        runs.append(order[start : start + size])
        start, left = start + size, left - size
    assert sum(1 for run in runs if any(item in run for item in tier)) == 1
    (holding,) = [run for run in runs if any(item in run for item in tier)]
    assert holding[: len(tier)] == tier  # the tier first: its start is the longest wait


def test_the_browser_tests_fall_back_to_chromium_where_the_shell_cannot_be_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As root on Debian with chromium there, an apt that cannot install the headless shell
    (no network, an older release) leaves the tests on chromium; with no chromium either,
    the failed install is an error. (apt is the edge here: its answers are given.)"""
    asked: list[list[str]] = []

    def apt_fails(command: list[str], **_: Any) -> subprocess.CompletedProcess[bytes]:
        asked.append(command)
        return subprocess.CompletedProcess(command, 100, b"", b"E: Unable to locate package")

    monkeypatch.setattr(dev.os, "geteuid", lambda: 0)
    monkeypatch.setattr(dev.subprocess, "run", apt_fails)
    monkeypatch.delenv("QM_CHROMIUM", raising=False)
    on_path = {"apt-get", "chromium", "docker-compose"}
    monkeypatch.setattr(dev.shutil, "which", lambda tool: tool if tool in on_path else None)
    dev.ensure_test_tools()
    assert [c[-1] for c in asked] == ["chromium-headless-shell", "-q", "chromium-headless-shell"]
    assert "the browser tests use chromium" in capsys.readouterr().out

    on_path.discard("chromium")
    with pytest.raises(subprocess.CalledProcessError):
        dev.ensure_test_tools()
