"""``python -m devcluster --port PORT``: run the demo GPU cluster until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from devcluster import Served, start
from devcluster.controllers import Options

KUEUE_CHOICES = {
    "both": ("v1beta2", "v1beta1"),
    "v1beta2": ("v1beta2",),
    "v1beta1": ("v1beta1",),
    "none": (),
}


def main(argv: list[str] | None = None) -> int:
    args = command_line().parse_args(argv)
    options = Options(
        mig_delay_seconds=args.mig_delay,
        retry_seconds=args.retry_seconds,
        fair_sharing=args.fair_sharing,
    )
    users = {}
    for spec in args.user:
        name, token, verbs = spec.split(":", 2)
        users[token] = (name, frozenset(verbs.split(",")))
    demo = start(
        host=args.host,
        port=args.port,
        scenario=args.scenario,
        nodes=args.nodes,
        pods=args.pods,
        claims=args.claims,
        token=args.token,
        users=users,
        options=options,
        served=Served(kueue=KUEUE_CHOICES[args.kueue], volcano=not args.no_volcano),
        idle_notebook=args.idle_notebook,
    )
    demo.server.verbose = args.verbose
    if args.kubeconfig:
        args.kubeconfig.write_text(kubeconfig(demo.url, args.token))
    print(f"devcluster listening on {demo.url}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    demo.stop()
    return 0


def command_line() -> argparse.ArgumentParser:
    """The options of ``python -m devcluster`` (the run command builds its lines for it)."""
    parser = argparse.ArgumentParser(prog="python -m devcluster", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6443, help="0 picks a free port")
    parser.add_argument(
        "--scenario",
        choices=["seed", "inference", "empty"],
        default="seed",
        help="seed: the seed chapter's training fleet and MIG incident (default); "
        "inference: an inference fleet (H100 MIG and whole, L40S whole and time-sliced)",
    )
    parser.add_argument(
        "--idle-notebook",
        action="store_true",
        help="seed: team-dev's notebook holds a 2g.20gb slice idle and team-a's an H100 (the "
        "run command's)",
    )
    parser.add_argument("--nodes", type=int, default=0, help="add a generated fleet of N nodes")
    parser.add_argument("--pods", type=int, default=0, help="with --nodes: running pods to add")
    parser.add_argument(
        "--claims",
        type=int,
        default=0,
        help="with --nodes: its GPUs published through DRA (a ResourceSlice per node) and "
        "this many ResourceClaims",
    )
    parser.add_argument(
        "--mig-delay",
        type=float,
        default=3.0,
        help="seconds the MIG Manager takes to apply a config (default 3)",
    )
    parser.add_argument(
        "--retry-seconds",
        type=float,
        default=10.0,
        help="how often the scheduler retries unschedulable pods",
    )
    parser.add_argument(
        "--fair-sharing",
        action="store_true",
        help="Kueue's fair sharing on: ClusterQueues and Cohorts report weightedShare",
    )
    parser.add_argument("--token", default="", help="require this bearer token (default: none)")
    parser.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="NAME:TOKEN:VERBS",
        help="a limited user, e.g. alice:t0ken:get,list (RBAC refusals for tests)",
    )
    parser.add_argument(
        "--kueue",
        choices=["both", "v1beta2", "v1beta1", "none"],
        default="both",
        help="which Kueue API versions to serve (default both; none: no Kueue)",
    )
    parser.add_argument(
        "--no-volcano", action="store_true", help="serve no Volcano CRDs (default: served)"
    )
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig for kubectl here")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    return parser


def kubeconfig(url: str, token: str) -> str:
    user = f"    token: {token}\n" if token else "    token: devcluster\n"
    return (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: devcluster\n  cluster:\n"
        f"    server: {url}\ncontexts:\n- name: devcluster\n  context:\n    cluster: devcluster\n"
        "    user: devcluster\ncurrent-context: devcluster\nusers:\n- name: devcluster\n  user:\n"
        f"{user}"
    )


if __name__ == "__main__":
    sys.exit(main())
