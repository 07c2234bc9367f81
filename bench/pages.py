"""Benchmark: the main pages under concurrent load, next to minimal Django pages.

    python bench/pages.py [--nodes 5000] [--teams 1000] [--changes 300] [--clients 8]
                          [--requests 200]

1. Fills a database of its own (``bench/loadkit.py``): 5,000 observed GPU nodes in ten
   pools, 1,000 teams with a namespace, quota and limits; a team lead of two teams with 20
   Pending pods; an approver; ``--changes`` MIG change requests waiting for approval, each
   with its impact assessment.
2. Serves the portal with production settings (DEBUG off, cached templates) under gunicorn
   (2 processes x 4 threads), plus minimal Django pages over the same rows
   (``bench/pages_urls.py``: one query set and one template loop each).
3. ``--clients`` threads send ``--requests`` requests to each page and its baseline in
   alternating rounds: the lead's home, the fleet, the approver's MIG change inbox.

Last line: ``p99_ms=… baseline_p99_ms=… ratio=…`` over all pages. Goal: ratio ≤ 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE)]
os.environ["DJANGO_SETTINGS_MODULE"] = "pages_settings"
os.environ.setdefault("QM_EMBEDDED_DB_NAME", "quartermaster_bench")

from loadkit import compare, fill, free_port, serve, wait_until_serving  # noqa: E402

PAGES = {
    "home (lead)": ("lead", "/", "/baseline/home/"),
    "fleet": ("lead", "/fleet/", "/baseline/fleet/"),
    "inbox (approver)": ("approver", "/changes/", "/baseline/inbox/"),
}


def add_people_and_requests(changes: int) -> dict[str, str]:
    """The lead, the approver and the pending requests; returns a session cookie per user."""
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
    teams = list(Team.objects.order_by("slug")[:2])
    for team in teams:
        Membership.objects.create(user=lead, team=team, role="lead")
    now = timezone.now()
    ObservedPod.objects.bulk_create(
        ObservedPod(
            namespace=f"{teams[index % 2].slug}-ml",
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
    for name, user in (("lead", lead), ("approver", approver)):
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        cookies[name] = f"{settings.SESSION_COOKIE_NAME}={session.session_key}"
    return cookies


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    import django

    django.setup()
    fill(args.nodes, args.teams)
    cookies = add_people_and_requests(args.changes)
    port = free_port()
    server = serve(port, "pages_settings")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, "/healthz", server)
        print(
            f"{args.nodes} nodes, {args.teams} teams, {args.changes} pending MIG changes; "
            f"{args.clients} clients; {args.requests} requests per page and side"
        )
        compare(
            base,
            {
                name: (portal, baseline, 1, {"cookie": cookies[who]})
                for name, (who, portal, baseline) in PAGES.items()
            },
            clients=args.clients,
            requests=args.requests,
        )
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
