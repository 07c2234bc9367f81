"""The real control plane a test tier runs against: a kit of upstream binaries (kube-apiserver,
etcd, controller-manager, scheduler, kubectl and Kueue's manager) with its ``start.sh`` and
``stop.sh``, started on loopback ports of its own and stopped by the PIDs it recorded.

Kueue reads its certificates from two fixed paths, so one such cluster runs on a machine at a
time: a lock file (in the temp folder, for every checkout) is held while it runs. The test
processes of one run share it: the first to need it starts it, each one using it registers,
and the one that started it waits for the others before stopping it."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from tests.support import alive

ROOT = Path(__file__).resolve().parents[2]
KIT_VARIABLE = "QM_REALCLUSTER"
HOW_TO_GET_IT = (
    "no real-control-plane kit (set QM_REALCLUSTER to a folder with start.sh, stop.sh and bin/: "
    "upstream's envtest assets for kube-apiserver and etcd, and Kueue's release; see README.md)"
)
# Ports of the tier's own, away from the kit's defaults (a cluster started by hand stays up);
# QM_REALCLUSTER_PORT_SHIFT moves them all (a cluster another checkout left running keeps its).
PORT_SHIFT = int(os.environ.get("QM_REALCLUSTER_PORT_SHIFT") or 0)
PORTS = {
    "APISERVER_PORT": "26443",
    "ETCD_CLIENT": "127.0.0.1:22379",
    "ETCD_PEER": "127.0.0.1:22380",
    "KCM_PORT": "30257",
    "SCHED_PORT": "30259",
    "KUEUE_WEBHOOK_PORT": "29443",
    "KUEUE_HEALTH": "127.0.0.1:28081",
    "KUEUE_METRICS": "127.0.0.1:28443",
    "KUEUE_VISIBILITY_PORT": "28082",
}
PORTS = {
    name: ":".join([*value.split(":")[:-1], str(int(value.split(":")[-1]) + PORT_SHIFT)])
    for name, value in PORTS.items()
}
LOCK = Path(tempfile.gettempdir()) / "qm-realcluster-tier.lock"
# The kit's binaries, unpacked once per machine and kit (its SHA256SUMS names the folder)
# instead of once per checkout: unpacking them is about 20 CPU-seconds of xz, which every
# fresh clone's run (as in CI) paid again.
BINARIES = Path(tempfile.gettempdir()) / "qm-realcluster-bin"
# Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) turns fair sharing on with this block;
# start.sh writes none (fair sharing off, as Kueue's default). These are Kueue's default
# strategies, written out.
FAIR_SHARING = """
fairSharing:
  preemptionStrategies:
  - LessThanOrEqualToFinalShare
  - LessThanInitialShare
"""
# What a test adds to Kueue's Configuration goes after this line (a YAML comment), so a restart
# takes start.sh's own configuration back before adding its own.
ADDED = "\n# -- added by the test tier --\n"
START_SECONDS = 240
_RESTARTED: list[subprocess.Popen[bytes]] = []
LOCK_SECONDS = 600


def kit_folder() -> Path | None:
    """The kit named by ``QM_REALCLUSTER`` (default: ``../shared/realcluster`` beside the
    checkout), or None when there is none."""
    named = os.environ.get(KIT_VARIABLE)
    folder = Path(named) if named else ROOT.parent / "shared" / "realcluster"
    if (folder / "start.sh").is_file() and (folder / "stop.sh").is_file():
        return folder.resolve()
    return None


def need_kit() -> None:
    """At the top of each of the tier's modules: without the kit the module is skipped, from
    this line, so the run's summary has one line for the whole tier."""
    if kit_folder() is None:
        pytest.skip(HOW_TO_GET_IT, allow_module_level=True)


@dataclass(frozen=True)
class RealCluster:
    kit: Path
    root: Path  # QM_RC_ROOT: binaries, PKI, etcd data, logs

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{PORTS['APISERVER_PORT']}"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "run" / "admin.kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.root / "run" / "pki" / "ca.crt"

    @property
    def kubectl(self) -> Path:
        return self.root / "bin" / "kubectl"

    def environment(self) -> dict[str, str]:
        return {
            # Go's collector at a quarter of its pace (it runs when the heap has grown by
            # 400 % instead of 100 %; the API server then holds about 1 GB): over the
            # loop's and the scenarios' tests, the API server's CPU went from 16.2-17.8 to
            # 12.0-13.6 s, etcd's and Kueue's by a tenth, and the tests' waits on them
            # shortened (92-96 -> 62-70 s). A GOGC of the caller's own is kept.
            "GOGC": "400",
            **os.environ,
            **PORTS,
            "QM_RC_ROOT": str(self.root),
            "QM_RC_PYTHON": shutil.which("python3") or "python3",
        }

    def run(self, script: str, *args: str, timeout: float = START_SECONDS) -> str:
        done = subprocess.run(
            [str(self.kit / script), *args],
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode:
            raise RuntimeError(f"{script} {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def kube(self, *args: str, stdin: str = "") -> str:
        """kubectl as the cluster's administrator (the test's own hands, not the portal's)."""
        done = subprocess.run(
            [str(self.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def remove_job(self, namespace: str, name: str) -> None:
        """A test's Job gone with its pods: with no kubelet a bound pod never finishes its
        termination (and the scheduler counts its GPUs as taken), so they are removed at once."""
        self.kube("delete", "job", name, "-n", namespace, "--ignore-not-found", "--wait=false")
        self.kube(
            "delete",
            "pods",
            "-n",
            namespace,
            "-l",
            f"job-name={name}",
            "--ignore-not-found",
            "--grace-period=0",
            "--force",
        )

    def restart_kueue(self, *, fair_sharing: bool, added: str = "") -> None:
        """Kueue's manager alone stopped (by its recorded PID) and started again with the
        same command ``start.sh`` gave it, on its Configuration with fair sharing on or off
        and ``added`` (more top-level keys of the Configuration, such as ``resources:``; the
        control plane and everything in it stay); back once it is ready and its visibility
        API is served again."""
        run = self.root / "run"
        config = run / "kueue-config.yaml"
        written = config.read_text().split(ADDED)[0].split(FAIR_SHARING)[0]
        config.write_text(written + ADDED + (FAIR_SHARING if fair_sharing else "") + added)
        pid_file = run / "pids" / "kueue.pid"
        old = int(pid_file.read_text())
        if _ours(old, self.root):
            os.kill(old, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while alive(old) and time.monotonic() < deadline:
                time.sleep(0.2)
            with contextlib.suppress(ProcessLookupError):
                os.kill(old, signal.SIGKILL)
        command = [
            str(self.root / "bin" / "kueue-manager"),
            f"--config={config}",
            f"--kubeconfig={run / 'kueue.kubeconfig'}",
            "--zap-log-level=2",
        ]
        with (run / "logs" / "kueue.log").open("a") as log:
            log.write(f"=== restarted, fair sharing {'on' if fair_sharing else 'off'}\n")
            log.flush()
            started = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                start_new_session=True,
            )
        _RESTARTED.append(started)  # kept: stop() ends it by its PID, as the others
        pid_file.write_text(f"{started.pid}\n")
        self._wait_for_kueue(started)

    def _wait_for_kueue(self, started: subprocess.Popen[bytes]) -> None:
        health = f"http://{PORTS['KUEUE_HEALTH']}/readyz"
        deadline = time.monotonic() + START_SECONDS
        while True:
            if started.poll() is not None:
                raise RuntimeError(f"Kueue ended at its restart ({started.returncode})")
            if time.monotonic() > deadline:
                raise RuntimeError("Kueue was not ready again after its restart")
            try:
                with urllib.request.urlopen(health, timeout=2) as answer:
                    ready = answer.status == 200
            except OSError:
                ready = False
            if ready:
                available = self.kube(
                    "get",
                    "apiservice",
                    "v1beta2.visibility.kueue.x-k8s.io",
                    "-o",
                    "jsonpath={.status.conditions[?(@.type=='Available')].status}",
                )
                if available == "True":
                    return
            time.sleep(0.5)

    def pids(self) -> list[int]:
        folder = self.root / "run" / "pids"
        return [int(p.read_text()) for p in folder.glob("*.pid")] if folder.is_dir() else []

    def start(self) -> None:
        """Stop what a killed run may have left (by its recorded PIDs), wipe the cluster's
        state (the unpacked binaries and the PKI are kept: the next start is quicker), start."""
        self._share_binaries()
        for attempt in (1, 2):
            self.run("stop.sh")
            shutil.rmtree(self.root / "run" / "data", ignore_errors=True)
            shutil.rmtree(self.root / "run" / "logs", ignore_errors=True)
            for kubeconfig in (self.root / "run").glob("*.kubeconfig"):
                kubeconfig.unlink()  # they name the API server's port, which may have moved
            try:
                self.run("start.sh", "--nodes")
                return
            except RuntimeError:
                # Seen once under load: etcd ended while Kueue started, and start.sh said
                # "kueue died". A start from scratch is what a person would try next.
                if attempt == 2:
                    raise

    def _share_binaries(self) -> None:
        """``bin/`` under the root is the machine's folder of this kit's unpacked binaries
        (``BINARIES``), unless a checkout unpacked its own before. The kit's start unpacks
        into it only when a binary's checksum does not match; the machine's lock (held
        while this runs) keeps two runs from unpacking at once."""
        sums = self.kit / "bin" / "SHA256SUMS"
        here = self.root / "bin"
        if not sums.is_file() or (here.exists() and not here.is_symlink()):
            return
        shared = BINARIES / hashlib.sha256(sums.read_bytes()).hexdigest()[:16]
        shared.mkdir(parents=True, exist_ok=True)
        if here.is_symlink() and here.readlink() == shared:
            return
        here.unlink(missing_ok=True)
        here.parent.mkdir(parents=True, exist_ok=True)
        here.symlink_to(shared, target_is_directory=True)

    def stop(self) -> None:
        """Every recorded process told to end at once (the kit's stop.sh ends them one after
        the other), killed if one is still there after three seconds (its state is wiped at the next start anyway); then stop.sh, which
        finds none alive and clears the PID files."""
        started = [pid for pid in self.pids() if _ours(pid, self.root)]
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 3
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.run("stop.sh", timeout=60)


def _ours(pid: int, root: Path) -> bool:
    """The PID is still one of the kit's processes under ``root`` (not a reused PID)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return f"{root}/bin/" in command


def _users(root: Path) -> Path:
    folder = root / "users"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _take_lock(run_id: str) -> IO[str] | None:
    """The machine's lock, taken (an open file), or None when this run already holds it."""
    LOCK.touch(exist_ok=True)
    handle = LOCK.open("r+")
    deadline = time.monotonic() + LOCK_SECONDS
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if LOCK.with_suffix(".owner").exists() and (
                LOCK.with_suffix(".owner").read_text().strip() == run_id
            ):
                handle.close()
                return None  # another process of this test run started it: share it
            if time.monotonic() > deadline:
                handle.close()
                raise RuntimeError(
                    f"another real cluster held {LOCK} for {LOCK_SECONDS} s"
                ) from None
            time.sleep(1)
    LOCK.with_suffix(".owner").write_text(run_id)
    return handle


def _joined(cluster: RealCluster, me: Path, run_id: str) -> bool:
    """Registered (``me``) as a user of the cluster another process of this run started,
    once it is up; False when that process is stopping it (its mark of ownership gone): the
    lock is then taken anew and the cluster started again. Registered before looking, so
    that a starter which stops it (``started`` removed first, then its users waited for)
    either waits for this process or is seen stopping."""
    owner = LOCK.with_suffix(".owner")
    deadline = time.monotonic() + START_SECONDS
    while True:
        me.touch()
        if (cluster.root / "run" / "started").exists():
            return True
        me.unlink(missing_ok=True)
        try:
            ours = owner.read_text().strip() == run_id
        except FileNotFoundError:  # removed between two looks as well
            ours = False
        if not ours:
            return False
        if time.monotonic() > deadline:
            raise RuntimeError("the real cluster another test process starts did not come up")
        time.sleep(1)


@contextlib.contextmanager
def running(kit: Path, root: Path, run_id: str) -> Iterator[RealCluster]:
    """The real cluster, started for this test run (or shared with the process of this run
    that started it), stopped by PID when the last process using it is done, also when a
    test or the start failed. A process may leave it before its run ends (when its tests of
    the tier are done) and come back: if it was stopped meanwhile, it is started again."""
    cluster = RealCluster(kit=kit, root=root)
    me = _users(root) / str(os.getpid())
    while (lock := _take_lock(run_id)) is None:
        if not _joined(cluster, me, run_id):
            time.sleep(1)  # the process that started it is stopping it
            continue
        try:
            yield cluster
        finally:
            me.unlink(missing_ok=True)
        return
    try:
        (root / "run").mkdir(parents=True, exist_ok=True)
        (root / "run" / "started").unlink(missing_ok=True)
        for stale in _users(root).iterdir():
            stale.unlink()
        me.touch()
        try:
            cluster.start()
            (root / "run" / "started").touch()
            yield cluster
        finally:
            (root / "run" / "started").unlink(missing_ok=True)  # no process joins from now
            me.unlink(missing_ok=True)
            _wait_for_others(root)
            cluster.stop()
    finally:
        LOCK.with_suffix(".owner").unlink(missing_ok=True)
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _wait_for_others(root: Path) -> None:
    """The other test processes of this run that use the cluster finish first (the run ends
    when all of them have; waiting costs the run nothing)."""
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        others = [p for p in _users(root).iterdir() if alive(int(p.name))]
        if not others:
            return
        time.sleep(1)
