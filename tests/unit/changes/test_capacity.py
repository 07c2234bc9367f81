"""The fleet's capacity hook (``changes.facts.capacity_for``) sums in the database what the
pure functions of ``changes.impact`` sum over every node: the same answers, for every
flavor or only the ones asked, in one round trip; and a queue's promises count what every
other queue of its cluster promises, summed there too."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.utils import timezone

from changes.facts import _flavors, capacity_for, node_facts
from changes.impact import Fleet, ceiling, flavor_capacity, flavor_ceiling
from cluster.models import Cluster
from cluster.scope import settings_cluster_id
from fleet.capacity import FleetCapacity, fleet_capacity
from tests.factories import ObservedNodeFactory, ResourceFlavorFactory

pytestmark = pytest.mark.django_db

PRODUCTS = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-A30", "Unknown-GPU", ""]
RESOURCES = [
    "nvidia.com/gpu",
    "nvidia.com/mig-3g.40gb",
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/mig-1g.6gb",
    "cpu",
]
CONFIGS = ["all-disabled", "all-3g.40gb", "all-1g.10gb", "mixed"]


def _fleet(rng: random.Random, cluster_id: int, nodes: int) -> None:
    """Nodes of several products, pools, layouts and offers (some 0, some not a number,
    some non-GPU), a few of them gone."""
    for i in range(nodes):
        product = rng.choice(PRODUCTS)
        labels = {
            "pool": rng.choice(["a", "b", "c"]),
            "nvidia.com/mig.config": rng.choice(CONFIGS),
        }
        if product:
            labels["nvidia.com/gpu.product"] = product
        allocatable: dict[str, Any] = {"cpu": "64", "memory": "512Gi"}
        for resource in RESOURCES[:4]:
            if rng.random() < 0.5:
                allocatable[resource] = rng.choice(["0", "1", "4", "16", 7, "2.5", "x"])
        ObservedNodeFactory(
            cluster_id=cluster_id,
            name=f"node-{cluster_id}-{nodes}-{i}",
            gpu_product=product,
            gpu_count=rng.choice([0, 1, 4, 8]),
            labels=labels,
            allocatable=allocatable,
            gone_since=timezone.now() if rng.random() < 0.1 else None,
        )


def _whole_fleet_in_python(resources: set[str], cluster_id: int) -> FleetCapacity:
    """What the hook answered before it summed in the database: every node loaded, every
    flavor and every ceiling computed by the pure functions."""
    fleet = Fleet(nodes=node_facts(cluster_id), flavors=_flavors(cluster_id))
    return FleetCapacity(
        behind=dict(flavor_capacity(fleet.flavors, fleet.nodes)),
        ceiling={r: ceiling(fleet, r) for r in resources},
        flavor_ceiling={
            (flavor, r): flavor_ceiling(fleet, labels, r)
            for flavor, labels in fleet.flavors.items()
            for r in resources
        },
        known=bool(fleet.nodes),
    )


@pytest.mark.parametrize("seed", range(4))
def test_the_capacity_summed_in_the_database_is_the_pure_functions_answer(seed: int) -> None:
    rng = random.Random(seed)
    cid = settings_cluster_id()
    other = Cluster.objects.create(name="other", display_name="Other", connection="in_cluster")
    _fleet(rng, cid, 40)
    _fleet(rng, other.pk, 10)  # another cluster's nodes back nothing here
    ResourceFlavorFactory(name="any", node_labels={})
    ResourceFlavorFactory(name="pool-a", node_labels={"pool": "a"})
    ResourceFlavorFactory(
        name="a-3g", node_labels={"pool": "a", "nvidia.com/mig.config": "all-3g.40gb"}
    )
    ResourceFlavorFactory(name="h100", node_labels={"nvidia.com/gpu.product": PRODUCTS[1]})
    ResourceFlavorFactory(name="nowhere", node_labels={"pool": "z"})
    resources = set(RESOURCES)

    expected = _whole_fleet_in_python(resources, cid)
    assert capacity_for(resources, cid) == expected
    assert fleet_capacity(resources, cid) == expected  # the hook, as the services call it

    # Narrowed to some flavors: exactly the whole fleet's rows of those flavors.
    for asked in ({"pool-a"}, {"a-3g", "h100"}, {"nowhere"}, {"absent"}, set()):
        narrowed = capacity_for(resources, cid, flavors=asked)
        assert narrowed.behind == {k: v for k, v in expected.behind.items() if k[0] in asked}
        assert narrowed.flavor_ceiling == {
            k: v for k, v in expected.flavor_ceiling.items() if k[0] in asked
        }
        assert narrowed.ceiling == expected.ceiling
        assert narrowed.known
        # Without the whole fleet's ceiling (a queue's editor): the flavors' rows alike.
        alone = capacity_for(resources, cid, flavors=asked, whole=False)
        assert (alone.behind, alone.flavor_ceiling) == (narrowed.behind, narrowed.flavor_ceiling)
        assert alone.ceiling == {} and alone.known


def test_no_live_node_is_nothing_known() -> None:
    ObservedNodeFactory(gone_since=timezone.now())
    assert not capacity_for({"nvidia.com/gpu"}, settings_cluster_id()).known


def test_the_capacity_takes_one_round_trip_whatever_the_fleet(
    django_assert_num_queries: Any,
) -> None:
    cid = settings_cluster_id()
    ResourceFlavorFactory(name="pool-a", node_labels={"pool": "a"})
    ResourceFlavorFactory(name="pool-b", node_labels={"pool": "b"})
    for size in (3, 60):
        _fleet(random.Random(size), cid, size)
        with django_assert_num_queries(1):
            capacity_for({"nvidia.com/gpu", "nvidia.com/mig-3g.40gb"}, cid, flavors={"pool-a"})


def test_a_queues_promises_count_every_other_queue_of_its_resources_and_no_other() -> None:
    """``promises_of`` reads only the queues that have a quota of one of the edited
    queue's resources (found by the database): their sums are those of every queue."""
    from queues.models import ClusterQueue
    from queues.services import promises_of
    from tests.factories import ClusterQueueFactory

    def groups(*quotas: tuple[str, str, str]) -> list[dict[str, Any]]:
        return [
            {
                "coveredResources": [r],
                "flavors": [{"name": f, "resources": [{"name": r, "nominalQuota": n}]}],
            }
            for f, r, n in quotas
        ]

    ObservedNodeFactory(labels={"pool": "a"}, allocatable={"nvidia.com/gpu": "8"})
    ResourceFlavorFactory(name="pool-a", node_labels={"pool": "a"})
    edited = ClusterQueue.objects.create(
        name="mine", resource_groups=groups(("pool-a", "nvidia.com/gpu", "2"))
    )
    ClusterQueueFactory(resource_groups=groups(("pool-a", "nvidia.com/gpu", "3")))
    ClusterQueueFactory(resource_groups=groups(("pool-b", "nvidia.com/gpu", "5")))
    ClusterQueueFactory(
        resource_groups=groups(("pool-a", "nvidia.com/mig-3g.40gb", "7"), ("pool-a", "cpu", "9"))
    )
    shown = promises_of(ClusterQueue.objects.get(pk=edited.pk), edited)
    assert list(shown) == [("pool-a", "nvidia.com/gpu")]
    promise = shown[("pool-a", "nvidia.com/gpu")]
    assert (promise.promised, promise.offered, promise.ceiling) == (5, 8, 8)


SPELLINGS = ["1", "2", 3, "10", "500m", "1k", "2Ki", 0]  # as text and as JSON numbers


@pytest.mark.parametrize("seed", range(3))
def test_what_other_queues_promise_is_summed_in_the_database_as_each_queue_parses_it(
    seed: int,
) -> None:
    """``queues.selectors.promised_by_others``: the database counts the other queues'
    nominal quotas of the edited queue's resources by their spelling; the sums are those of
    every other queue of the cluster parsed (``ClusterQueue.quota``), another cluster's
    queues left out."""
    from portal.infra.round_trips import read_together
    from queues.models import ClusterQueue
    from queues.selectors import promised_by_others, promised_by_others_read
    from tests.factories import ClusterQueueFactory

    rng = random.Random(seed)
    cid = settings_cluster_id()
    other = Cluster.objects.create(name="other", display_name="Other", connection="in_cluster")

    def groups() -> list[dict[str, Any]]:
        out = []
        for flavor in rng.sample(["pool-a", "pool-b", "pool-c"], rng.randint(0, 3)):
            resources = rng.sample(RESOURCES, rng.randint(1, 3))
            quotas = [{"name": r, "nominalQuota": rng.choice(SPELLINGS)} for r in resources]
            out.append(
                {"coveredResources": resources, "flavors": [{"name": flavor, "resources": quotas}]}
            )
        return out

    queues = [ClusterQueueFactory(resource_groups=groups()) for _ in range(30)]
    ClusterQueueFactory(cluster=other, resource_groups=groups())
    edited = rng.choice(queues)
    resources = set(rng.sample(RESOURCES, 2))
    expected: dict[tuple[str, str], Any] = {}
    for queue in ClusterQueue.objects.filter(cluster_id=cid).exclude(pk=edited.pk):
        for (flavor, resource), amount in queue.quota().items():
            if resource in resources:
                expected[(flavor, resource)] = expected.get((flavor, resource), 0) + amount
    rows = read_together(promised_by_others_read(edited, cid, resources))[0]
    assert promised_by_others(rows) == expected
    assert len(rows) <= 3 * len(resources) * len(SPELLINGS)  # counted, not one row a queue
