"""Benchmark: the main pages under concurrent load, each next to a minimal Django page
over the same rows (its own bare baseline).

    python bench/pages.py [--nodes 5000] [--teams 1000] [--changes 300] [--workloads 50000]
                          [--clients 8] [--requests 1000] [--only home,fleet,...]
    python bench/pages.py --scale [--changes 300] [--clients 8] [--requests 1000]
    python bench/pages.py [--scale] --reuse [--only ...]   (the database of an earlier run)

1. Fills a database of its own (``bench/loadkit.py``): 5,000 observed GPU nodes in ten
   node pools (one intends a MIG config half its nodes are not on; GPU health for one node
   in four, a warning on one in a hundred), 1,000 teams with a namespace, quota and limits;
   a team lead of two teams with 20 Pending pods; an approver; ``--changes`` MIG change
   requests waiting for approval, each with its impact assessment; the cluster polled every
   ``QM_POLL_SECONDS`` for the last hour, the last poll a few seconds ago, and polled on
   while the bench runs (the pages read the newest polls to tell how fresh their data is,
   as in production); then vacuumed and analyzed, as autovacuum keeps a database in
   service.
2. Serves the portal with production settings (DEBUG off, cached templates) under gunicorn
   (2 processes x 4 threads), plus minimal Django pages over the same rows
   (``bench/pages_urls.py``: one query and one template loop each).
3. ``--clients`` threads, each on a kept-alive connection of its own (spread evenly over the
   server's processes), send ``--requests`` requests to each page and its baseline in
   alternating rounds: the lead's home, the Fleet page (the pools summed up), one pool's
   node list (random pages of 50), the approver's MIG change inbox, the lead's
   ``/api/v1/waiting/`` (against the home's baseline), the approver's Workloads list over
   ``--workloads`` Kueue workloads (random pages of 50 among all of them, the newest
   first). A thousand a side, so that a p99 is the tenth slowest request, not the second
   of 200.

With ``--scale`` the database holds the scale scenario instead (``bench/scale.py``, written
by ``bench/scale_db.py``: 5,000 nodes in 20 pools, 1,000 teams, the cohort tree of 1,000
ClusterQueues, 50,000 workloads, 150,000 pods; its own sizes, so ``--nodes``, ``--teams``
and ``--workloads`` do not count; ``--smoke``: its smoke size), and the pages are issue 39's:
the home of a lead whose team has 25 waiting workloads, the Queues page, a ClusterQueue's
page, the approver's Workloads list and workspace, and the Fleet page, each beside a bare
page over the same rows.

Prints each page's p50 and p99 against its own baseline's; the p99 ratio over all pages
(which the slowest page dominates); last line ``worst_ratio=… fleet_html_kb=…``: the worst
page's p99 ratio, and the size of the Fleet page's HTML. Goal: every page within 2x its
baseline, the Fleet page under 250 KB.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE)]
os.environ["DJANGO_SETTINGS_MODULE"] = "pages_settings"
os.environ.setdefault("QM_EMBEDDED_DB_NAME", "quartermaster_bench")

import scale  # noqa: E402
import scale_db  # noqa: E402
from loadkit import compare, fill, free_port, serve, too_few, wait_until_serving  # noqa: E402
from smoke import parse  # noqa: E402

POOLS = 10
PAGES = {  # name -> (who, portal, baseline, pages)
    "home": ("lead", "/", "/baseline/home/", 1),
    "fleet": ("lead", "/fleet/", "/baseline/fleet/", 1),
    "fleet-nodes": ("lead", "/fleet/nodes/?pool=pool-3", "/baseline/nodes/?pool=pool-3", 0),
    "inbox": ("approver", "/changes/", "/baseline/inbox/", 1),
    "waiting": ("lead", "/api/v1/waiting/", "/baseline/home/", 1),
    "workloads": ("approver", "/workloads/", "/baseline/workloads/", 0),
}
SCALE_QUEUE = "cq-0-000"  # the lead's team's queue (its namespaces' LocalQueues point at it)
SCALE_COHORT = "cohort-0"  # SCALE_QUEUE's cohort: 100 ClusterQueues of the 1,000
SCALE_PAGES = {  # issue 39's pages over the scale scenario
    "home": ("lead", "/", "/baseline/home/", 1),
    # The Queues page with one cohort open, and with none (a line per cohort): both read
    # every ClusterQueue and its status for the cohorts' lines, as the baseline does.
    "queues": ("lead", f"/queues/?cohort={SCALE_COHORT}", "/baseline/queues/", 1),
    "queues-cohorts": ("lead", "/queues/", "/baseline/queues/", 1),
    "cluster-queue": (
        "admin",
        f"/queues/cluster-queues/{SCALE_QUEUE}/edit/",
        f"/baseline/cluster-queues/{SCALE_QUEUE}/",
        1,
    ),
    "workloads": ("approver", "/workloads/", "/baseline/workloads/", 0),
    "workspace": ("approver", "/workspace/", "/baseline/inbox/", 1),
    "fleet": ("lead", "/fleet/", "/baseline/fleet/", 1),
}


def add_pools_and_health(nodes: int) -> None:
    """Ten node pools over the nodes' pool labels (pool-0 intends all-3g.40gb, which half its
    nodes are not on), and GPU health for one node in four (a warning on one in a hundred)."""
    from django.utils import timezone

    from fleet.models import NodePool
    from health.models import NodeHealth

    NodePool.objects.bulk_create(
        NodePool(
            name=f"pool-{index}",
            node_selector={"quartermaster.io/pool": f"pool-{index}"},
            mig_config="all-3g.40gb" if index == 0 else "",
        )
        for index in range(POOLS)
    )
    now = timezone.now()
    NodeHealth.objects.bulk_create(
        (
            NodeHealth(
                node=f"gpu-node-{index:05d}",
                observed_at=now,
                gpus=[{"index": gpu, "util": 50.0, "xid": 0} for gpu in range(8)],
                findings=[{"gpu": 0, "severity": "warning", "title": "GPU 0: 88 °C"}]
                if index % 100 == 0
                else [],
                worst="warning" if index % 100 == 0 else "ok",
            )
            for index in range(0, nodes, 4)
        ),
        batch_size=1000,
    )


def answered_poll(started_at: Any) -> Any:
    """One answered poll of the settings' cluster, started at ``started_at`` (two seconds
    long, as the filled fleet would take)."""
    import datetime as dt

    from cluster.models import Cluster, SyncRun
    from cluster.scope import settings_cluster_of

    return SyncRun(
        cluster=settings_cluster_of(Cluster.objects),
        started_at=started_at,
        finished_at=started_at + dt.timedelta(seconds=2),
        duration_ms=2000,
        nodes=5000,
        pods=100,
    )


def add_poll_history(polls: int = 120) -> None:
    """The settings' cluster polled every ``QM_POLL_SECONDS``, each poll answered; the newest
    started five seconds ago (so the pages show a fresh cluster, and its poll as their own)."""
    import datetime as dt

    from django.conf import settings
    from django.utils import timezone

    from cluster.models import SyncRun

    newest = timezone.now() - dt.timedelta(seconds=5)
    every = dt.timedelta(seconds=settings.QM_POLL_SECONDS)
    SyncRun.objects.bulk_create(answered_poll(newest - index * every) for index in range(polls))


class Polls:
    """The cluster polled every ``QM_POLL_SECONDS`` while the bench runs, as the worker and
    beat keep it (a poll's row; the observed rows stay as filled): without it the pages
    showed the cluster stale (no poll for three intervals) from the third minute on, a
    banner their baselines do not draw."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self) -> Polls:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def run(self) -> None:
        import datetime as dt

        from django.conf import settings
        from django.db import connection
        from django.utils import timezone

        try:
            while not self.stop.wait(settings.QM_POLL_SECONDS):
                answered_poll(timezone.now() - dt.timedelta(seconds=2)).save()
        finally:
            connection.close()


def add_workloads(count: int, teams: int) -> None:
    """``count`` Kueue workloads over the teams' namespaces, a minute apart: one in ten
    waiting, one in fifty evicted and back in line, the rest admitted or finished."""
    import datetime as dt

    from django.utils import timezone

    from cluster.models import ObservedWorkload
    from cluster.scope import settings_cluster_id

    now = timezone.now()
    cluster_id = settings_cluster_id()

    def one(index: int) -> ObservedWorkload:
        created = now - dt.timedelta(minutes=index)
        waiting = index % 10 == 0
        evicted = index % 50 == 1
        return ObservedWorkload(
            cluster_id=cluster_id,
            namespace=f"team-{index % teams:04d}-ml",
            name=f"job-{index:06d}",
            queue_name="default",
            admitted=not (waiting or evicted) and index % 3 != 0,
            finished=not (waiting or evicted) and index % 3 == 0,
            requests={"nvidia.com/gpu": 1 + index % 8},
            priority=index % 3 * 100,
            created_at=created,
            queued_at=created,
            admitted_at=None if waiting or evicted else created + dt.timedelta(seconds=30),
            evictions=1 if evicted else 0,
            evicted_at=created + dt.timedelta(minutes=1) if evicted else None,
            position=index // 10 if waiting else None,
            reason="Pending" if waiting or evicted else "",
            last_changed=now,
        )

    for start in range(0, count, 5000):
        ObservedWorkload.objects.bulk_create(one(i) for i in range(start, min(count, start + 5000)))


def explain_what_waits() -> None:
    """What the poll does after writing the cluster's rows: why its Pending pods wait,
    explained and stored with them (the filled rows were written without a poll)."""
    from django.utils import timezone

    from cluster.scope import settings_cluster_id
    from loop.written import cluster_written

    cluster_written(settings_cluster_id(), now=timezone.now())


def settle() -> None:
    """The database as autovacuum keeps one in service: statistics taken, visibility maps
    set (a bulk fill leaves neither, and the first minute of the run would measure them)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("CHECKPOINT")  # what the vacuum wrote, on disk before the clock starts


def fleet_html_kb(base: str, cookie: str) -> float:
    """The size of the Fleet page's HTML (its first screen: the pools summed up)."""
    import urllib3

    response = urllib3.request("GET", f"{base}/fleet/", headers={"Cookie": cookie})
    if response.status != 200:
        raise SystemExit(f"/fleet/: {response.status}")
    return len(response.data) / 1024


def add_people_and_requests(
    changes: int, namespaces: dict[str, str] | None = None
) -> dict[str, str]:
    """The lead (of the first two teams, 20 Pending pods in their namespaces: ``namespaces``,
    team -> namespace, else ``<team>-ml``), the approver, an admin and the pending requests;
    returns a session cookie per user."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore
    from django.utils import timezone

    from changes.models import MigChangeRequest
    from cluster.models import ObservedPod
    from portal.models import PlatformRole
    from tenants.models import Membership, Team

    lead = User.objects.create_user("bench-lead", password="unused")
    approver = User.objects.create_user("bench-approver", password="unused")
    PlatformRole.objects.create(user=approver, role=PlatformRole.Role.APPROVER)
    admin = User.objects.filter(username="bench-admin").first()
    if admin is None:
        admin = User.objects.create_user("bench-admin", password="unused")
        PlatformRole.objects.create(user=admin, role=PlatformRole.Role.ADMIN)
    teams = list(Team.objects.order_by("slug")[:2])
    namespace = namespaces or {team.slug: f"{team.slug}-ml" for team in teams}
    for team in teams:
        Membership.objects.create(user=lead, team=team, role="lead")
    now = timezone.now()
    ObservedPod.objects.bulk_create(
        ObservedPod(
            namespace=namespace[teams[index % 2].slug],
            name=f"train-{index:02d}",
            phase="Pending",
            gpu_requests={"nvidia.com/mig-3g.40gb": 1},
            pending_reason="Unschedulable",
            pending_message="0/5000 nodes are available: 5000 Insufficient nvidia.com/mig-3g.40gb.",
            last_changed=now,
        )
        for index in range(20)
    )
    assessment = {
        "verdict": "needs_drain",
        "reasons": ["2 GPU pods of team-0003 must be evicted first."],
        "capacity": {"nvidia.com/mig-3g.40gb": [32000, 31984]},
        "nodes": [{"name": "gpu-node-00001", "config": "all-3g.40gb"}],
    }
    MigChangeRequest.objects.bulk_create(
        MigChangeRequest(
            team=teams[index % 2],
            requested_by=lead,
            nodes=[f"gpu-node-{index:05d}"],
            target_config="all-balanced",
            reason="bench",
            state="pending",
            verdict="needs_drain",
            assessment=assessment,
        )
        for index in range(changes)
    )
    cookies = {}
    for name, user in (("lead", lead), ("approver", approver), ("admin", admin)):
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        cookies[name] = f"{settings.SESSION_COOKIE_NAME}={session.session_key}"
    return cookies


def sessions() -> dict[str, str]:
    """A new session cookie for each of the bench's users already in the database."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore

    cookies = {}
    for name in ("lead", "approver", "admin"):
        user = User.objects.get(username=f"bench-{name}")
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        cookies[name] = f"{settings.SESSION_COOKIE_NAME}={session.session_key}"
    return cookies


def reused() -> tuple[dict[str, str], dict[str, int], str]:
    """The database a previous run filled, as it is (``--reuse``: the pages measured again,
    e.g. before and after a change, without filling it anew)."""
    from cluster.models import ObservedNode, ObservedWorkload
    from queues.models import ClusterQueue

    nodes = ObservedNode.objects.on_every_cluster().count()
    workloads = ObservedWorkload.objects.on_every_cluster().count()
    queues = ClusterQueue.objects.on_every_cluster().count()
    said = (
        f"the database of an earlier run: {nodes} nodes, {queues} ClusterQueues, "
        f"{workloads} workloads"
    )
    pages = max(1, -(-workloads // 50))
    return sessions(), {"workloads": pages, "fleet-nodes": max(1, -(-nodes // POOLS // 50))}, said


def filled(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, int], str]:
    """The database as ``args`` asks (the default fill, or the scale scenario); returns the
    session cookies, each random-paged page's page count, and a line saying what it holds."""
    if args.reuse:
        return reused()
    if args.scale:
        s = scale.build(scale.SMOKE if args.smoke else scale.FULL)
        scale_db.write(s)
        add_poll_history()
        settle()
        first = {t: next(ns for ns, of in s.namespaces.items() if of == t) for t in s.teams[:2]}
        cookies = add_people_and_requests(args.changes, first)
        explain_what_waits()
        said = (
            f"scale scenario: {len(s.nodes)} nodes, {len(s.teams)} teams, "
            f"{len(s.cluster_queues)} ClusterQueues, {len(s.workloads)} workloads, "
            f"{args.changes} pending MIG changes"
        )
        return cookies, {"workloads": max(1, -(-len(s.workloads) // 50))}, said
    fill(args.nodes, args.teams)
    add_pools_and_health(args.nodes)
    add_workloads(args.workloads, args.teams)
    add_poll_history()
    settle()
    cookies = add_people_and_requests(args.changes)
    explain_what_waits()
    node_pages = max(1, -(-args.nodes // POOLS // 50))
    said = (
        f"{args.nodes} nodes, {args.teams} teams, {args.changes} pending MIG changes, "
        f"{args.workloads} workloads"
    )
    return cookies, {"fleet-nodes": node_pages, "workloads": max(1, -(-args.workloads // 50))}, said


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=300)
    parser.add_argument("--workloads", type=int, default=50_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--scale", action="store_true", help="the scale scenario's data and pages")
    parser.add_argument("--only", default="", help="some of the pages, by commas")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure the database an earlier run filled (same --scale), without filling it",
    )
    args = parse(
        parser,
        {"nodes": 60, "teams": 12, "changes": 6, "workloads": 120, "clients": 2, "requests": 4},
    )
    if (refused := too_few(args.requests, args.clients)) is not None:
        parser.error(refused)
    shown = SCALE_PAGES if args.scale else PAGES
    only = [name for name in args.only.split(",") if name] or list(shown)
    if set(only) - set(shown):
        parser.error(f"--only takes {', '.join(shown)}")

    import django

    django.setup()
    cookies, random_pages, said = filled(args)
    port = free_port()
    server = serve(port, "pages_settings")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, "/healthz", server)
        print(f"{said}; {args.clients} clients; {args.requests} requests per page and side")
        with Polls():
            ratios = compare(
                base,
                server,
                {
                    name: (portal, baseline, pages or random_pages[name], {"cookie": cookies[who]})
                    for name, (who, portal, baseline, pages) in shown.items()
                    if name in only
                },
                clients=args.clients,
                requests=args.requests,
            )
            worst = max(ratios, key=ratios.__getitem__)
            print(f"worst page: {worst}")
            print(
                f"worst_ratio={ratios[worst]:.2f} "
                f"fleet_html_kb={fleet_html_kb(base, cookies['lead']):.1f}"
            )
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
