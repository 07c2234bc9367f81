"""Shared by the web benchmarks: a fleet and teams in a database of their own, a gunicorn
server, and a concurrent load generator."""

from __future__ import annotations

import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent


def fill(nodes: int, teams: int) -> str:
    """A fresh database with the fleet and the teams; returns an admin's API token."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.utils import timezone

    from cluster.models import ObservedNode
    from portal.access.tokens import create_token
    from portal.models import PlatformRole
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


def serve(port: int, settings: str) -> subprocess.Popen[bytes]:
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
            "--keep-alive",  # the bench's connections stay with their processes between rounds
            "60",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": settings},
    )
    return server


def spread(base: str, server: subprocess.Popen[bytes], count: int) -> list[HTTPConnection]:
    """``count`` kept-alive connections to ``base``, as many to each of the server's worker
    processes (give or take one). A kept-alive connection stays with the process that
    accepted it, and which process accepts is a race: left to it, a few connections can
    split unevenly, and a round whose one process serves most of them waits on that
    process's interpreter lock, a whole side slow for no reason of its own. The connections
    of many browsers spread over the processes evenly; so do these. Each connection is
    opened, sent one request (so that a process has accepted it) and kept if the process
    that holds its other end (read from the operating system's socket table) has fewer
    than its share; the others are closed once every connection is placed."""
    import psutil

    workers = psutil.Process(server.pid).children()
    if not workers:
        raise SystemExit("the server has no worker processes")
    share = -(-count // len(workers))
    placed: dict[int, list[HTTPConnection]] = {worker.pid: [] for worker in workers}
    spare: list[HTTPConnection] = []
    host, port = urlsplit(base).hostname or "127.0.0.1", urlsplit(base).port
    try:
        deadline = time.monotonic() + 60  # a process still starting accepts nothing yet
        while sum(map(len, placed.values())) < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"{count} connections not spread over {len(workers)} processes")
            connection = HTTPConnection(host, port, timeout=120)
            connection.request("GET", "/healthz")
            connection.getresponse().read()
            own = connection.sock.getsockname()
            holder = next(
                worker.pid
                for worker in workers
                for held in worker.net_connections("tcp")
                if held.raddr and tuple(held.raddr) == tuple(own)
            )
            if len(placed[holder]) < share:
                placed[holder].append(connection)
            else:
                spare.append(connection)
                time.sleep(0.01)
    finally:
        for connection in spare:
            connection.close()
    print(
        f"{count} kept-alive connections over {len(workers)} server processes: "
        + " + ".join(str(len(held)) for held in placed.values())
    )
    return [connection for held in placed.values() for connection in held]


def load(
    connections: list[HTTPConnection],
    path: str,
    pages: int,
    *,
    requests: int,
    token: str = "",
    cookie: str = "",
) -> tuple[list[float], float]:
    """``requests`` GETs of random pages, one client thread per connection (each on its own
    connection): latencies (s), wall time."""
    headers = {"Authorization": f"Bearer {token}"} if token else {"Cookie": cookie}
    latencies: list[float] = []
    lock = threading.Lock()
    per_client = requests // len(connections)
    failures: list[str] = []

    def client(seed: int, connection: HTTPConnection) -> None:
        rng = random.Random(seed)
        mine = []
        for _ in range(per_client):
            joiner = "&" if "?" in path else "?"
            url = path + (f"{joiner}page={rng.randint(1, pages)}" if pages > 1 else "")
            started = time.perf_counter()
            try:
                connection.request("GET", url, headers=headers)
                response = connection.getresponse()
                body = response.read()
            except (OSError, HTTPException) as error:
                # not reopened: a new connection would land on either process
                failures.append(f"{url}: the kept connection failed: {error!r}")
                return
            mine.append(time.perf_counter() - started)
            if response.status != 200:
                failures.append(f"{url}: {response.status} {body[:200]!r}")
        with lock:
            latencies.extend(mine)

    threads = [
        threading.Thread(target=client, args=(seed, connection))
        for seed, connection in enumerate(connections)
    ]
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


def wait_until_serving(base: str, path: str, server: subprocess.Popen[bytes]) -> None:
    import urllib3

    deadline = time.monotonic() + 60
    while True:
        try:
            urllib3.request("GET", f"{base}{path}", retries=False)
            return
        except urllib3.exceptions.HTTPError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start") from None
            time.sleep(0.2)


def too_few(requests: int, clients: int) -> str | None:
    """Why ``compare`` cannot measure ``requests`` per page and side over ``clients``
    (each of its two rounds sends ``requests // 2``, split evenly among the clients), or
    None: for a bench to say before it fills its database."""
    if requests // 2 >= clients:
        return None
    return (
        f"--requests {requests} over {clients} clients leaves a client of a round without a "
        f"request: give at least {2 * clients}"
    )


def compare(
    base: str,
    server: subprocess.Popen[bytes],
    targets: dict[str, tuple[str, str, int, dict[str, str]]],
    *,
    clients: int,
    requests: int,
) -> dict[str, float]:
    """For each target (name -> portal path, baseline path, pages, auth as ``token`` or
    ``cookie``): ``clients`` threads, each on a kept-alive connection of its own, the
    connections spread evenly over the server's processes (``spread``) and the same for
    every target and side; warm both sides (every process serves each page before it is
    measured), then two rounds with the sides' order swapped. Prints a line per target
    (p50 and p99 of each side, and the p99 ratio against the target's own baseline) and,
    last, ``p99_ms=… baseline_p99_ms=… ratio=…`` over all. Returns each target's p99 ratio."""
    if (refused := too_few(requests, clients)) is not None:
        raise SystemExit(refused)
    everything: dict[str, list[float]] = {"portal": [], "baseline": []}
    ratios: dict[str, float] = {}
    connections = spread(base, server, clients)
    for name, (portal_path, baseline_path, pages, auth) in targets.items():
        paths = {"portal": portal_path, "baseline": baseline_path}
        sides: dict[str, tuple[list[float], float]] = {"portal": ([], 0.0), "baseline": ([], 0.0)}
        for path in paths.values():
            load(connections, path, pages, requests=clients * 8, **auth)
        for order in (("portal", "baseline"), ("baseline", "portal")):
            for side in order:
                latencies, wall = load(
                    connections, paths[side], pages, requests=requests // 2, **auth
                )
                sides[side] = (sides[side][0] + latencies, sides[side][1] + wall)
        line = [f"{name:<17}"]
        for side in ("portal", "baseline"):
            latencies, wall = sides[side]
            everything[side].extend(latencies)
            line.append(
                f"{side} p50={p(latencies, 50):.1f} ms p99={p(latencies, 99):.1f} ms "
                f"{len(latencies) / wall:.1f} req/s"
            )
        ratios[name] = p(sides["portal"][0], 99) / p(sides["baseline"][0], 99)
        line.append(f"p99 ratio {ratios[name]:.2f}")
        print("  ".join(line), flush=True)
    portal_p99, baseline_p99 = p(everything["portal"], 99), p(everything["baseline"], 99)
    print(
        f"p99_ms={portal_p99:.1f} baseline_p99_ms={baseline_p99:.1f} "
        f"ratio={portal_p99 / baseline_p99:.2f}"
    )
    for connection in connections:
        connection.close()
    return ratios
