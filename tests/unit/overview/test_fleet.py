"""The Fleet page at scale: each pool summed up in the database (checked against the same sums
done node by node in Python over a random fleet), summed again when the poll or the health
collection changed something, and the node lists found by name or label, bad searches
refused next to the field."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter, defaultdict
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from changes.facts import fleet_facts, queue_quotas, shortfalls_now
from changes.impact import QueueQuota, flavor_shortfalls
from cluster.decode import gpu_offer
from cluster.models import Drift, ObservedNode
from cluster.scope import settings_cluster, settings_cluster_id
from fleet.membership import pool_of
from fleet.models import NodePool
from health.models import NodeHealth
from overview import selectors
from tests.factories import (
    ClusterQueueFactory,
    ObservedNodeFactory,
    ResourceFlavorFactory,
)

pytestmark = pytest.mark.django_db

AMOUNTS = [16, "16", "8", "0", 0, "junk", "-1", "1.5", 4]
# Why a node needs attention, as the summaries count them.
REASONS = ("not_ready", "cordoned", "mig_failed", "reconfiguring", "drifted", "unhealthy")


def pools() -> list[NodePool]:
    """Pools whose labels overlap (a node with pool=a and zone=z1 is in "a", the first by
    name) and one without labels (it selects no node)."""
    return [
        NodePool.objects.create(name="a", node_selector={"pool": "a"}, mig_config="all-3g.40gb"),
        NodePool.objects.create(name="b", node_selector={"pool": "b"}),
        NodePool.objects.create(name="c", node_selector={"zone": "z1"}, mig_config="all-balanced"),
        NodePool.objects.create(name="d", node_selector={}),
    ]


def random_fleet(seed: int, size: int = 60) -> list[ObservedNode]:
    rng = random.Random(seed)
    now = timezone.now()
    nodes = []
    for index in range(size):
        labels = {"kubernetes.io/hostname": f"n{index}"}
        if rng.random() < 0.8:
            labels["pool"] = rng.choice("abx")
        if rng.random() < 0.4:
            labels["zone"] = rng.choice(["z1", "z2"])
        allocatable: dict[str, Any] = {"cpu": "64", "memory": "512Gi"}
        for resource in rng.sample(
            ["nvidia.com/gpu", "nvidia.com/mig-3g.40gb", "nvidia.com/mig-1g.10gb"], 2
        ):
            allocatable[resource] = rng.choice(AMOUNTS)
        allocated = {r: rng.choice([0, 1, 3, "2", "x"]) for r in allocatable if rng.random() < 0.6}
        nodes.append(
            ObservedNodeFactory(
                name=f"n{index:03d}",
                gpu_product=rng.choice(["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", ""]),
                gpu_count=rng.choice([0, 4, 8]),
                mig_config=rng.choice(["all-3g.40gb", "all-balanced", ""]),
                mig_config_state=rng.choice(["success", "success", "failed", "pending", ""]),
                labels=labels,
                allocatable=allocatable,
                allocated=allocated,
                ready=rng.random() < 0.85,
                unschedulable=rng.random() < 0.15,
                gone_since=now if rng.random() < 0.05 else None,
            )
        )
        if rng.random() < 0.5:
            NodeHealth.objects.create(
                node=f"n{index:03d}",
                observed_at=now,
                worst=rng.choice(["ok", "info", "warning", "critical"]),
                error=rng.choice(["", "", "connection refused"]),
            )
    return nodes


def expected(rows: list[NodePool], nodes: list[ObservedNode]) -> dict[str, dict[str, Any]]:
    """The summaries as the node rows say, node by node in Python."""
    health = {h.node: h for h in NodeHealth.objects.all()}
    out: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"counts": Counter(), "resources": Counter(), "layouts": Counter()}
    )
    for node in nodes:
        if node.gone_since is not None:
            continue
        pool = pool_of(node.labels, [p for p in rows if p.cluster_id == node.cluster_id])
        entry = out[pool.name if pool else selectors.NO_POOL]
        h = health.get(node.name)
        drifted = bool(pool and pool.mig_config and node.mig_config != pool.mig_config)
        unhealthy = h is not None and h.worst in ("warning", "critical")
        flags = {
            "nodes": True,
            "not_ready": not node.ready,
            "cordoned": node.unschedulable,
            "mig_failed": node.mig_config_state == "failed",
            "reconfiguring": node.mig_config_state == "pending",
            "drifted": drifted,
            "unhealthy": unhealthy,
            "exporter_errors": h is not None and bool(h.error),
            f"health-{h.worst if h else 'none'}": True,
        }
        flags["attention"] = any(flags[k] for k in REASONS)
        entry["counts"].update(k for k, v in flags.items() if v)
        entry["counts"]["gpus"] += node.gpu_count
        for resource, amount in gpu_offer(node.allocatable).items():
            held = node.allocated.get(resource, 0)
            entry["resources"][(resource, "allocatable")] += amount
            entry["resources"][(resource, "allocated")] += int(held) if str(held).isdigit() else 0
        entry["layouts"][(node.mig_config, node.gpu_product, node.gpu_count)] += 1
    return out


def summed(summary: selectors.PoolSummary) -> dict[str, Any]:
    counts = Counter(
        {
            k: getattr(summary, k)
            for k in ("nodes", "gpus", *REASONS, "attention", "exporter_errors")
        }
    )
    counts.update({f"health-{k}": v for k, v in summary.health.items()})
    resources: Counter[tuple[str, str]] = Counter()
    for r in summary.resources:
        resources[(r.resource, "allocatable")] += r.allocatable
        resources[(r.resource, "allocated")] += r.allocated
    layouts = Counter(
        {(lo.mig_config, lo.gpu_product, lo.gpu_count): lo.nodes for lo in summary.layouts}
    )
    return {"counts": +counts, "resources": +resources, "layouts": layouts}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_database_sums_each_pool_as_its_nodes_say(seed: int) -> None:
    rows = pools()
    nodes = random_fleet(seed)
    want = expected(rows, nodes)
    got = {s.name: summed(s) for s in selectors.sum_pools(selectors.Pools.load())}
    # Every pool is listed (one selecting nothing too); the nodes of no pool only if any.
    assert [name for name in got if name != selectors.NO_POOL] == ["a", "b", "c", "d"]
    assert (selectors.NO_POOL in got) == (selectors.NO_POOL in want)
    for name, sums in got.items():
        mine = want.get(name, {"counts": Counter(), "resources": Counter(), "layouts": Counter()})
        assert sums["counts"] == +mine["counts"], name
        assert sums["resources"] == +mine["resources"], name
        assert sums["layouts"] == mine["layouts"], name


def test_a_layout_other_than_the_pools_is_marked_drift() -> None:
    pools()
    ObservedNodeFactory(name="on", labels={"pool": "a"}, mig_config="all-3g.40gb")
    ObservedNodeFactory(name="off", labels={"pool": "a"}, mig_config="all-balanced")
    (a,) = [s for s in selectors.sum_pools(selectors.Pools.load()) if s.name == "a"]
    assert [(lo.mig_config, lo.nodes, lo.drift) for lo in a.layouts] == [
        ("all-3g.40gb", 1, False),
        ("all-balanced", 1, True),
    ]
    assert (a.drifted, a.attention) == (1, 1)


def test_the_summaries_follow_the_poll_the_health_collection_and_the_pools(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any
) -> None:
    """The pools are summed and drawn again only when something they are made of changed;
    each such change shows on the next page."""
    (_, b, *_) = pools()
    node = ObservedNodeFactory(name="n1", labels={"pool": "b"}, ready=True)
    client.force_login(team_a_member)

    def card() -> str:
        page = client.get("/fleet/").content.decode()
        start = page.index(f'id="pool-{b.pk}"')
        return page[start : page.index("</section>", start)]

    assert "<strong>1 node</strong>" in card() and "NotReady" not in card()
    # The poll stamps the rows it changes.
    ObservedNode.objects.filter(pk=node.pk).update(
        ready=False, last_changed=timezone.now() + dt.timedelta(seconds=1)
    )
    assert '<span class="tag bad">NotReady</span> 1' in card()
    NodeHealth.objects.create(node="n1", observed_at=timezone.now(), worst="critical")
    assert '<span class="tag bad">critical</span> 1' in card()
    NodePool.objects.filter(name="b").update(node_selector={"pool": "elsewhere"})
    assert "No node matches this pool's labels." in card()
    ObservedNodeFactory(name="n2", labels={"pool": "elsewhere"})
    assert "<strong>1 node</strong>" in card()  # n2, which the poll just found


def test_queues_promising_more_than_the_fleet_are_found_in_the_database_as_in_python() -> None:
    rng = random.Random(7)
    for index in range(30):
        ObservedNodeFactory(
            name=f"n{index}",
            labels={"pool": rng.choice("ab"), "gpu": rng.choice(["a100", "h100"])},
            allocatable={"nvidia.com/gpu": rng.choice(AMOUNTS), "cpu": "64"},
            gone_since=timezone.now() if index % 9 == 0 else None,
        )
    ResourceFlavorFactory(name="a100", node_labels={"gpu": "a100"})
    ResourceFlavorFactory(name="h100-a", node_labels={"gpu": "h100", "pool": "a"})
    ResourceFlavorFactory(name="any", node_labels={})
    for flavor, nominal in (("a100", "40"), ("h100-a", "1000"), ("any", "5")):
        ClusterQueueFactory(
            resource_groups=[
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}],
                        }
                    ],
                }
            ]
        )
    found = shortfalls_now(settings_cluster_id())
    assert found == flavor_shortfalls(fleet_facts(cluster=settings_cluster()))
    assert [s.flavor for s in found] == ["h100-a"]


def test_the_capacity_behind_the_flavors_is_kept_until_the_nodes_or_flavors_change(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any
) -> None:
    """The Fleet page keeps what the nodes behind each flavor offer under the nodes' stamps
    and the flavors' labels: a node the poll changes, or a flavor's new labels, count on the
    next view."""
    node = ObservedNodeFactory(
        name="n1", labels={"gpu": "h100"}, allocatable={"nvidia.com/gpu": "8"}
    )
    flavor = ResourceFlavorFactory(name="h100", node_labels={"gpu": "h100"})
    ClusterQueueFactory(
        resource_groups=[
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "6"}]}
                ],
            }
        ]
    )
    client.force_login(team_a_member)

    def promised_more() -> bool:
        return (
            "Queues promise capacity the fleet does not have"
            in client.get("/fleet/").content.decode()
        )

    assert not promised_more()
    # The poll stamps the rows it changes.
    ObservedNode.objects.filter(pk=node.pk).update(
        allocatable={"nvidia.com/gpu": "4"}, last_changed=timezone.now() + dt.timedelta(seconds=1)
    )
    assert promised_more()
    flavor.node_labels = {}
    flavor.save()
    ObservedNodeFactory(name="n2", labels={}, allocatable={"nvidia.com/gpu": "4"})
    assert not promised_more()  # both nodes behind the flavor now
    type(flavor).objects.filter(pk=flavor.pk).update(node_labels={"gpu": "h100"})
    assert promised_more()


def test_the_queues_gpu_quotas_are_walked_in_the_database_as_quota_entries_walks_them() -> None:
    """Every GPU quota entry of every queue, in the order of the queues' names and of the
    groups, flavors and resources as written; other resources, amounts that are no whole
    number and queues without groups are left out."""
    from queues.models import ClusterQueue
    from queues.rules import quota_entries

    def quota(name: str, amount: Any) -> dict[str, Any]:
        return {"name": name, "nominalQuota": amount}

    ClusterQueueFactory(
        name="b-queue",
        resource_groups=[
            {
                "coveredResources": ["nvidia.com/gpu", "cpu"],
                "flavors": [
                    {
                        "name": "h100",
                        "resources": [quota("nvidia.com/gpu", "8"), quota("cpu", "64")],
                    },
                    {"name": "a100", "resources": [quota("nvidia.com/gpu", 4)]},
                ],
            },
            {
                "coveredResources": ["nvidia.com/mig-1g.10gb"],
                "flavors": [{"name": "mig", "resources": [quota("nvidia.com/mig-1g.10gb", "14")]}],
            },
        ],
    )
    ClusterQueueFactory(
        name="a-queue",
        resource_groups=[
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "h100", "resources": [quota("nvidia.com/gpu", "1500m")]}],
            }
        ],
    )
    ClusterQueueFactory(name="c-queue", resource_groups=[])
    expected = [
        QueueQuota(cq.name, flavor, entry["name"], int(entry["nominalQuota"]))
        for cq in ClusterQueue.objects.order_by("name")
        for _, flavor, entry in quota_entries(cq.resource_groups)
        if entry["name"].startswith("nvidia.com/") and entry["nominalQuota"] != "1500m"
    ]
    assert queue_quotas(settings_cluster_id()) == expected
    assert [(q.cluster_queue, q.flavor) for q in expected] == [
        ("b-queue", "h100"),
        ("b-queue", "a100"),
        ("b-queue", "mig"),
    ]


def test_nodes_are_found_by_name_words_and_labels(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any
) -> None:
    pools()
    ObservedNodeFactory(name="gpu-a100-01", labels={"pool": "a", "rack": "r1"})
    ObservedNodeFactory(name="gpu-a100-02", labels={"pool": "a", "rack": "r2"})
    ObservedNodeFactory(name="gpu-h100-01", labels={"pool": "b", "rack": "r1"})
    ObservedNodeFactory(name="spare-01", labels={})
    client.force_login(team_a_member)

    def names(query: str) -> list[str]:
        response = client.get(f"/fleet/nodes/?{query}")
        assert response.status_code == 200
        body = response.content.decode()
        return [n.name for n in ObservedNode.objects.order_by("name") if f">{n.name}</a>" in body]

    assert names("q=rack%3Dr1") == ["gpu-a100-01", "gpu-h100-01"]
    assert names("q=gpu+01") == ["gpu-a100-01", "gpu-h100-01"]
    assert names("q=rack%3Dr1&pool=a") == ["gpu-a100-01"]
    assert names("pool=%28no+pool%29") == ["spare-01"]
    assert names("pool=d") == []
    assert names("q=A100") == ["gpu-a100-01", "gpu-a100-02"]


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [
        ("q=rack%3D%21r1", "q", "is not a label as key=value: the value a valid label value"),
        ("q=%3Dr1", "q", "the key name part must be non-empty"),
        ("q=rack%3Dr1+rack%3Dr2", "q", "A node carries one value of rack"),
        ("q=" + "x" * 300, "q", "at most 253 characters"),
        ("pool=nope", "pool", "Select a valid choice"),
    ],
)
def test_a_bad_search_is_refused_next_to_its_field(
    client: Client, team_a_member: Any, query: str, field: str, words: str
) -> None:
    pools()
    ObservedNodeFactory(name="gpu-a100-01", labels={"pool": "a"})
    client.force_login(team_a_member)
    for headers in ({}, {"HX-Request": "true"}):
        response = client.get(f"/fleet/nodes/?{query}", headers=headers)
        body = response.content.decode()
        assert response.status_code == 400
        assert words in body
        assert f'name="{field}"' in body and 'aria-invalid="true"' in body
        assert "gpu-a100-01</a>" not in body and "Fix the search above." in body
        assert ("<html" in body) == (not headers)


def test_htmx_gets_a_pools_list_alone_to_open_it_in_place(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any
) -> None:
    (a, *_) = pools()
    ObservedNodeFactory(name="gpu-a100-01", labels={"pool": "a"})
    client.force_login(team_a_member)
    fleet = client.get("/fleet/").content.decode()
    assert f'<details id="pool-{a.pk}-nodes"' in fleet and 'hx-trigger="toggle once"' in fleet
    assert 'href="/fleet/nodes/?pool=a"' in fleet  # without JS: the list's own page
    response = client.get("/fleet/nodes/?pool=a", headers={"HX-Request": "true"})
    assert "HX-Request" in response["Vary"]
    body = response.content.decode()
    assert body.lstrip().startswith(f'<div id="pool-{a.pk}-node-list"')
    assert "gpu-a100-01</a>" in body and '<input type="hidden" name="pool" value="a">' in body


def test_the_fleet_page_shows_the_first_drift_rows_and_counts_the_rest(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any
) -> None:
    now = timezone.now()
    Drift.objects.bulk_create(
        Drift(kind="mig_layout", subject=f"n{i:03d}", field="f", first_seen=now, last_seen=now)
        for i in range(30)
    )
    client.force_login(team_a_member)
    page = client.get("/fleet/").content.decode()
    assert "n019" in page and "n020" not in page
    assert "The first 20 of 30." in page
