"""The scale scenario served by the demo cluster (``bench/scale_cluster.py``), at its smoke
size: the portal's poll reads the scenario's own nodes, pools, pods, queues and workloads,
and Kueue's visibility API gives each waiting workload its place in line as the scenario
orders a queue (priority first, then age)."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.models import ObservedNode, ObservedPod, ObservedWorkload
from cluster.scope import settings_cluster_id
from kube import connect
from loop.poll import poll_cluster
from queues.models import ClusterQueue

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import scale  # noqa: E402
import scale_cluster  # noqa: E402

pytestmark = pytest.mark.django_db


@pytest.fixture
def served() -> Iterator[Any]:
    demo = scale_cluster.start(scale.SMOKE)
    yield demo
    demo.stop()


def test_a_poll_reads_the_scale_scenario_the_demo_cluster_serves(
    settings: Any, served: Any
) -> None:
    s = scale.build(scale.SMOKE)
    settings.KUBE_URL = served.url
    # The portal asks Kueue for the places in line of the queues it knows.
    ClusterQueue.objects.bulk_create(ClusterQueue(name=q.name) for q in s.cluster_queues)
    run = poll_cluster(gateway=connect(url=served.url, token="any"))
    assert run.ok, run.error

    cluster = settings_cluster_id()
    nodes = ObservedNode.objects.on(cluster)
    assert nodes.count() == len(s.nodes)
    pools = defaultdict(int)
    for labels in nodes.values_list("labels", flat=True):
        pools[labels["quartermaster.io/pool"]] += 1
    assert dict(pools) == {p: len(n) for p, n in s.nodes_by_pool.items()}
    # The GPU pods are kept (the CPU pods the scenario adds are not the portal's business).
    kept = ObservedPod.objects.on(cluster)
    assert kept.count() == sum(1 for p in s.pods() if p.resource) == sum(w.pods for w in s.admitted)

    workloads = {f"{w.namespace}/{w.name}": w for w in ObservedWorkload.objects.on(cluster)}
    assert len(workloads) == len(s.workloads)
    for w in s.workloads:
        row = workloads[w.key]
        assert row.admitted == bool(w.flavor), w.key
        assert row.requests == {w.resource: w.amount}, w.key
        if w.flavor:
            assert (row.cluster_queue, row.flavors) == (w.cluster_queue, {w.resource: w.flavor})
    # Places in line: per ClusterQueue, priority first, then the older first.
    line = sorted(s.waiting, key=lambda w: (w.cluster_queue, -w.priority, -w.created))
    place: dict[str, int] = defaultdict(int)
    for w in line:
        assert workloads[w.key].position == place[w.cluster_queue], w.key
        place[w.cluster_queue] += 1
