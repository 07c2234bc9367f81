"""``qm``: the portal's REST API for people at a terminal and for scripts.

Exit codes: 0 done; 1 ``qm wait`` saw the object end in another final state than the one
awaited, or ``qm why`` found nothing waiting by that name; 2 a usage or configuration error,
or ``qm wait`` timed out; 3 the API refused (its message on stderr) or could not be
reached."""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from cli.client import ApiError, Client
from cli.config import ConfigError, resolve
from cli.output import FORMATS, emit, fields, table

OK, ENDED_OTHERWISE, USAGE, API = 0, 1, 2, 3

# Where each kind lives in the API, and the states a wait ends at (an approved quota
# request may still expire later; a wait for it ends at approved).
KINDS = {"mig-change": "mig-changes", "quota-request": "quota-requests"}
FINAL = {
    "mig-change": {"succeeded", "failed", "rejected", "cancelled", "rolled_back"},
    "quota-request": {"approved", "rejected", "cancelled", "expired"},
}
SHOWN = {
    "mig-change": [
        "id", "kind", "cluster", "team", "state", "verdict", "nodes", "target_config",
        "reason", "requested_by", "decided_by", "failure", "fingerprint",
    ],
    "quota-request": [
        "id", "cluster", "team", "kind", "state", "namespace_name", "cluster_queue_name",
        "flavor", "resource", "previous", "requested", "grant_until", "reason", "verdict",
        "fingerprint",
    ],
}  # fmt: skip
DURATION = re.compile(r"(\d+)([smh]?)")


class UsageError(Exception):
    pass


def duration(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``2h`` in seconds."""
    found = DURATION.fullmatch(text.strip())
    if not found:
        raise argparse.ArgumentTypeError(f"{text!r} is no duration: write e.g. 90s, 10m or 2h")
    return int(found.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[found.group(2)]


def with_assessment(item: dict[str, Any]) -> dict[str, Any]:
    """The object with its assessment's verdict and fingerprint at the top (the table's)."""
    assessment = item.get("assessment") or {}
    return {
        **item,
        "verdict": item.get("verdict") or assessment.get("verdict"),
        "fingerprint": assessment.get("fingerprint"),
    }


def show_object(kind: str) -> Callable[[dict[str, Any], TextIO], None]:
    return lambda item, out: fields(with_assessment(item), SHOWN[kind], out)


# --- the commands ------------------------------------------------------------------------


def why(api: Client, args: argparse.Namespace) -> int:
    namespace, _, name = args.target.partition("/")
    if not namespace or not name:
        raise UsageError("qm why NAMESPACE/NAME (a pod, a Kueue workload or a Job)")
    rows = api.get("waiting/", namespace=namespace, cluster=api.target.cluster)
    found = [r for r in rows if name in (r["name"], r.get("workload"))]
    if not found:
        print(f"qm: nothing waits as {namespace}/{name}", file=sys.stderr)
        return ENDED_OTHERWISE
    emit(found, args.output, draw_waiting)
    return OK


def draw_waiting(rows: list[dict[str, Any]], out: TextIO) -> None:
    for index, row in enumerate(rows):
        if index:
            out.write("\n")
        estimate = row.get("estimate") or {}
        out.write(f"{row['kind']} {row['namespace']}/{row['name']} on {row['cluster']}\n")
        shown = {
            "queue": row.get("queue") or "-",
            "workload": row.get("workload") or "-",
            "cause": row["cause"],
            "next_step": row["next_step"],
            "estimate": estimate.get("summary", "-"),
            "basis": estimate.get("basis", "-"),
        }
        fields(shown, list(shown), out)
        for line in row.get("evidence") or []:
            out.write(f"  | {line}\n")


def get(api: Client, args: argparse.Namespace) -> int:
    emit(api.get(f"{KINDS[args.kind]}/{args.id}/"), args.output, show_object(args.kind))
    return OK


def wait(api: Client, args: argparse.Namespace) -> int:
    final = FINAL[args.kind]
    if args.state not in final:
        raise UsageError(f"--for: a final state of a {args.kind}: {', '.join(sorted(final))}")
    deadline = time.monotonic() + args.timeout
    seen = ""
    while True:
        item = api.get(f"{KINDS[args.kind]}/{args.id}/")
        if item["state"] != seen:
            seen = item["state"]
            print(f"{args.kind} {args.id}: {seen}", file=sys.stderr)
        if seen in final:
            emit(item, args.output, show_object(args.kind))
            return OK if seen == args.state else ENDED_OTHERWISE
        if time.monotonic() + args.interval > deadline:
            print(
                f"qm: timed out after {args.timeout:g}s: {args.kind} {args.id} is {seen}",
                file=sys.stderr,
            )
            return USAGE
        time.sleep(args.interval)


def quota_request(api: Client, args: argparse.Namespace) -> int:
    body = {
        "cluster": api.target.cluster,
        "team": args.team,
        "kind": args.kind,
        "namespace": args.namespace,
        "cluster_queue": args.cluster_queue,
        "flavor": args.flavor,
        "resource": args.resource,
        "requested": args.requested,
        "reason": args.reason,
        "override_reason": args.override_reason,
    }
    if args.grant_until:
        body["grant_until"] = args.grant_until
    created = api.request("POST", "quota-requests/", body=body).json()
    emit(created, args.output, show_object("quota-request"))
    return OK


def decide(api: Client, args: argparse.Namespace) -> int:
    """Approve or reject: the object read for its ETag (sent as ``If-Match``, so a change
    since is a 412) and the assessment's fingerprint decided on (a fresher one is a 409)."""
    path = f"{KINDS[args.kind]}/{args.id}/"
    etag = api.request("GET", path).headers.get("ETag", "")
    body = {"comment": args.comment, "fingerprint": args.fingerprint}
    headers = {"If-Match": etag} if etag else {}
    decided = api.request("POST", f"{path}{args.verb}/", body=body, headers=headers).json()
    emit(decided, args.output, show_object(args.kind))
    return OK


def report(api: Client, args: argparse.Namespace) -> int:
    params = {
        "days": args.days,
        "team": args.team,
        "resource": args.resource,
        "cluster": api.target.cluster,
    }
    if args.output == "csv":
        params["format"] = "csv"
        asked = {k: v for k, v in params.items() if v}
        sys.stdout.write(api.request("GET", f"reports/{args.name}/", params=asked).text)
        return OK
    rows = api.get(f"reports/{args.name}/", **params)
    emit(rows, args.output, lambda rows, out: table(rows, list(rows[0]) if rows else [], out))
    return OK


# --- the command line --------------------------------------------------------------------


def common(formats: Sequence[str] = FORMATS) -> argparse.ArgumentParser:
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("-o", "--output", choices=formats, default="table")
    shared.add_argument("--context", help="a context of the configuration file")
    shared.add_argument("--cluster", help="the cluster asked about (default: the context's)")
    return shared


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="qm",
        description="Quartermaster's REST API on the command line (QM_URL and QM_TOKEN, or "
        "~/.config/qm/config.yaml).",
        epilog="Exit codes: 0 done; 1 wait ended in another final state, or why found nothing; "
        "2 usage, configuration or wait timed out; 3 the API refused or was unreachable.",
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    shared = common()

    one = commands.add_parser("why", parents=[shared], help="why a pod or workload waits")
    one.add_argument("target", metavar="NAMESPACE/NAME")
    one.set_defaults(run=why)

    one = commands.add_parser("get", parents=[shared], help="a MIG change or quota request")
    one.add_argument("kind", choices=sorted(KINDS))
    one.add_argument("id", type=int)
    one.set_defaults(run=get)

    one = commands.add_parser("wait", parents=[shared], help="wait for a final state")
    one.add_argument("kind", choices=sorted(KINDS))
    one.add_argument("id", type=int)
    one.add_argument("--for", dest="state", required=True, help="e.g. succeeded")
    one.add_argument("--timeout", type=duration, default=duration("10m"), help="default 10m")
    one.add_argument("--interval", type=duration, default=duration("5s"), help="default 5s")
    one.set_defaults(run=wait)

    quota = commands.add_parser("quota", help="quota requests")
    verbs = quota.add_subparsers(dest="verb", required=True, metavar="VERB")
    one = verbs.add_parser("request", parents=[shared], help="ask for a quota change")
    one.add_argument("--team", required=True)
    one.add_argument("--kind", choices=["namespace", "queue"], required=True)
    one.add_argument("--namespace", default="", help="kind namespace: the namespace")
    one.add_argument("--cluster-queue", default="", help="kind queue: the ClusterQueue")
    one.add_argument("--flavor", default="", help="kind queue: the ResourceFlavor")
    one.add_argument("--resource", required=True, help="e.g. requests.nvidia.com/gpu")
    one.add_argument("--requested", required=True, help="the new amount, e.g. 8")
    one.add_argument("--reason", required=True)
    one.add_argument("--grant-until", default="", help="ISO 8601: a temporary grant's end")
    one.add_argument("--override-reason", default="", help="platform admins, see the API")
    one.set_defaults(run=quota_request)

    for verb in ("approve", "reject"):
        one = commands.add_parser(verb, parents=[shared], help=f"{verb} a request")
        one.add_argument("kind", choices=sorted(KINDS))
        one.add_argument("id", type=int)
        one.add_argument(
            "--fingerprint",
            default="",
            help="the assessment's fingerprint you decided on (qm get shows it); refused "
            "when the assessment changed since",
        )
        one.add_argument("--comment", default="")
        one.set_defaults(run=decide, verb=verb)

    one = commands.add_parser("report", parents=[common((*FORMATS, "csv"))], help="usage")
    one.add_argument("name", help="gpu-hours, queue-gpu-hours, quota-utilisation, ...")
    one.add_argument("--days", type=int, choices=[1, 7, 30, 90], default=7)
    one.add_argument("--team", default="")
    one.add_argument("--resource", default="")
    one.set_defaults(run=report)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse's own usage errors exit 2, --help 0
        return int(exc.code or 0)
    try:
        target = resolve(context=args.context, cluster=args.cluster)
        return int(args.run(Client(target), args))
    except (ConfigError, UsageError) as exc:
        print(f"qm: {exc}", file=sys.stderr)
        return USAGE
    except ApiError as exc:
        print(f"qm: {exc}", file=sys.stderr)
        return API
    except KeyboardInterrupt:
        return 130
