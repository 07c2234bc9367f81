"""Benchmark: a steady-state poll of a large fleet, next to the floor measured in the same run.

    python bench/poll.py [--nodes 5000] [--pods 150000] [--claims 50000] [--changed 0.01]
                         [--clusters 1]

1. Starts the demo cluster in its own process with a generated fleet, its GPUs published
   through DRA too (a ResourceSlice per node, ``--claims`` ResourceClaims: ``--claims 0``
   leaves DRA out).
2. Floor: one plain HTTP GET of all nodes, of all non-terminal pods and of DRA's
   DeviceClasses, ResourceSlices and ResourceClaims, decoded with orjson.
3. First poll into empty observed tables.
4. Changes about 1% of the objects (node labels; pods and claims replaced), then polls
   again.
The defaults are the scale scenario's counts (``bench/scale.py``: 5,000 nodes, 150,000
pods, 50,000 claims). The last line is ``poll_s=… floor_s=… ratio=… first_ratio=…
peak_mb=… poll_cpu_s=… floor_cpu_s=… cpu_ratio=…``: the steady-state poll, the first
poll's ratio to the floor, and the bench process's peak resident memory (the portal's
side: the demo cluster is another process), which holds the first poll's listing and rows;
then the CPU time this process spent in the steady poll and in the floor, and their ratio:
on a shared machine, what the code costs alone (the database's and the demo cluster's CPU
are other processes').

With ``--clusters N`` (N > 1): N demo clusters, each registered as a cluster of the portal
(``bench/poll_clusters.py``); the last line is ``ratio=… unreachable_ratio=…``.

With ``--scenario``: the demo cluster serves the scale scenario's own objects
(``bench/scale_cluster.py``: its 5,000 nodes in 20 pools, 2,000 namespaces, the cohort tree
of 1,000 ClusterQueues and 2,000 LocalQueues, 50,000 workloads and their pods; no DRA), and the
portal knows the scenario's teams and queues, so the poll also lists the workloads and the
portal's objects and asks Kueue's visibility API for every ClusterQueue's line; the floor
makes the same requests the same way (every list one after the other, every ClusterQueue's
pending workloads as many at once as the poll asks them) and decodes them.
It changes 1% of the nodes, pods and workloads between the two polls; with
``QM_PROFILE=<file>`` it writes a cProfile of the steady poll there, with
``QM_PROFILE_FIRST=<file>`` one of the first poll.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
os.environ.setdefault("QM_EMBEDDED_DB_NAME", "quartermaster_bench")

import scale  # noqa: E402
from smoke import parse  # noqa: E402

DRA_LISTS = tuple(
    f"/apis/resource.k8s.io/v1/{plural}"
    for plural in ("deviceclasses", "resourceslices", "resourceclaims")
)


PODS_LIST = "/api/v1/pods?fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"


def floor(url: str, *, dra: bool) -> float:
    return read_all(url, ["/api/v1/nodes", PODS_LIST, *(DRA_LISTS if dra else ())])


def read_all(url: str, paths: list[str]) -> float:
    """GET each of ``paths`` and decode it with orjson, one after the other: seconds."""
    import orjson
    import urllib3

    http = urllib3.PoolManager()
    started = time.perf_counter()
    for path in paths:
        response = http.request("GET", url + path, preload_content=True)
        gc.disable()
        try:
            orjson.loads(response.data)
        finally:
            gc.enable()
    return time.perf_counter() - started


def scenario_floor(url: str, queues: list[str]) -> float:
    """The floor of a poll of the served scenario: the same LISTs as the poll's (nodes,
    non-terminal pods, the portal's objects by label, workloads, the two kinds of Events)
    and one visibility request per ClusterQueue, each decoded with orjson."""
    managed = "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dquartermaster"
    kueue = "/apis/kueue.x-k8s.io/v1beta2"
    visibility = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues"
    paths = [
        "/api/v1/nodes",
        PODS_LIST,
        *(f"/api/v1/{kind}?{managed}" for kind in ("namespaces", "resourcequotas", "limitranges")),
        f"/apis/scheduling.k8s.io/v1/priorityclasses?{managed}",
        *(
            f"{kueue}/{kind}?{managed}"
            for kind in ("resourceflavors", "cohorts", "clusterqueues", "localqueues")
        ),
        f"{kueue}/workloads",
        "/api/v1/events?fieldSelector=reason%3DFailedCreate",
        "/api/v1/events?fieldSelector=involvedObject.kind%3DWorkload",
    ]
    lines = [f"{visibility}/{name}/pendingworkloads" for name in queues]
    return read_all(url, paths) + read_together(url, lines)


def read_together(url: str, paths: list[str]) -> float:
    """GET each of ``paths`` and decode it with orjson, as many at once as the poll asks
    Kueue's visibility API (``loop.fetch.VISIBILITY_AT_ONCE``): seconds."""
    from concurrent.futures import ThreadPoolExecutor

    import orjson
    import urllib3

    from loop.fetch import VISIBILITY_AT_ONCE

    http = urllib3.PoolManager(maxsize=VISIBILITY_AT_ONCE)

    def read(path: str) -> None:
        orjson.loads(http.request("GET", url + path, preload_content=True).data)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=VISIBILITY_AT_ONCE) as pool:
        list(pool.map(read, paths))
    return time.perf_counter() - started


def start_scenario(*, smoke: bool) -> subprocess.Popen[str]:
    """The demo cluster serving the scale scenario (``bench/scale_cluster.py``)."""
    return subprocess.Popen(
        [sys.executable, "bench/scale_cluster.py", "--port", "0", *(["--small"] if smoke else [])],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def change_scenario(url: str, *, share: float) -> tuple[int, int, int]:
    """Relabel share x nodes, replace share x the GPU pods (delete + create on the same
    node) and relabel share x workloads, picked evenly from what the cluster lists."""
    import orjson
    import urllib3

    http = urllib3.PoolManager(maxsize=4)
    merge = {"Content-Type": "application/merge-patch+json"}
    label = orjson.dumps({"metadata": {"labels": {"bench.quartermaster.io/changed": "yes"}}})

    def some(path: str) -> list[dict[str, Any]]:
        items = orjson.loads(http.request("GET", url + path).data)["items"]
        count = max(1, int(len(items) * share))
        return items[:: max(1, len(items) // count)][:count]

    nodes = some("/api/v1/nodes")
    for node in nodes:
        name = node["metadata"]["name"]
        http.request("PATCH", f"{url}/api/v1/nodes/{name}", body=label, headers=merge)
    gpu_pods = [
        p
        for p in orjson.loads(http.request("GET", url + "/api/v1/pods").data)["items"]
        if p["spec"]["containers"][0]["resources"].get("requests")
    ]
    pods = gpu_pods[:: max(1, int(1 / share))]
    for pod in pods:
        meta = pod["metadata"]
        base = f"{url}/api/v1/namespaces/{meta['namespace']}/pods"
        http.request(
            "DELETE", f"{base}/{meta['name']}", body=orjson.dumps({"gracePeriodSeconds": 0})
        )
        new = {"metadata": {"name": f"{meta['name']}-b", "namespace": meta["namespace"]}}
        new["spec"] = {"nodeName": pod["spec"]["nodeName"], "containers": pod["spec"]["containers"]}
        http.request(
            "POST", base, body=orjson.dumps(new), headers={"Content-Type": "application/json"}
        )
    workloads = some("/apis/kueue.x-k8s.io/v1beta2/workloads")
    for w in workloads:
        meta = w["metadata"]
        path = (
            f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{meta['namespace']}/workloads/{meta['name']}"
        )
        http.request("PATCH", url + path, body=label, headers=merge)
    return len(nodes), len(pods), len(workloads)


def start_demo(*, nodes: int, pods: int, claims: int = 0) -> subprocess.Popen[str]:
    """A demo cluster in its own process with a generated fleet, on a free port."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devcluster",
            "--scenario",
            "empty",
            "--port",
            "0",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--claims",
            str(claims),
            "--retry-seconds",
            "3600",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def demo_url(demo: subprocess.Popen[str]) -> str:
    """The URL the demo cluster prints once it serves."""
    assert demo.stdout is not None
    return demo.stdout.readline().split()[-1]


def change_fleet(
    url: str, *, nodes: int, pods: int, share: float, claims: int = 0
) -> tuple[int, int]:
    """Relabel share x nodes, replace share x pods (delete + create on the same node) and
    share x claims (``change_claims``)."""
    import orjson
    import urllib3

    http = urllib3.PoolManager(maxsize=4)
    changed_nodes = max(1, int(nodes * share))
    step = max(1, nodes // changed_nodes)
    for index in range(0, nodes, step)[:changed_nodes]:
        body = orjson.dumps({"metadata": {"labels": {"nvidia.com/mig.config.state": "pending"}}})
        http.request(
            "PATCH",
            f"{url}/api/v1/nodes/gpu-node-{index:05d}",
            body=body,
            headers={"Content-Type": "application/merge-patch+json"},
        )
    changed_pods = max(1, int(pods * share))
    step = max(1, pods // changed_pods)
    for index in range(0, pods, step)[:changed_pods]:
        namespace, name = f"bench-{index % 20:02d}", f"job-{index:06d}"
        response = http.request("GET", f"{url}/api/v1/namespaces/{namespace}/pods/{name}")
        pod = orjson.loads(response.data)
        http.request(
            "DELETE",
            f"{url}/api/v1/namespaces/{namespace}/pods/{name}",
            body=orjson.dumps({"gracePeriodSeconds": 0}),
            headers={"Content-Type": "application/json"},
        )
        new = {
            "metadata": {
                "name": f"{name}-b",
                "namespace": namespace,
                "labels": pod["metadata"]["labels"],
            },
            "spec": {
                "nodeName": pod["spec"]["nodeName"],
                "containers": pod["spec"]["containers"],
                "tolerations": pod["spec"].get("tolerations") or [],
            },
        }
        http.request(
            "POST",
            f"{url}/api/v1/namespaces/{namespace}/pods",
            body=orjson.dumps(new),
            headers={"Content-Type": "application/json"},
        )
    change_claims(http, url, claims=claims, share=share)
    return changed_nodes, changed_pods


def change_claims(http: Any, url: str, *, claims: int, share: float) -> int:
    """Replace share x claims: each deleted and made anew under another name (pending)."""
    import orjson

    if not claims:
        return 0
    changed = max(1, int(claims * share))
    step = max(1, claims // changed)
    for index in range(0, claims, step)[:changed]:
        namespace, name = f"bench-{index % 20:02d}", f"claim-{index:06d}"
        base = f"{url}/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
        claim = orjson.loads(http.request("GET", f"{base}/{name}").data)
        http.request("DELETE", f"{base}/{name}")
        new = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"{name}-b", "namespace": namespace},
            "spec": claim["spec"],
        }
        http.request(
            "POST", base, body=orjson.dumps(new), headers={"Content-Type": "application/json"}
        )
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=scale.FULL.nodes)
    parser.add_argument("--pods", type=int, default=scale.FULL.pods)
    parser.add_argument("--claims", type=int, default=scale.FULL.claims)
    parser.add_argument("--changed", type=float, default=0.01)
    parser.add_argument("--clusters", type=int, default=1)
    parser.add_argument(
        "--scenario", action="store_true", help="poll the scale scenario's own objects"
    )
    args = parse(parser, {"nodes": 40, "pods": 200, "claims": 80})
    if args.clusters > 1:
        from poll_clusters import main as several  # lazy: a run of one needs none of it

        return several(args)
    if args.scenario:
        return scenario_main(args)

    demo = start_demo(nodes=args.nodes, pods=args.pods, claims=args.claims)
    try:
        url = demo_url(demo)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from cluster.models import (
            ObservedNode,
            ObservedPod,
            ObservedResourceClaim,
            ObservedResourceSlice,
        )
        from kube import connect
        from loop.poll import poll_cluster

        ObservedNode.objects.all().delete()
        ObservedPod.objects.all().delete()
        ObservedResourceSlice.objects.all().delete()
        ObservedResourceClaim.objects.all().delete()
        gateway = connect(url=url)

        floors = []
        for _ in range(2):
            cpu = time.process_time()
            floors.append((floor(url, dra=bool(args.claims)), time.process_time() - cpu))
        floor_s, floor_cpu = min(floors)
        before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        started = time.perf_counter()
        first = poll_cluster(gateway=gateway)
        first_s = time.perf_counter() - started
        assert first.ok, first.error
        print(
            f"fleet: {first.nodes} nodes, {first.pods} pods; observed rows: "
            f"{ObservedNode.objects.count()} nodes, {ObservedPod.objects.count()} pods, "
            f"{ObservedResourceSlice.objects.count()} ResourceSlices, "
            f"{ObservedResourceClaim.objects.count()} ResourceClaims"
        )
        print(
            f"first poll (empty tables): {first_s:.2f} s, {first.changed} rows written, "
            f"ratio to floor {first_s / floor_s:.2f}"
        )
        nodes_changed, pods_changed = change_fleet(
            url, nodes=args.nodes, pods=args.pods, share=args.changed, claims=args.claims
        )
        started, cpu = time.perf_counter(), time.process_time()
        steady = poll_cluster(gateway=gateway)
        poll_s, poll_cpu = time.perf_counter() - started, time.process_time() - cpu
        assert steady.ok, steady.error
        print(
            f"changed in the cluster: {nodes_changed} nodes, {pods_changed} pods and "
            f"{max(1, int(args.claims * args.changed)) if args.claims else 0} claims replaced; "
            f"steady poll wrote {steady.changed} rows"
        )
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak memory: {peak_mb:.0f} MB ({before_mb:.0f} MB after the floor's reads)")
        print(last_line(poll_s, floor_s, first_s, poll_cpu, floor_cpu))
    finally:
        demo.terminate()
        demo.wait()
    return 0


def last_line(
    poll_s: float, floor_s: float, first_s: float, poll_cpu: float, floor_cpu: float
) -> str:
    """The run's machine-readable last line (the peak memory read now)."""
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return (
        f"poll_s={poll_s:.2f} floor_s={floor_s:.2f} ratio={poll_s / floor_s:.2f} "
        f"first_ratio={first_s / floor_s:.2f} peak_mb={peak_mb:.0f} "
        f"poll_cpu_s={poll_cpu:.2f} floor_cpu_s={floor_cpu:.2f} "
        f"cpu_ratio={poll_cpu / floor_cpu:.2f}"
    )


def profiled(variable: str, call: Any, **kwargs: Any) -> Any:
    """``call(**kwargs)``, under cProfile written to the file the environment variable
    ``variable`` names if it is set."""
    if not os.environ.get(variable):
        return call(**kwargs)
    import cProfile

    profile = cProfile.Profile()
    try:
        return profile.runcall(call, **kwargs)
    finally:
        profile.dump_stats(os.environ[variable])


def scenario_main(args: argparse.Namespace) -> int:
    """The poll of the scale scenario the demo cluster serves, beside its floor."""
    demo = start_scenario(smoke=args.smoke)
    try:
        url = demo_url(demo)
        import django

        django.setup()
        import scale_db
        from django.core.management import call_command
        from django.utils import timezone

        s = scale.build(scale.SMOKE if args.smoke else scale.FULL)
        call_command("migrate", verbosity=0)
        call_command("flush", interactive=False, verbosity=0)
        scale_db._teams(s)  # the portal's teams, namespaces and queues: what it rendered
        scale_db._queues(s, timezone.now())
        from cluster.models import ObservedObject
        from kube import connect
        from loop.poll import poll_cluster

        ObservedObject.objects.all().delete()  # the first poll finds nothing observed
        gateway = connect(url=url)
        queues = [q.name for q in s.cluster_queues]
        floors = []
        for _ in range(2):
            cpu = time.process_time()
            floors.append((scenario_floor(url, queues), time.process_time() - cpu))
        floor_s, floor_cpu = min(floors)
        started, cpu = time.perf_counter(), time.process_time()
        first = profiled("QM_PROFILE_FIRST", poll_cluster, gateway=gateway)
        first_s, first_cpu = time.perf_counter() - started, time.process_time() - cpu
        assert first.ok, first.error
        print(
            f"first poll (empty tables): {first_s:.2f} s ({first_cpu:.2f} s CPU), "
            f"{first.changed} rows written"
        )
        changed = change_scenario(url, share=args.changed)
        started, cpu = time.perf_counter(), time.process_time()
        steady = profiled("QM_PROFILE", poll_cluster, gateway=gateway)
        poll_s, poll_cpu = time.perf_counter() - started, time.process_time() - cpu
        assert steady.ok, steady.error
        print(
            "changed in the cluster: {} nodes, {} pods, {} workloads; steady poll wrote {} "
            "rows".format(*changed, steady.changed)
        )
        print(last_line(poll_s, floor_s, first_s, poll_cpu, floor_cpu))
    finally:
        demo.terminate()
        demo.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
