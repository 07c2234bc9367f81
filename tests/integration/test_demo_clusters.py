"""The run command's two demo clusters: each its own process on its own port, the inference
one behind the token the demo loader stores, both stopped with the portal; and the second
cluster the integration fixtures give (``inference_cluster``)."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import dev
from tests.integration.conftest import SecondCluster


def node_names(url: str, token: str = "") -> list[str]:
    request = urllib.request.Request(f"{url}/api/v1/nodes")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return sorted(item["metadata"]["name"] for item in json.load(answer)["items"])


def test_the_run_command_starts_two_demo_clusters_and_stops_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QM_DEVCLUSTER_PORT", raising=False)
    monkeypatch.delenv("QM_DEVCLUSTER_INFERENCE_PORT", raising=False)
    env: dict[str, str] = {}
    demo_env: dict[str, str] = {}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        clusters = dev.start_demo_clusters(env, demo_env, tmp_path, processes)
        training, inference = (url for _, url in clusters)
        assert set(processes) == {"devcluster", "devcluster-inference"}
        assert processes["devcluster"].pid != processes["devcluster-inference"].pid
        assert training != inference and env["KUBE_URL"] == training
        assert demo_env["QM_DEMO_INFERENCE_URL"] == inference
        assert "QM_DEMO_INFERENCE_TOKEN" not in env  # web, worker and beat do not get it
        assert node_names(training)[0] == "gpu-a100-01"
        token = demo_env["QM_DEMO_INFERENCE_TOKEN"]
        assert node_names(inference, token)[0] == "infer-h100-01"
        with pytest.raises(urllib.error.HTTPError, match="401"):
            node_names(inference)
        assert (tmp_path / "devcluster-inference.kubeconfig").read_text().count(token) == 1
        # One process ending (here a stand-in for web) stops the others, as Ctrl-C does.
        processes["web"] = subprocess.Popen(["true"])
        before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            assert dev.supervise(processes) == 1  # an exit nobody asked for
        finally:
            for number, handler in before.items():
                signal.signal(number, handler)
        assert processes["devcluster"].poll() == processes["devcluster-inference"].poll() == 0
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def test_the_second_clusters_row_reaches_it_with_its_stored_token(
    inference_cluster: SecondCluster, demo_cluster: Any
) -> None:
    assert inference_cluster.row.credential != inference_cluster.token  # encrypted
    nodes = [n["metadata"]["name"] for n in inference_cluster.gateway.list("v1", "Node")]
    assert nodes == [
        "infer-h100-01",
        "infer-h100-02",
        "infer-h100-03",
        "infer-l40s-01",
        "infer-l40s-02",
        "infer-l40s-03",
    ]
    assert inference_cluster.demo.url != demo_cluster.url
