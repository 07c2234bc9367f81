"""The poll's pod rows: a pod listed again at the version its row was decoded from is not
decoded or written again; its row stays, its allocation still counts."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from cluster.models import ObservedNode, ObservedPod
from cluster.services import settings_cluster
from loop.write import write_fleet

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=1)
LATEST = NOW + dt.timedelta(minutes=2)


def _node() -> dict[str, Any]:
    return {
        "metadata": {"name": "gpu-1", "uid": "uid-gpu-1", "labels": {}, "resourceVersion": "1"},
        "status": {
            "capacity": {"nvidia.com/gpu": "8"},
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
        "spec": {},
    }


def _pod(name: str, version: str, gpus: int = 1, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "team-a",
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": version,
            "labels": {"kueue.x-k8s.io/queue-name": "training"},
        },
        "spec": {
            "nodeName": "gpu-1",
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": phase},
    }


def _rows() -> dict[str, tuple[str, str, dt.datetime]]:
    return {
        name: (phase, source, changed)
        for name, phase, source, changed in ObservedPod.objects.values_list(
            "name", "phase", "decoded_from", "last_changed"
        )
    }


def test_an_unchanged_pod_is_neither_decoded_nor_written_again() -> None:
    cluster = settings_cluster().pk
    pods = [_pod("a", "10"), _pod("b", "11", gpus=2)]
    assert write_fleet([_node()], pods, cluster_id=cluster, now=NOW) == 3
    first = _rows()
    # The same versions again: nothing written, both rows kept, the node's allocation whole.
    assert write_fleet([_node()], copy.deepcopy(pods), cluster_id=cluster, now=LATER) == 0
    assert _rows() == first
    assert ObservedNode.objects.get(name="gpu-1").allocated == {"nvidia.com/gpu": 3}
    # A new version of b with what the portal keeps unchanged (a status write it ignores):
    # its source is written, its last change stays; a finished pod a is removed.
    b = _pod("b", "12", gpus=2)
    b["status"]["hostIP"] = "10.0.0.7"
    assert write_fleet([_node()], [b], cluster_id=cluster, now=LATEST) == 3
    rows = _rows()
    assert set(rows) == {"b"}
    assert rows["b"][1].endswith(":uid-b:12")
    assert rows["b"][2] == NOW
    # A version whose content differs is written with its time.
    b = _pod("b", "13", gpus=2, phase="Pending")
    write_fleet([_node()], [b], cluster_id=cluster, now=LATEST)
    assert _rows()["b"][0::2] == ("Pending", LATEST)


def test_rows_written_before_sources_were_kept_get_theirs_without_a_change() -> None:
    """After the upgrade every row's source is empty: the first poll decodes each pod, writes
    its source and keeps the row's last change."""
    cluster = settings_cluster().pk
    write_fleet([_node()], [_pod("a", "10")], cluster_id=cluster, now=NOW)
    ObservedPod.objects.update(decoded_from="")
    assert write_fleet([_node()], [_pod("a", "10")], cluster_id=cluster, now=LATER) == 1
    ((_phase, source, changed),) = _rows().values()
    assert source.endswith(":uid-a:10")
    assert changed == NOW
