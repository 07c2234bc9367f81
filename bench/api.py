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
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE)]
os.environ["DJANGO_SETTINGS_MODULE"] = "api_settings"
os.environ.setdefault("QM_EMBEDDED_DB_NAME", "quartermaster_bench")
# The rate limit is checked on every request, but never reached here.
os.environ["QM_API_RATE"] = "100000000/minute"
os.environ["QM_API_USER_RATE"] = "100000000/minute"

LISTS = {
    "nodes": ("/api/v1/nodes/", "/baseline/nodes/"),
    "teams": ("/api/v1/teams/", "/baseline/teams/"),
    "namespaces": ("/api/v1/namespaces/", "/baseline/namespaces/"),
}
PAGE_SIZE = 50

from loadkit import compare, fill, free_port, serve, too_few, wait_until_serving  # noqa: E402
from smoke import parse  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=600)
    args = parse(parser, {"nodes": 60, "teams": 12, "clients": 2, "requests": 4})
    if (refused := too_few(args.requests, args.clients)) is not None:
        parser.error(refused)

    import django

    django.setup()
    token = fill(args.nodes, args.teams)
    port = free_port()
    server = serve(port, "api_settings")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, "/baseline/teams/", server)
        rows = {"nodes": args.nodes, "teams": args.teams, "namespaces": args.teams}
        print(
            f"{args.nodes} nodes, {args.teams} teams; {args.clients} clients; "
            f"{args.requests} requests per list and side, two alternating rounds"
        )
        compare(
            base,
            server,
            {
                name: (portal, baseline, max(1, rows[name] // PAGE_SIZE), {"token": token})
                for name, (portal, baseline) in LISTS.items()
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
