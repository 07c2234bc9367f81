#!/usr/bin/env python3
"""Set up and run Quartermaster on a machine that has nothing but Python 3.11+.

    python3 dev.py run     install, migrate, load the demo, run web + worker + beat
    python3 dev.py test    install, run the whole test suite (what CI runs)
    python3 dev.py stop    stop the embedded PostgreSQL and Redis

The first call creates ``.venv/`` and installs the project with its dev extras; later calls
reinstall only when ``pyproject.toml`` changed. Without ``DATABASE_URL`` / ``REDIS_URL``
the portal starts embedded real servers (data under ``.data/``).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".quartermaster-installed"
DEMO_PASSWORD = "quartermaster-demo"  # demo/data.py's; tests/unit/test_dev.py checks they agree
LOGS_SHOWN = 30


def say(message: str) -> None:
    print(f"[quartermaster] {message}", flush=True)


def ensure_environment() -> None:
    """Create the virtualenv and install the project when pyproject.toml changed."""
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs on any python3
        sys.exit("Quartermaster needs Python 3.11 or newer.")
    if not PYTHON.exists():
        say("creating .venv/")
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    say("installing dependencies (first run takes a minute)")
    subprocess.run(
        [
            str(PYTHON),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-e",
            f"{ROOT}[dev,embedded]",
        ],
        check=True,
    )
    STAMP.write_text(digest)


def ensure_test_tools() -> None:
    """Tools the tests drive, from Debian's packages when missing (as root, apt): Chromium's
    headless shell for the browser tests (a quarter of the full browser's CPU), docker-compose
    to validate the compose files. kubectl (for `kubectl kustomize`) is not packaged by
    Debian: install it from your distribution."""
    wanted = {
        "chromium-headless-shell": "chromium-headless-shell",
        "docker-compose": "docker-compose",
    }
    if os.environ.get("QM_CHROMIUM"):
        wanted.pop("chromium-headless-shell")
    # Where Debian's full chromium is there already, the shell is a saving, not a need: a
    # machine that cannot install it runs the browser tests on chromium.
    optional = {"chromium-headless-shell"} if shutil.which("chromium") else set()
    missing = [package for tool, package in wanted.items() if not shutil.which(tool)]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        command = f"apt-get install {' '.join(missing)}"
        if set(missing) <= optional:
            say(f"the browser tests run on chromium (a quarter of its CPU with: {command})")
        else:
            say(f"the tests need Debian's {', '.join(missing)}: {command}")
        return
    say(f"installing {', '.join(missing)} for the tests")
    apt = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    if subprocess.run(install, env=apt, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=apt, capture_output=True)
        installed = subprocess.run(install, env=apt, capture_output=True)
        if installed.returncode != 0 and set(missing) <= optional:
            say("chromium-headless-shell could not be installed: the browser tests use chromium")
        elif installed.returncode != 0:
            installed.check_returncode()


def manage(*args: str, env: dict[str, str], check: bool = True) -> None:
    subprocess.run([str(PYTHON), "manage.py", *args], cwd=ROOT, env=env, check=check)


def run() -> int:
    """Web, Celery worker and beat in the foreground; Ctrl-C stops them all."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "portal.settings.dev"),
    }
    host = os.environ.get("QM_HOST", "127.0.0.1")
    port = os.environ.get("QM_PORT", "8000")
    data = ROOT / ".data"
    data.mkdir(exist_ok=True)
    mail = data / "mail"  # the dev settings' file-based outbox
    mail.mkdir(exist_ok=True)
    env.setdefault("QM_MAIL_DIR", str(mail))
    already_up = embedded_running()
    processes: dict[str, subprocess.Popen[bytes]] = {}
    clusters: list[tuple[str, str]] = []
    demo_env = dict(env)  # the second cluster's token goes to load_demo alone
    if not (env.get("KUBE_URL") or env.get("KUBECONFIG") or env.get("KUBE_IN_CLUSTER")):
        clusters = start_demo_clusters(env, demo_env, data, processes)
    say("preparing the database")
    manage("migrate", "--no-input", "-v", "0", env=env)
    manage("load_demo", env=demo_env)
    if "devcluster" in processes:
        for step in first_look([os.environ.get("QM_CLUSTER_NAME", "default"), "inference"]):
            manage(*step, env=env, check=step[0] != "collect_gpu_health")
    logs = data / "logs"
    logs.mkdir(exist_ok=True)
    for name, cmd in portal_commands(host, port, data).items():
        with (logs / f"{name}.log").open("ab") as log:  # the child keeps its own copy
            processes[name] = subprocess.Popen(
                cmd, cwd=ROOT, env=env, start_new_session=True, stdout=log, stderr=log
            )
    wait_until_serving(f"http://{host}:{port}/healthz", processes["web"])
    print(banner(f"http://{host}:{port}/", demo_logins(env), logs, clusters, mail=mail), flush=True)
    status = supervise(processes)
    if not any(already_up.values()):
        stop_embedded()  # leave servers that another session (tests, a shell) started
    return status


def first_look(clusters: list[str]) -> list[list[str]]:
    """The commands that fill new demo clusters before the pages open: each cluster synced
    (a new demo cluster starts empty), then the usage history backfilled from what they all
    hold (charts on the Usage page at once: a cluster not yet polled would have no pool, so
    no fleet history; before it, the inference cluster's MIG policy, whose grants are checked
    against the MIG profiles its poll read), the demo's budgets set from that history
    (team-a's nearly spent),
    and last each cluster's GPU health read (the Fleet page's health at once): last, so the
    idle runs it starts go on into the worker's first readings (a reading further back than
    three collections starts a device's run again, and the backfill takes minutes)."""
    steps = [["sync_cluster", "--full", f"--cluster={name}"] for name in clusters]
    steps += [["demo_mig_policy"], ["backfill_usage", "--days=14"], ["demo_budgets"]]
    return [*steps, *(["collect_gpu_health", f"--cluster={name}"] for name in clusters)]


def demo_logins(env: dict[str, str]) -> list[tuple[str, str]]:
    """The demo's logins as the demo data names them (every one, the approver included)."""
    script = "import json; from demo.data import USERS; "
    script += "print(json.dumps([[u.username, u.description] for u in USERS]))"
    answer = subprocess.run(
        [str(PYTHON), "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return [(name, description) for name, description in json.loads(answer.stdout)]


def banner(
    url: str,
    logins: list[tuple[str, str]],
    logs: Path,
    clusters: list[tuple[str, str]] | None = None,
    *,
    mail: Path | None = None,
) -> str:
    """What the run command prints once everything is up: the address, every demo login,
    the demo clusters (name, URL) it started, where the processes write (their logs go
    to files, so the banner stays on screen) and where the mail the portal sends lands."""
    width = max(len(name) for name, _ in logins)
    where = _shown(logs)
    clusters = clusters or []
    named = max((len(name) for name, _ in clusters), default=0)
    lines = [
        f"Quartermaster is running at {url}",
        f"Demo logins, each with the password {DEMO_PASSWORD}:",
        *(
            f"  {name:<{width}}  {description}"
            + (f" (also {url}admin/)" if name == "admin" else "")
            for name, description in logins
        ),
        *(["Demo clusters (a kubeconfig of each in .data/):"] if clusters else []),
        *(f"  {name:<{named}}  {address}" for name, address in clusters),
        f"Logs of web, worker and beat: {where}/ (e.g. tail -f {where}/worker.log)",
        *([f"Mail the portal sends (one file a message): {_shown(mail)}/"] if mail else []),
        "Ctrl-C stops web, worker and beat" + (" and the demo clusters." if clusters else "."),
    ]
    rule = "=" * max(map(len, lines))
    return "\n".join(["", rule, *lines, rule, ""])


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def log_tail(path: Path, lines: int = LOGS_SHOWN) -> str:
    """The last lines of a process's log, to show why it stopped."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def start_demo_clusters(
    env: dict[str, str],
    demo_env: dict[str, str],
    data: Path,
    processes: dict[str, subprocess.Popen[bytes]],
) -> list[tuple[str, str]]:
    """The two demo clusters, each its own process on its own port (``QM_DEVCLUSTER_PORT``,
    ``QM_DEVCLUSTER_INFERENCE_PORT``; 0 or unset: a free one): the training one (the seed's,
    the settings' cluster: ``env`` gets its KUBE_URL) and the inference one, behind a token
    made for this run (``demo_env`` gets its URL and token, for ``load_demo``). Their
    (name, URL); a cluster that does not start stops the other."""
    say("starting the demo GPU clusters (training, inference)")
    token = secrets.token_urlsafe(24)
    try:
        processes["devcluster"], env["KUBE_URL"] = start_demo_cluster(
            data / "devcluster.kubeconfig",
            os.environ.get("QM_DEVCLUSTER_PORT", "0"),
            ["--idle-notebook"],
        )
        processes["devcluster-inference"], url = start_demo_cluster(
            data / "devcluster-inference.kubeconfig",
            os.environ.get("QM_DEVCLUSTER_INFERENCE_PORT", "0"),
            inference_cluster_options(token),
        )
    except RuntimeError as exc:
        for process in processes.values():
            os.killpg(process.pid, signal.SIGTERM)
        sys.exit(str(exc))
    demo_env.update(
        KUBE_URL=env["KUBE_URL"], QM_DEMO_INFERENCE_URL=url, QM_DEMO_INFERENCE_TOKEN=token
    )
    settings_name = os.environ.get("QM_CLUSTER_NAME", "default")
    return [(f"{settings_name} (training)", env["KUBE_URL"]), ("inference", url)]


def start_demo_cluster(
    kubeconfig: Path, port: str, extra: list[str]
) -> tuple[subprocess.Popen[bytes], str]:
    """One demo cluster process (Kueue with fair sharing, a kubeconfig for kubectl written
    beside the data) and the URL it listens on; RuntimeError when it does not start."""
    demo = subprocess.Popen(
        demo_cluster_command(kubeconfig, port, extra),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert demo.stdout is not None
    line = demo.stdout.readline().decode()
    if "listening on" not in line:
        os.killpg(demo.pid, signal.SIGTERM)
        raise RuntimeError(f"a demo cluster did not start: {line}")
    url = line.rsplit(" ", 1)[-1].strip()
    say(f"demo cluster at {url} (kubectl --kubeconfig {kubeconfig})")
    return demo, url


def inference_cluster_options(token: str) -> list[str]:
    """The inference demo cluster's own options: its scenario and the run's token (random,
    so it may begin with ``-``: it rides inside its option)."""
    return ["--scenario=inference", f"--token={token}"]


def demo_cluster_command(kubeconfig: Path, port: str, extra: list[str]) -> list[str]:
    """The command line of one demo cluster. Every value rides in its option as
    ``--name=value``: a value made from random or user text (the token, a path, a port from
    the environment) may begin with ``-``, and argparse reads a separate ``-x…`` as an
    option, so ``--token -x…`` stopped the run about one start in 64."""
    return [
        *(str(PYTHON), "-m", "devcluster", f"--port={port}"),
        *(f"--kubeconfig={kubeconfig}", "--fair-sharing", *extra),
    ]


def portal_commands(host: str, port: str, data: Path) -> dict[str, list[str]]:
    celery = [str(PYTHON), "-m", "celery", "-A", "portal"]
    return {
        # the address is a positional argument: after ``--`` it cannot be read as an option
        "web": [str(PYTHON), "manage.py", "runserver", "--noreload", "--", f"{host}:{port}"],
        "worker": [*celery, "worker", "--loglevel=INFO", "--concurrency=2"],
        "beat": [*celery, "beat", "--loglevel=INFO", f"--schedule={data / 'celerybeat-schedule'}"],
    }


def supervise(processes: dict[str, subprocess.Popen[bytes]]) -> int:
    """Wait for Ctrl-C (or one process to exit), then stop them all."""
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    status = 0
    while not stopping:
        for name, process in processes.items():
            if process.poll() is not None:
                say(f"{name} exited with {process.returncode}; stopping the others")
                say(f"the end of its log ({LOGS_SHOWN} lines of .data/logs/{name}.log):")
                print(log_tail(ROOT / ".data" / "logs" / f"{name}.log"), flush=True)
                status = process.returncode or 1
                stopping = True
        time.sleep(0.5)
    for process in processes.values():
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes.values():
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    return status


def wait_until_serving(url: str, web: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Block until the web process answers, so the printed URL works when it appears."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and web.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)


CHECKS = {
    "ruff check": [str(PYTHON), "-m", "ruff", "check", "."],
    "ruff format": [str(PYTHON), "-m", "ruff", "format", "--check", "--quiet", "."],
    "import contracts (layers, the gateway, the pure cores)": [
        str(VENV / "bin" / "lint-imports"),
        "--no-cache",
    ],
    "types (mypy over the product)": [str(PYTHON), "-m", "mypy"],
    "migrations up to date": [str(PYTHON), "manage.py", "makemigrations", "--check", "--dry-run"],
}


def test(args: list[str]) -> int:
    """The whole pytest suite spread over test processes, and, when no test selection is
    given, the static checks beside it at the lowest priority: they take the cores only
    while the tests wait (on the demo cluster, a worker, a browser), never from them."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test"}
    ensure_test_tools()
    checks = start_checks(env) if not args else {}
    command = pytest_command(args, cpus=os.cpu_count() or 1, addopts=env.get("PYTEST_ADDOPTS", ""))
    status = subprocess.run(command, cwd=ROOT, env=env).returncode
    return finish_checks(checks) or status


def pytest_command(args: list[str], *, cpus: int, addopts: str = "") -> list[str]:
    """pytest over up to four test processes (the test settings give each its own Redis
    databases, four at most), two per core: most of the long tests wait on a demo cluster,
    a worker or a browser, and another process runs meanwhile. Work-stealing: a process
    that runs out takes half of the busiest one's remaining tests, so no hand-kept order
    is needed for the run to end together. The 25 slowest tests are listed at the end
    (unless the durations are asked for already)."""
    processes = min(4, 2 * cpus)
    parallel = ["-n", str(processes), "--dist", "worksteal"] if processes > 1 else []
    durations = [] if "--durations" in " ".join([*args, addopts]) else ["--durations=25"]
    return [str(PYTHON), "-m", "pytest", *parallel, *durations, *args]


def start_checks(
    env: dict[str, str], checks: dict[str, list[str]] | None = None
) -> dict[str, subprocess.Popen[str]]:
    """The static checks (``CHECKS``), started at once at the lowest priority."""
    checks = CHECKS if checks is None else checks
    say("checks (beside the tests, at the lowest priority): " + ", ".join(checks))
    return {
        name: subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=lowest_priority,
        )
        for name, command in checks.items()
    }


def lowest_priority() -> None:
    """In a check's process before it runs: the scheduler gives it what the tests leave."""
    os.nice(19)


def finish_checks(checks: dict[str, subprocess.Popen[str]]) -> int:
    """Each check's outcome; the output of those that failed, and the first one's status."""
    status = 0
    for name, process in checks.items():
        output, _ = process.communicate()
        if process.returncode:
            print(output)
            say(f"check failed: {name}")
            status = status or process.returncode
        else:
            say(f"check passed: {name}")
    return status


def embedded_running() -> dict[str, bool]:
    result = subprocess.run(
        [
            str(PYTHON),
            "-c",
            "import json; from portal.infra import embedded; print(json.dumps(embedded.running()))",
        ],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
    )
    try:
        return dict(json.loads(result.stdout))
    except ValueError:
        return {}


def stop_embedded() -> None:
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return
    subprocess.run(
        [
            str(PYTHON),
            "-c",
            "from portal.infra import embedded; embedded.stop_postgres(); embedded.stop_redis()",
        ],
        cwd=ROOT,
        check=False,
    )


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "help"
    if command not in {"run", "test", "stop"}:
        print(__doc__)
        return 0 if command in {"help", "-h", "--help"} else 2
    ensure_environment()
    if command == "run":
        return run()
    if command == "test":
        return test(argv[1:])
    stop_embedded()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
