"""Benchmark: the API's list endpoints under concurrent load, next to minimal DRF list views.

    python bench/api.py [--nodes 5000] [--teams 1000] [--clients 8] [--requests 600]

1. Fills a database of its own with 5,000 observed GPU nodes and 1,000 teams (one namespace
   each with a quota and limits, three allowed priority classes) and a platform admin's
   API token.
2. Serves the portal with gunicorn (2 processes x 4 threads), plus minimal DRF list views
   over the same rows with the same fields and page size (``bench/api_urls.py``).
3. For each list (nodes, teams, namespaces), ``--clients`` threads send ``--requests``
   requests for random pages, to the portal's endpoint (token authentication, scoping,
   rate limiting, filters, ordering) and to the baseline, in alternating rounds.

Last line: ``p99_ms=… baseline_p99_ms=… ratio=…`` over all the lists. Goal: ratio ≤ 1.5.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE)]
os.environ["DJANGO_SETTINGS_MODULE"] = "api_settings"
os.environ.setdefault("QM_EMBEDDED_DB_NAME", "quartermaster_bench")
# The rate limit is checked on every request, but never reached here.
os.environ["QM_API_RATE"] = "100000000/minute"

LISTS = {
    "nodes": ("/api/v1/nodes/", "/baseline/nodes/"),
    "teams": ("/api/v1/teams/", "/baseline/teams/"),
    "namespaces": ("/api/v1/namespaces/", "/baseline/namespaces/"),
}
PAGE_SIZE = 50


def fill(nodes: int, teams: int) -> str:
    """A fresh database with the fleet and the teams; returns an admin's API token."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.utils import timezone

    from fleet.models import ObservedNode
    from portal.models import PlatformRole
    from portal.tokens import create_token
    from tenants.models import LimitRangeItem, Namespace, PriorityClass, QuotaItem, Team

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    now = timezone.now()
    shapes = [
        ("NVIDIA-A100-SXM4-80GB", "all-3g.40gb", {"nvidia.com/mig-3g.40gb": 16}),
        (
            "NVIDIA-A100-SXM4-80GB",
            "all-balanced",
            {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8},
        ),
        ("NVIDIA-H100-80GB-HBM3", "all-disabled", {"nvidia.com/gpu": 8}),
        ("NVIDIA-L40S", "", {"nvidia.com/gpu": 4}),
    ]
    rows = []
    for index in range(nodes):
        product, config, gpus = shapes[index % len(shapes)]
        allocatable = {"cpu": "126", "memory": "1031689Mi", "pods": "110", **gpus}
        rows.append(
            ObservedNode(
                name=f"gpu-node-{index:05d}",
                uid=f"uid-{index}",
                gpu_product=product,
                gpu_count=8 if "L40S" not in product else 4,
                mig_capable="A100" in product or "H100" in product,
                mig_strategy="mixed" if config else "",
                mig_config=config,
                mig_config_state="success" if config else "",
                pool_label=f"pool-{index % 10}",
                capacity=allocatable,
                allocatable=allocatable,
                allocated={key: 0 for key in gpus},
                labels={
                    "kubernetes.io/hostname": f"gpu-node-{index:05d}",
                    "nvidia.com/gpu.product": product,
                    "nvidia.com/mig.config": config,
                    "quartermaster.io/pool": f"pool-{index % 10}",
                },
                taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                ready=True,
                first_seen=now,
                last_changed=now,
            )
        )
    ObservedNode.objects.bulk_create(rows, batch_size=1000)
    classes = [
        PriorityClass.objects.create(name=name, value=value)
        for name, value in (("train-low", 100), ("train", 1000), ("inference", 10000))
    ]
    team_rows = Team.objects.bulk_create(
        [Team(slug=f"team-{index:04d}", name=f"Team {index}") for index in range(teams)]
    )
    Team.allowed_priority_classes.through.objects.bulk_create(
        [
            Team.allowed_priority_classes.through(team_id=team.pk, priorityclass_id=pc.pk)
            for team in team_rows
            for pc in classes
        ]
    )
    namespaces = Namespace.objects.bulk_create(
        [Namespace(name=f"{team.slug}-ml", team=team) for team in team_rows]
    )
    QuotaItem.objects.bulk_create(
        [
            QuotaItem(namespace=ns, resource=resource, hard=hard)
            for ns in namespaces
            for resource, hard in (
                ("requests.nvidia.com/gpu", "8"),
                ("requests.cpu", "64"),
                ("requests.memory", "512Gi"),
                ("pods", "100"),
            )
        ]
    )
    LimitRangeItem.objects.bulk_create(
        [
            LimitRangeItem(namespace=ns, limit_type="Container", resource=resource, default=default)
            for ns in namespaces
            for resource, default in (("cpu", "2"), ("memory", "8Gi"))
        ]
    )
    admin = User.objects.create_user("bench-admin", password="unused")
    PlatformRole.objects.create(user=admin, role=PlatformRole.Role.ADMIN)
    _, text = create_token(user=admin, name="bench")
    return text


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "portal.wsgi:application",
            "--pythonpath",
            str(HERE),
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "4",
            "--worker-class",
            "gthread",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "api_settings"},
    )
    return server


def load(
    base: str, path: str, pages: int, *, clients: int, requests: int, token: str
) -> tuple[list[float], float]:
    """``requests`` GETs of random pages from ``clients`` threads: latencies (s), wall time."""
    import urllib3

    http = urllib3.PoolManager(maxsize=clients)
    headers = {"Authorization": f"Bearer {token}"}
    latencies: list[float] = []
    lock = threading.Lock()
    per_client = requests // clients
    failures: list[str] = []

    def client(seed: int) -> None:
        rng = random.Random(seed)
        mine = []
        for _ in range(per_client):
            url = f"{base}{path}?page={rng.randint(1, pages)}"
            started = time.perf_counter()
            response = http.request("GET", url, headers=headers)
            mine.append(time.perf_counter() - started)
            if response.status != 200:
                failures.append(f"{url}: {response.status} {response.data[:200]!r}")
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{len(failures)} failed requests, first: {failures[0]}")
    return latencies, wall


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=600)
    args = parser.parse_args()

    import django

    django.setup()
    token = fill(args.nodes, args.teams)
    port = free_port()
    server = serve(port)
    base = f"http://127.0.0.1:{port}"
    try:
        import urllib3

        deadline = time.monotonic() + 60
        while True:
            try:
                urllib3.request("GET", f"{base}/baseline/teams/", retries=False)
                break
            except urllib3.exceptions.HTTPError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.2)
        rows = {"nodes": args.nodes, "teams": args.teams, "namespaces": args.teams}
        everything: dict[str, list[float]] = {"portal": [], "baseline": []}
        print(
            f"{args.nodes} nodes, {args.teams} teams; {args.clients} clients; "
            f"{args.requests} requests per list and side, two alternating rounds"
        )
        for name, (portal_path, baseline_path) in LISTS.items():
            pages = max(1, rows[name] // PAGE_SIZE)
            sides: dict[str, tuple[list[float], float]] = {
                "portal": ([], 0.0),
                "baseline": ([], 0.0),
            }
            # warm both sides, then alternate which goes first
            for path in (portal_path, baseline_path):
                load(
                    base, path, pages, clients=args.clients, requests=args.clients * 4, token=token
                )
            for order in (("portal", "baseline"), ("baseline", "portal")):
                for side in order:
                    path = portal_path if side == "portal" else baseline_path
                    latencies, wall = load(
                        base,
                        path,
                        pages,
                        clients=args.clients,
                        requests=args.requests // 2,
                        token=token,
                    )
                    sides[side] = (sides[side][0] + latencies, sides[side][1] + wall)
            line = [f"{name:<11}"]
            for side in ("portal", "baseline"):
                latencies, wall = sides[side]
                everything[side].extend(latencies)
                line.append(
                    f"{side} p50={p(latencies, 50):.1f} ms p99={p(latencies, 99):.1f} ms "
                    f"{len(latencies) / wall:.0f} req/s"
                )
            line.append(f"p99 ratio {p(sides['portal'][0], 99) / p(sides['baseline'][0], 99):.2f}")
            print("  ".join(line))
        portal_p99, baseline_p99 = p(everything["portal"], 99), p(everything["baseline"], 99)
        print(
            f"p99_ms={portal_p99:.1f} baseline_p99_ms={baseline_p99:.1f} "
            f"ratio={portal_p99 / baseline_p99:.2f}"
        )
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
