"""Benchmark: the long API fuzz, every operation as a platform admin and as a team lead.

    python bench/fuzz.py [--examples 100] [--users admin,lead-a] [--seed N] [--workers 1]
                         [--paths REGEX]

1. Starts the demo cluster in this process and fills a database of its own
   (``quartermaster_fuzz``) with the demo scenario, applied to the cluster and polled.
2. Serves the portal with gunicorn (2 processes x 4 threads), tasks kept in the process:
   nothing the fuzz asks for is applied to the cluster.
3. For each user, on the demo freshly restored: schemathesis with every check in every
   phase (examples, coverage, fuzzing, stateful), ``--examples`` cases per operation and
   phase, ``tests/api/schemathesis.toml`` as in CI (tests/api/test_schemathesis.py, which
   runs the same with few examples and, of the coverage phase, the valid boundaries only:
   the invalid ones, three in four of its cases, are this run's).

Prints each failure schemathesis found (with a curl line to reproduce it) and a line per
user. Last line: ``operations=… cases=… failures=… errors=… seconds=…`` over all users.
Goal: 0 failures and 0 errors.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE)]
os.environ["DJANGO_SETTINGS_MODULE"] = "fuzz_settings"
os.environ.setdefault("QM_EMBEDDED_DB_NAME", "quartermaster_fuzz")
os.environ["QM_API_RATE"] = "100000000/minute"  # the fuzz measures the contract, not the limit
os.environ["QM_API_USER_RATE"] = "100000000/minute"

from loadkit import free_port, serve, wait_until_serving  # noqa: E402
from smoke import parse  # noqa: E402

from tests.api.fuzzing import PHASES, fuzz  # noqa: E402


def restore(kube_url: str, users: list[str]) -> dict[str, str]:
    """A fresh database with the demo, applied and polled; an API token per user."""
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from demo.services import load_demo
    from kube import connect
    from loop.apply import apply_desired_state
    from loop.poll import poll_cluster
    from portal.access.tokens import create_token

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    load_demo()
    gateway = connect(url=kube_url, token="any")
    apply_desired_state(gateway=gateway)
    poll_cluster(gateway=gateway)
    return {u: create_token(user=User.objects.get(username=u), name="fuzz")[1] for u in users}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--users", default="admin,lead-a")
    parser.add_argument("--seed", type=int, default=None)
    # One worker: schemathesis's threads can crash CPython 3.11's parser (SystemError "AST
    # constructor recursion depth mismatch" while hypothesis describes a lambda).
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--phases", default=PHASES, help=f"some of {PHASES}, by commas")
    parser.add_argument("--paths", default="", help="only the operations whose path matches")
    # The smoke proves the bench runs (restore, serve, fuzz, report) on one path's operations:
    # CI's own fuzz (tests/api/test_schemathesis.py) takes every operation.
    smoke = {
        "examples": 1,
        "users": "lead-a",
        "seed": 20261201,
        "phases": "fuzzing",
        "paths": "^/api/v1/teams/$",
    }
    args = parse(parser, smoke)
    users = args.users.split(",")

    import devcluster

    cluster = devcluster.start()
    os.environ["KUBE_URL"] = cluster.url

    import django

    django.setup()

    port = free_port()
    tokens = restore(cluster.url, users[:1])  # the first user's run starts on this one
    server = serve(port, "fuzz_settings")
    base = f"http://127.0.0.1:{port}"
    runs = []
    try:
        wait_until_serving(base, "/healthz", server)
        print(f"{len(users)} users, {args.examples} examples per operation and phase", flush=True)
        for user in users:
            token = tokens.get(user) or restore(cluster.url, [user])[user]
            run = fuzz(
                base,
                token,
                user=user,
                max_examples=args.examples,
                seed=args.seed,
                workers=args.workers,
                phases=args.phases,
                operations=("--include-path-regex", args.paths) if args.paths else (),
            )
            if run.failures or run.errors or run.exit_code:
                print(run.output)
            print(run.line(), flush=True)
            runs.append(run)
    finally:
        server.terminate()
        server.wait()
        cluster.stop()
    print(
        f"operations={max(r.operations for r in runs)} cases={sum(r.cases for r in runs)} "
        f"failures={sum(r.failed for r in runs)} "
        f"errors={sum(sum(int(e['count']) for e in r.errors) for r in runs)} "
        f"seconds={sum(r.seconds for r in runs):.0f}"
    )
    return 0 if all(not (r.failures or r.errors) for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
