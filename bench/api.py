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

from loadkit import fill, free_port, load, p, serve  # noqa: E402


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
    server = serve(port, "api_settings")
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
