"""Real kubectl against the demo cluster: apply with validation on, explain, get with the
server's Table columns, get -w receiving an event, and wait returning on a condition or a
deletion. The kubectl binary must be on PATH (the README names the version, v1.32); the
tests are skipped, saying so, only when it is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from queue import Empty, Queue

import pytest

import devcluster
from devcluster.__main__ import kubeconfig
from devcluster.resources import find

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed (these tests run the kubectl binary, v1.32)"
)
README = Path(__file__).resolve().parents[2] / "README.md"
Run = Callable[..., subprocess.CompletedProcess[str]]

QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: a100-3g
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq-demo
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/mig-3g.40gb"]
    flavors:
    - name: a100-3g
      resources:
      - name: nvidia.com/mig-3g.40gb
        nominalQuota: 4
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq-demo
  namespace: team-a
spec:
  clusterQueue: cq-demo
"""
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: team-a
spec:
  containers:
  - name: main
    image: busybox
{extra}"""


@pytest.fixture
def kubectl(demo_cluster: devcluster.DemoCluster, tmp_path: Path) -> Run:
    """Runs kubectl (with its own discovery and OpenAPI cache) against the demo cluster."""
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig(demo_cluster.url, ""))

    def run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        command = [
            str(KUBECTL),
            "--kubeconfig",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
        return subprocess.run(
            [*command, *args], capture_output=True, text=True, timeout=timeout, check=False
        )

    run.config = config  # type: ignore[attr-defined]
    run.cache = tmp_path / "cache"  # type: ignore[attr-defined]
    return run


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def columns(line: str) -> list[str]:
    """A kubectl table line's cells (columns are two or more spaces apart)."""
    return re.split(r"\s{2,}", line.strip())


def test_kubectl_is_the_version_the_readme_names(kubectl: Run) -> None:
    version = kubectl("version", "--client")
    assert version.returncode == 0
    client = re.search(r"Client Version: v(\d+\.\d+)\.", version.stdout)
    assert client is not None
    assert client.group(1) == "1.32"
    assert "kubectl v1.32" in README.read_text()


def test_apply_validates_against_the_served_openapi_and_creates(
    kubectl: Run, tmp_path: Path
) -> None:
    path = write(tmp_path, "queues.yaml", QUEUES)
    applied = kubectl("apply", "-f", path, "-v=6")
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout == (
        "resourceflavor.kueue.x-k8s.io/a100-3g created\n"
        "clusterqueue.kueue.x-k8s.io/cq-demo created\n"
        "localqueue.kueue.x-k8s.io/lq-demo created\n"
    )
    assert re.search(r"GET http://[^ ]+/openapi/v3\?timeout=32s 200 OK", applied.stderr)
    assert re.search(
        r"GET http://[^ ]+/openapi/v3/apis/kueue.x-k8s.io/v1beta2\?hash=[0-9A-F]{128}&timeout=32s 200 OK",
        applied.stderr,
    )
    assert re.search(
        r"POST [^ ]+/clusterqueues\?fieldManager=kubectl-client-side-apply&fieldValidation=Strict 201",
        applied.stderr,
    )
    again = kubectl("apply", "-f", path)
    assert again.returncode == 0, again.stderr
    # The ClusterQueue reads "configured": its quota is stored as the string "4" (as Kueue's
    # webhook stores it), so kubectl's three-way merge sends the number again.
    assert again.stdout == (
        "resourceflavor.kueue.x-k8s.io/a100-3g unchanged\n"
        "clusterqueue.kueue.x-k8s.io/cq-demo configured\n"
        "localqueue.kueue.x-k8s.io/lq-demo unchanged\n"
    )
    pod = write(tmp_path, "pod.yaml", POD.format(name="applied", extra=""))
    assert kubectl("apply", "-f", pod).stdout == "pod/applied created\n"
    changed = write(
        tmp_path,
        "pod2.yaml",
        POD.format(name="applied", extra="").replace("busybox", "busybox:1.37"),
    )
    assert kubectl("apply", "-f", changed).stdout == "pod/applied configured\n"


def test_an_unknown_field_fails_strict_validation(kubectl: Run, tmp_path: Path) -> None:
    pod = write(tmp_path, "typo.yaml", POD.format(name="typo", extra="    colour: red\n"))
    refused = kubectl("apply", "-f", pod)
    assert refused.returncode == 1
    assert refused.stderr == (
        f'Error from server (BadRequest): error when creating "{pod}": Pod in version "v1" '
        'cannot be handled as a Pod: strict decoding error: unknown field "spec.containers[0].colour"\n'
    )
    queue = write(
        tmp_path, "lq.yaml", QUEUES.split("---\n")[2].replace("spec:\n", "spec:\n  colour: red\n")
    )
    crd_refused = kubectl("apply", "-f", queue)
    assert crd_refused.returncode == 1
    assert crd_refused.stderr == (
        f'Error from server (BadRequest): error when creating "{queue}": LocalQueue in version '
        '"v1beta2" cannot be handled as a LocalQueue: strict decoding error: unknown field "spec.colour"\n'
    )


def test_explain_reads_the_served_schemas(kubectl: Run) -> None:
    queue = kubectl("explain", "clusterqueue.spec")
    assert queue.returncode == 0, queue.stderr
    assert queue.stdout.splitlines()[:5] == [
        "GROUP:      kueue.x-k8s.io",
        "KIND:       ClusterQueue",
        "VERSION:    v1beta2",
        "",
        "FIELD: spec <Object>",
    ]
    assert "  cohortName\t<string>" in queue.stdout.splitlines()
    containers = kubectl("explain", "pod.spec.containers")
    assert containers.returncode == 0, containers.stderr
    assert containers.stdout.splitlines()[:4] == [
        "KIND:       Pod",
        "VERSION:    v1",
        "",
        "FIELD: containers <[]Container>",
    ]
    assert "  image\t<string>" in containers.stdout.splitlines()


def wait_for(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_get_prints_the_servers_columns_for_pods_nodes_and_events(
    kubectl: Run, demo_cluster: devcluster.DemoCluster
) -> None:
    events = find("", "v1", "events")
    assert events is not None
    wait_for(
        lambda: any(e.get("reason") == "FailedScheduling" for e in demo_cluster.cluster.all(events))
    )
    got = kubectl("get", "pods,nodes,events", "-n", "team-a")
    assert got.returncode == 0, got.stderr
    sections = [s.splitlines() for s in got.stdout.split("\n\n")]
    pods, nodes, listed = sections
    assert columns(pods[0]) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert columns(pods[1])[:4] == ["pod/train-3g", "0/1", "Pending", "0"]
    assert columns(nodes[0]) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert columns(nodes[1])[:3] == ["node/gpu-a100-01", "Ready", "<none>"]
    assert columns(nodes[1])[4] == "v1.36.2"
    assert columns(listed[0]) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    failed = next(columns(line) for line in listed[1:] if "FailedScheduling" in line)
    assert failed[1:4] == ["Warning", "FailedScheduling", "pod/train-3g"]
    assert failed[4].startswith("0/5 nodes are available: ")
    wide = kubectl("get", "pods", "-n", "team-a", "-o", "wide")
    assert columns(wide.stdout.splitlines()[0]) == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    assert kubectl("cordon", "gpu-a100-03").stdout == "node/gpu-a100-03 cordoned\n"
    node = kubectl("get", "node", "gpu-a100-03").stdout.splitlines()
    assert columns(node[1])[:2] == ["gpu-a100-03", "Ready,SchedulingDisabled"]


def test_get_clusterqueues_prints_the_crds_printer_columns(kubectl: Run, tmp_path: Path) -> None:
    assert kubectl("apply", "-f", write(tmp_path, "queues.yaml", QUEUES)).returncode == 0
    queues = kubectl("get", "clusterqueues").stdout.splitlines()
    assert [columns(line) for line in queues] == [
        ["NAME", "COHORT", "PENDING WORKLOADS"],
        ["cq-demo", "research", "0"],
    ]
    wide = kubectl("get", "cq", "-o", "wide").stdout.splitlines()
    assert [columns(line) for line in wide] == [
        ["NAME", "COHORT", "STRATEGY", "PENDING WORKLOADS", "ADMITTED WORKLOADS"],
        ["cq-demo", "research", "BestEffortFIFO", "0", "0"],
    ]
    local = kubectl("get", "localqueues", "-n", "team-a").stdout.splitlines()
    assert columns(local[0]) == ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS"]
    assert columns(local[1]) == ["lq-demo", "cq-demo", "0", "0"]


@pytest.fixture
def watching(kubectl: Run) -> Iterator[Callable[..., tuple[subprocess.Popen[str], Queue[str]]]]:
    """Starts a long-running kubectl; its stdout lines arrive on a queue."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[subprocess.Popen[str], Queue[str]]:
        config, cache = kubectl.config, kubectl.cache  # type: ignore[attr-defined]
        command = [str(KUBECTL), "--kubeconfig", str(config), "--cache-dir", str(cache), *args]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        started.append(process)
        lines: Queue[str] = Queue()
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
        return process, lines

    yield start
    for process in started:
        process.kill()
        process.wait(timeout=10)


def next_line(lines: Queue[str], containing: str, seconds: float = 15) -> str:
    deadline = time.monotonic() + seconds
    while True:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except Empty:
            raise AssertionError(f"no line with {containing!r} within {seconds}s") from None
        if containing in line:
            return line


def test_get_watch_prints_a_change_made_while_it_watches(
    kubectl: Run, watching: Callable[..., tuple[subprocess.Popen[str], Queue[str]]], tmp_path: Path
) -> None:
    _, lines = watching("get", "pods", "-n", "team-a", "-w")
    assert columns(next_line(lines, "NAME")) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert columns(next_line(lines, "train-3g"))[:3] == ["train-3g", "0/1", "Pending"]
    assert (
        kubectl(
            "apply", "-f", write(tmp_path, "p.yaml", POD.format(name="watched", extra=""))
        ).returncode
        == 0
    )
    assert columns(next_line(lines, "watched"))[:3] == ["watched", "0/1", "Pending"]
    assert columns(next_line(lines, "Running"))[:3] == ["watched", "0/1", "Running"]
    assert kubectl("delete", "pod", "watched", "-n", "team-a", "--wait=false").returncode == 0
    assert columns(next_line(lines, "Terminating"))[:3] == ["watched", "0/1", "Terminating"]


def test_wait_returns_when_the_condition_holds(kubectl: Run, tmp_path: Path) -> None:
    ready = kubectl("wait", "--for=condition=Ready", "node/gpu-a100-01", "--timeout=20s")
    assert (ready.returncode, ready.stdout) == (0, "node/gpu-a100-01 condition met\n")
    assert kubectl("apply", "-f", write(tmp_path, "queues.yaml", QUEUES)).returncode == 0
    active = kubectl("wait", "--for=condition=Active", "clusterqueue/cq-demo", "--timeout=20s")
    assert (active.returncode, active.stdout) == (
        0,
        "clusterqueue.kueue.x-k8s.io/cq-demo condition met\n",
    )
    assert (
        kubectl(
            "apply", "-f", write(tmp_path, "p.yaml", POD.format(name="starting", extra=""))
        ).returncode
        == 0
    )
    started = kubectl(
        "wait", "--for=condition=Ready", "pod/starting", "-n", "team-a", "--timeout=20s"
    )
    assert (started.returncode, started.stdout) == (0, "pod/starting condition met\n")
    never = kubectl("wait", "--for=condition=Ready", "pod/train-3g", "-n", "team-a", "--timeout=1s")
    assert (never.returncode, never.stderr) == (
        1,
        "error: timed out waiting for the condition on pods/train-3g\n",
    )


def test_wait_for_delete_returns_once_the_object_is_gone(
    kubectl: Run, watching: Callable[..., tuple[subprocess.Popen[str], Queue[str]]], tmp_path: Path
) -> None:
    assert (
        kubectl(
            "apply", "-f", write(tmp_path, "p.yaml", POD.format(name="doomed", extra=""))
        ).returncode
        == 0
    )
    process, lines = watching("wait", "--for=delete", "pod/doomed", "-n", "team-a", "--timeout=30s")
    time.sleep(0.5)
    assert process.poll() is None  # still waiting: the pod is there
    assert kubectl("delete", "pod", "doomed", "-n", "team-a", "--wait=false").returncode == 0
    assert next_line(lines, "doomed") == "pod/doomed condition met\n"
    assert process.wait(timeout=20) == 0
