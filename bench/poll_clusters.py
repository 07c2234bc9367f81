"""``python bench/poll.py --clusters N``: N large clusters polled side by side, as N worker
processes poll them, and one cluster's poll while the others do not answer.

1. Starts N demo clusters (each its own process and generated fleet) and registers each as a
   cluster of the portal (a token connection to its URL).
2. Floor: the plain GETs and orjson decoding of ``poll.floor``, for all N at once, one
   process per cluster (best of two).
3. First polls (empty observed tables), then about 1% of each fleet changed, then the N
   steady polls at once, one process per cluster: ``ratio`` = their wall time / the floor.
4. The first cluster's poll alone (best of three), then the other clusters' demo processes
   stopped and the N polls run at once again (best of three): ``unreachable_ratio`` = the
   first cluster's poll time then / alone.

The last line is ``ratio=… unreachable_ratio=…``.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import time
from collections.abc import Callable
from typing import Any

from poll import change_fleet, demo_url, floor, start_demo

# One job in a process of its own: (its item, the barrier to wait at once ready) -> (its
# seconds, what it reports). The work timed starts when every process is ready.
Job = Callable[[Any, Any], tuple[float, str]]


def _child(job: Job, index: int, item: Any, barrier: Any, results: Any) -> None:
    try:
        seconds, said = job(item, barrier)
    except Exception as exc:  # reported to the parent, which stops the run
        barrier.abort()
        results.put((index, -1.0, f"failed: {exc!r}"))
        return
    results.put((index, seconds, said))


def side_by_side(job: Job, items: list[Any]) -> tuple[float, list[tuple[float, str]]]:
    """``job`` for each item in its own process (forked), all started at once: the wall time
    from the start to the last one done, and each one's (seconds, words) in item order."""
    from django.db import connections  # lazy: the parent set Django up before this

    connections.close_all()  # each process opens its own
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(len(items) + 1)
    results = context.Queue()
    processes = [
        context.Process(target=_child, args=(job, index, item, barrier, results))
        for index, item in enumerate(items)
    ]
    for process in processes:
        process.start()
    barrier.wait(timeout=300)
    started = time.perf_counter()
    got = [results.get(timeout=900) for _ in items]
    wall = time.perf_counter() - started
    for process in processes:
        process.join()
    ordered = [(seconds, said) for _, seconds, said in sorted(got)]
    failed = [said for seconds, said in ordered if seconds < 0]
    assert not failed, failed
    return wall, ordered


def floor_job(url: str, barrier: Any) -> tuple[float, str]:
    import orjson  # noqa: F401  # lazy: imported before the start, not timed
    import urllib3  # noqa: F401

    barrier.wait()
    return floor(url, dra=False), url  # its clusters publish no DRA objects


def poll_job(cluster_id: int, barrier: Any) -> tuple[float, str]:
    from cluster.connection import gateway_for  # lazy: in the forked process, set up
    from cluster.models import Cluster
    from loop.poll import poll_cluster

    cluster = Cluster.objects.get(pk=cluster_id)
    gateway = gateway_for(cluster)
    barrier.wait()
    started = time.perf_counter()
    run = poll_cluster(gateway=gateway, cluster=cluster)
    seconds = time.perf_counter() - started
    said = f"{cluster.name}: {run.nodes} nodes, {run.pods} pods, {run.changed} rows written"
    return seconds, said if run.ok else f"{cluster.name}: failed: {run.error}"


def register(urls: list[str]) -> list[int]:
    """A token connection for each demo cluster (``bench-1``...), its observed rows emptied."""
    from cluster import credentials  # lazy: Django is set up by now
    from cluster.models import Cluster, ObservedNode, ObservedPod

    ids = []
    for index, url in enumerate(urls, start=1):
        cluster, _ = Cluster.objects.update_or_create(
            name=f"bench-{index}",
            defaults={
                "display_name": f"Bench {index}",
                "connection": Cluster.Connection.TOKEN,
                "api_url": url,
                "verify_tls": False,
                "credential": credentials.encrypt("bench"),
            },
        )
        ObservedNode.objects.filter(cluster=cluster).delete()
        ObservedPod.objects.filter(cluster=cluster).delete()
        ids.append(cluster.pk)
    return ids


def report(what: str, wall: float, each: list[tuple[float, str]]) -> None:
    times = ", ".join(f"{seconds:.2f}" for seconds, _ in each)
    print(f"{what}: {wall:.2f} s for all (each: {times})")


def main(args: argparse.Namespace) -> int:
    demos = [start_demo(nodes=args.nodes, pods=args.pods) for _ in range(args.clusters)]
    try:
        urls = [demo_url(demo) for demo in demos]
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(f"{args.clusters} clusters of {args.nodes} nodes and {args.pods} pods")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        ids = register(urls)
        floor_s = min(side_by_side(floor_job, urls)[0] for _ in range(2))
        print(f"floor, all {args.clusters} at once: {floor_s:.2f} s")
        wall, each = side_by_side(poll_job, ids)
        report("first polls (empty tables)", wall, each)
        for url in urls:
            change_fleet(url, nodes=args.nodes, pods=args.pods, share=args.changed)
        polls_s, each = side_by_side(poll_job, ids)
        report("steady polls", polls_s, each)
        for _, said in each:
            print(f"  {said}")
        alone = min(side_by_side(poll_job, ids[:1])[1][0][0] for _ in range(3))
        print(f"bench-1 alone: {alone:.2f} s (best of 3)")
        print(f"{args.clusters} steady polls at once / bench-1 alone: {polls_s / alone:.2f}")
        for demo in demos[1:]:
            demo.terminate()
            demo.wait()
        logging.getLogger("loop.poll").setLevel(logging.ERROR)  # their failures, below
        runs = [side_by_side(poll_job, ids)[1] for _ in range(3)]
        beside = min(run[0][0] for run in runs)
        print(f"bench-1 while the {args.clusters - 1} others do not answer: {beside:.2f} s")
        for seconds, said in runs[-1][1:]:
            print(f"  {said[:110]} ({seconds:.2f} s)")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"ratio={polls_s / floor_s:.2f} unreachable_ratio={beside / alone:.2f}")
    finally:
        for demo in demos:
            demo.terminate()
            demo.wait()
    return 0
