"""An admitted workload whose explanation is settled (its pods ready, none Pending, nothing
in its way stored) is not explained again at the next poll: what the poll stores is what
explaining every row again gives, the world unchanged or changed, the clock moved on."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from cluster.models import ObservedPod, ObservedWorkload
from cluster.scope import settings_cluster_id
from diagnostics.explainer import _settled, explain_cluster
from tests.factories import ObservedNodeFactory, ObservedPodFactory

pytestmark = pytest.mark.django_db
GPU = "nvidia.com/gpu"
NOW = dt.datetime(2026, 12, 6, 9, 0, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=7)
SHORT = (
    "couldn't assign flavors to pod set main: insufficient unused quota for "
    f"{GPU} in flavor a100, 1 more needed"
)


def _workload(name: str, *, admitted: bool = True, **values: Any) -> None:
    ObservedWorkload.objects.create(
        namespace="team-a",
        name=name,
        queue_name="team-a-train",
        cluster_queue="cq-a" if admitted else "",
        admitted=admitted,
        requests={GPU: 1},
        created_at=NOW - dt.timedelta(hours=2),
        admitted_at=NOW - dt.timedelta(minutes=5) if admitted else None,
        last_changed=NOW,
        **values,
    )


def _pod(name: str, workload: str, *, phase: str = "Running", gpus: int = 1) -> None:
    ObservedPodFactory(
        name=name,
        phase=phase,
        workload_name=workload,
        node_name="" if phase == "Pending" else "gpu-node-a",
        gpu_requests={GPU: gpus},
        pending_message=f"0/1 nodes are available: 1 Insufficient {GPU}."
        if phase == "Pending"
        else "",
    )


def _world() -> None:
    ObservedNodeFactory(name="gpu-node-a", allocatable={GPU: 8}, allocated={GPU: 4})
    _workload("running")  # settled after its first explanation
    _pod("running-0", "running")
    _workload("charged-later")  # settled, then its pod asks more than Kueue charged
    _pod("charged-later-0", "charged-later")
    _workload("not-ready", pods_ready=False)  # its words count the minutes since admitted
    _pod("not-ready-0", "not-ready")
    _workload("stuck")
    _pod("stuck-0", "stuck", phase="Pending")
    _workload("charged-less")
    _pod("charged-less-0", "charged-less", gpus=2)
    _workload("silent", admitted=False)  # Kueue wrote no reason: how long it waited
    _workload("short", admitted=False, reason="Pending", message=SHORT)


def _stored() -> dict[tuple[str, str], Any]:
    return {
        **{
            ("workload", n): e for n, e in ObservedWorkload.objects.values_list("name", "explained")
        },
        **{("pod", n): e for n, e in ObservedPod.objects.values_list("name", "explained")},
    }


def _as_explained_anew(now: dt.datetime) -> dict[tuple[str, str], Any]:
    """Every row explained again from nothing at ``now`` (nothing settled)."""
    ObservedWorkload.objects.update(explained=None, explained_digest=None)
    ObservedPod.objects.update(explained=None, explained_digest=None)
    explain_cluster(settings_cluster_id(), now)
    return _stored()


def _settled_names() -> set[str]:
    cluster = settings_cluster_id()
    return set(ObservedWorkload.objects.filter(_settled(cluster)).values_list("name", flat=True))


def test_settled_explanations_are_kept_and_equal_explaining_everything_again() -> None:
    cluster = settings_cluster_id()
    _world()
    explain_cluster(cluster, NOW)
    assert _settled_names() == {"running", "charged-later"}
    # The clock moved on, nothing else: what the next poll stores is a full explanation's.
    explain_cluster(cluster, LATER)
    kept = _stored()
    assert kept[("workload", "running")] == {"why": None, "estimate": None, "cluster_queue": "cq-a"}
    assert "ago" in kept[("workload", "not-ready")]["why"]["cause"]
    assert kept == _as_explained_anew(LATER)
    # The world changed: a settled workload's pod is Pending now, another's asks more than
    # Kueue charged, a not-ready one's pods are ready, a waiting one is admitted.
    explain_cluster(cluster, NOW)
    assert _settled_names() == {"running", "charged-later"}
    ObservedPod.objects.filter(name="running-0").update(phase="Pending", node_name="")
    ObservedPod.objects.filter(name="charged-later-0").update(gpu_requests={GPU: 3})
    ObservedWorkload.objects.filter(name="not-ready").update(pods_ready=True)
    ObservedWorkload.objects.filter(name="short").update(
        admitted=True, cluster_queue="cq-a", admitted_at=NOW, reason="", message=""
    )
    explain_cluster(cluster, LATER)
    changed = _stored()
    assert changed[("workload", "running")]["why"] is not None
    assert "charged" in changed[("workload", "charged-later")]["why"]["cause"]
    assert changed == _as_explained_anew(LATER)
