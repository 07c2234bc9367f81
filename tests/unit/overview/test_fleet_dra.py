"""GPUs allocated through DRA on the Fleet and node pages, and in usage: what the recorded
slices publish (tests/data/dra: two whole H100s, an A100 partitionable into 3g.40gb devices
with shared counters) with the recorded claims holding both H100s and one 3g.40gb slice,
each said "by DRA" beside the device plugin's resources; another team's claim unnamed."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from changes import mig, planning
from cluster.models import Cluster, ObservedNode
from cluster.scope import settings_cluster_id
from fleet.models import NodePool
from loop.fetch import DraListing
from loop.write import write_dra, write_fleet
from overview import selectors
from tests.factories import NamespaceFactory
from usage.models import DRA_GPUS
from usage.sampling import pool_rows, team_rows

pytestmark = pytest.mark.django_db
RECORDED = Path(__file__).resolve().parents[2] / "data" / "dra"
NOW = dt.datetime(2026, 12, 6, 9, 0, tzinfo=dt.UTC)


def recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text())


def running(pod: dict[str, Any], node: str) -> dict[str, Any]:
    """A recorded pod as the kubelet would have it once started on ``node``."""
    return {
        **pod,
        "metadata": {**pod["metadata"], "resourceVersion": ""},
        "spec": {**pod["spec"], "nodeName": node},
        "status": {**pod["status"], "phase": "Running", "conditions": []},
    }


@pytest.fixture
def dra_pool(team_a: Any) -> NodePool:
    """The DRA pool's two nodes, the slices and classes, the waiting scenario's claims, and
    two of its pods running (an H100 claim, the claim made from a template on the A100)."""
    cluster = settings_cluster_id()
    NamespaceFactory(name="rc-dra", team=team_a)
    pool = NodePool.objects.create(name="dra", node_selector={"pool": "dra"})
    waiting = recorded("waiting.json")
    listing = DraListing(
        recorded("deviceclasses.json"), recorded("resourceslices.json"), waiting["claims"]
    )
    write_dra(listing, cluster_id=cluster, now=NOW)
    pods = {p["metadata"]["name"]: p for p in waiting["pods"]}
    nodes = [
        {
            "metadata": {"name": n, "labels": {"pool": "dra"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        for n in ("gpu-h100-01", "gpu-a100-01")
    ]
    write_fleet(
        nodes,
        [
            running(pods["rc-h100-a"], "gpu-h100-01"),
            running(pods["rc-templated"], "gpu-a100-01"),
        ],
        cluster_id=cluster,
        now=NOW,
    )
    return pool


def test_the_pool_card_counts_devices_by_dra_with_what_counters_leave(dra_pool: Any) -> None:
    pools = selectors.Pools.load(settings_cluster_id())
    (summary,) = [s for s in selectors.sum_pools(pools) if s.name == "dra"]
    assert summary.dra_gpus == 3
    assert [(o.product, o.what, o.devices, o.taken, o.available) for o in summary.dra] == [
        ("NVIDIA A100-SXM4-80GB", "whole GPU", 1, 0, 0),
        ("NVIDIA A100-SXM4-80GB", "3g.40gb", 2, 1, 1),
        ("NVIDIA H100 80GB HBM3", "whole GPU", 2, 2, 0),
    ]


def test_the_fleet_page_and_the_node_page_say_by_dra(
    client: Client, dra_pool: Any, team_a_member: Any, team_b: Any, team_b_member: Any
) -> None:
    client.force_login(team_a_member)
    fleet = client.get("/fleet/").content.decode()
    assert "Devices by DRA" in fleet and "3 GPUs published" in fleet
    assert "3g.40gb of NVIDIA A100-SXM4-80GB by DRA: 1 of 2 allocated, 1 could be had now" in fleet
    node = client.get("/fleet/nodes/gpu-a100-01/").content.decode()
    assert "GPUs by DRA" in node and "GPUs by device plugin" not in node  # DRA only
    assert (
        '1 \N{MULTIPLICATION SIGN} NVIDIA A100-SXM4-80GB <span class="muted">by DRA</span> '
        "\N{EM DASH} MIG carved per claim" in node
    )
    assert "No GPU resource offered by a device plugin here" in node
    assert (
        'aria-label="gpu-0-counter-set (by DRA): 3g.40gb (in use), counters left: 4 of 8 '
        'memory slices"' in node
    )
    assert "4 of 8 memory slices left" in node
    assert "blocked by counters" in node  # the whole A100
    made = next(
        c["metadata"]["name"]
        for c in recorded("waiting.json")["claims"]
        if c["metadata"]["name"].startswith("rc-templated-gpu-")
    )
    assert f"claim rc-dra/{made}" in node
    NamespaceFactory(name="team-b-work", team=team_b)
    client.force_login(team_b_member)
    theirs = client.get("/fleet/nodes/gpu-a100-01/").content.decode()
    assert made not in theirs and "by another team" in theirs


def test_usage_counts_dra_gpus_and_mig_slices_with_the_gpu_share_rule(dra_pool: Any) -> None:
    """Each device held under the DeviceClass its claim asked for (the recorded claims':
    gpu.nvidia.com, mig.nvidia.com), the pool's DRA GPUs as their own row."""
    cluster = settings_cluster_id()
    pools = {(s.owner, s.resource, s.flavor): s for s in pool_rows(NOW, cluster)}
    gpus = pools[("dra", "nvidia.com/gpu", DRA_GPUS)]
    whole = pools[("dra", "nvidia.com/gpu", "gpu.nvidia.com")]
    mig = pools[("dra", "nvidia.com/mig-3g.40gb", "mig.nvidia.com")]
    assert (gpus.capacity, gpus.used) == (3, 0)
    assert (whole.capacity, whole.used, whole.gpu_share) == (0, 2, 2)
    assert mig.used == 1 and mig.gpu_share == pytest.approx(4 / 8)  # 3g.40gb: 4 of 8 memory
    teams = {(s.scope, s.resource, s.flavor): s for s in team_rows(NOW, cluster)}
    assert teams[("rc-dra", "nvidia.com/gpu", "gpu.nvidia.com")].used == 1
    assert teams[("rc-dra", "nvidia.com/mig-3g.40gb", "mig.nvidia.com")].gpu_share == (
        pytest.approx(4 / 8)
    )


def test_a_teams_home_lists_its_running_dra_pods(
    client: Client, dra_pool: Any, team_a_member: Any
) -> None:
    client.force_login(team_a_member)
    home = client.get("/").content.decode()
    assert "<code>rc-h100-a</code>: 1 DRA claim," in home


def test_the_node_rows_show_a_dra_only_nodes_devices(
    client: Client, dra_pool: Any, team_a_member: Any
) -> None:
    client.force_login(team_a_member)
    page = client.get("/fleet/nodes/?pool=dra").content.decode()
    assert "no GPU resources offered" not in page
    a100 = page[page.index('id="node-') : page.index("gpu-h100-01")]  # rows: a100 first
    assert "1 \N{MULTIPLICATION SIGN} NVIDIA A100-SXM4-80GB" in a100 and "by DRA" in a100
    assert (
        'aria-label="3g.40gb of NVIDIA A100-SXM4-80GB by DRA: 1 of 2 allocated, 1 could be '
        'had now"' in a100
    )
    assert "counters left: 4 of 8 memory slices" in a100 and "MIG carved per claim (DRA)" in a100
    assert 'aria-label="gpu-0-counter-set (by DRA): 3g.40gb (in use), counters left' in a100
    assert 'aria-label="whole GPU of NVIDIA H100 80GB HBM3 by DRA: 2 of 2 allocated' in page


def test_the_planner_leaves_a_node_served_by_dra_alone_and_says_why(dra_pool: Any) -> None:
    cluster = settings_cluster_id()
    ObservedNode.objects.on(cluster).filter(name="gpu-a100-01").update(
        gpu_product="NVIDIA-A100-SXM4-80GB", gpu_count=1
    )
    problem, _ = planning.gather(Cluster.objects.get(pk=cluster))
    (a100,) = [n for n in problem.nodes if n.name == "gpu-a100-01"]
    assert a100.settled == (
        "gpu-a100-01 serves its GPUs through DRA: its MIG devices are the DRA driver's (carved "
        "per claim), not a MIG config: left as it is."
    )


def test_a_mig_change_on_a_node_served_by_dra_is_refused_with_why(
    dra_pool: Any, team_a: Any, platform_admin: Any
) -> None:
    with pytest.raises(ValidationError) as refused:
        mig.request_mig_change(
            actor=platform_admin,
            team=team_a,
            nodes=["gpu-a100-01"],
            target_config="all-3g.40gb",
            reason="3g slices",
            cluster=Cluster.objects.get(pk=settings_cluster_id()),
        )
    assert refused.value.message_dict["nodes"] == [
        "gpu-a100-01 serves its GPUs through DRA: MIG devices there are the DRA driver's, "
        "carved per claim, and a MIG config does not change them. Leave them out of the change."
    ]


def test_a_gpu_tainted_for_health_needs_attention_and_is_not_free(
    client: Client, team_a: Any, team_a_member: Any
) -> None:
    """tests/data/dra/tainted.json (a real 1.36 API server's): gpu-0 of the H100 node tainted
    ``gpu.nvidia.com/xid=79:NoSchedule`` by the driver's health check, gpu-1 allocated."""
    cluster = settings_cluster_id()
    NamespaceFactory(name="rc-dra", team=team_a)
    NodePool.objects.create(name="dra", node_selector={"pool": "dra"})
    tainted = recorded("tainted.json")
    listing = DraListing(recorded("deviceclasses.json"), [tainted["slice"]], tainted["claims"])
    write_dra(listing, cluster_id=cluster, now=NOW)
    node = {
        "metadata": {"name": "gpu-h100-01", "labels": {"pool": "dra"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    write_fleet([node], [], cluster_id=cluster, now=NOW)
    pools = selectors.Pools.load(cluster)
    (summary,) = [s for s in selectors.sum_pools(pools) if s.name == "dra"]
    assert [(o.devices, o.taken, o.available, o.tainted) for o in summary.dra] == [(2, 1, 0, 1)]
    assert (summary.dra_gpus, summary.dra_tainted) == (2, 1)

    client.force_login(team_a_member)
    fleet = client.get("/fleet/").content.decode()
    assert '<span class="tag warn">1 GPU tainted</span>' in fleet
    assert "DRA taint</span> 1 GPU with devices kept from claims" in fleet
    assert "(0 free now, 1 tainted, NVIDIA H100 80GB HBM3)" in fleet
    page = client.get("/fleet/nodes/gpu-h100-01/").content.decode()
    assert "GPU-h100-01-0 (by DRA): whole GPU (tainted gpu.nvidia.com/xid=79:NoSchedule)" in page
    assert '<span class="tag warn">tainted gpu.nvidia.com/xid=79:NoSchedule</span>' in page
    assert '0 could be had now, <span class="tag warn">1 tainted</span>' in page
