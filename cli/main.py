"""``qm``: the portal's REST API for people at a terminal and for scripts.

Exit codes: 0 done; 1 ``qm wait`` saw the object end in another final state than the one
awaited, or ``qm why`` found nothing waiting by that name; 2 a usage or configuration error,
or ``qm wait`` timed out; 3 the API refused (its message on stderr) or could not be
reached, or the object's assessment is no longer the one whose ``--fingerprint`` was given."""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from cli.client import ApiError, Client, pending_decisions
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


def pending(api: Client, args: argparse.Namespace) -> int:
    """The requests waiting for the user's decision, the user's own left out."""
    found = pending_decisions(api, api.target.cluster)
    rows = [
        {"type": kind, **with_assessment(row)}
        for kind, key in (("mig-change", "mig_changes"), ("quota-request", "quota_requests"))
        for row in found[key]
    ]
    emit(rows, args.output, draw_pending)
    return OK


def draw_pending(rows: list[dict[str, Any]], out: TextIO) -> None:
    columns = ["type", "id", "cluster", "team", "kind", "requested_by", "verdict", "fingerprint"]
    table(rows, columns, out)


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
    """Approve, reject, cancel, abort or roll back: the object read for its ETag (sent as
    ``If-Match``, so a change since is a 412) and the assessment's fingerprint acted on (an
    approval on a fresher one is a 409 of the API; any other verb is refused here when the
    object's assessment is no longer the one given)."""
    path = f"{KINDS[args.kind]}/{args.id}/"
    read = api.request("GET", path)
    now = (read.json().get("assessment") or {}).get("fingerprint") or ""
    if args.fingerprint and args.verb != "approve" and args.fingerprint != now:
        raise ApiError(
            f"{args.kind} {args.id} changed since: its assessment's fingerprint is now {now} "
            f"(you gave {args.fingerprint}); read it again with qm get {args.kind} {args.id}"
        )
    etag = read.headers.get("ETag", "")
    body = {"comment": args.comment, "fingerprint": args.fingerprint}
    headers = {"If-Match": etag} if etag else {}
    decided = api.request("POST", f"{path}{args.verb}/", body=body, headers=headers).json()
    emit(decided, args.output, show_object(args.kind))
    return OK


def mig_create(api: Client, args: argparse.Namespace) -> int:
    body = {
        "cluster": api.target.cluster,
        "team": args.team,
        "nodes": args.nodes,
        "target_config": args.config,
        "reason": args.reason,
    }
    if args.window_start:
        body["window_start"] = args.window_start
    emit(api.post("mig-changes/", body), args.output, show_object("mig-change"))
    return OK


def mig_plan(api: Client, args: argparse.Namespace) -> int:
    emit(api.get("mig-plan/", cluster=api.target.cluster), args.output, draw_plan)
    return OK


def draw_plan(plan: dict[str, Any], out: TextIO) -> None:
    """The planner's proposal: the requests it becomes, demand against capacity, what
    stays short and its notes."""
    out.write(
        f"MIG plan of {plan['cluster']}: {plan['solver']} ({plan['status']}), "
        f"fingerprint {plan['fingerprint']}\n"
    )
    if plan["batches"]:
        out.write("\nProposed MIG changes (one request each):\n")
        table(plan["batches"], ["pool", "target_config", "nodes", "verdict"], out)
    else:
        out.write("\nNo change proposed: no other layout serves the demand better.\n")
    if plan["lines"]:
        out.write("\nDemand against capacity (before -> after):\n")
        table(plan["lines"], ["resource", "demand", "before", "after"], out)
    for shortfall in plan["shortfalls"]:
        out.write(f"short: {shortfall['sentence']}\n")
    for note in plan["notes"]:
        out.write(f"note: {note}\n")


WHAT_IF = ("cluster_queue", "flavor", "namespace", "resource", "nominal_quota")
WHAT_IF_LIMITS = ("borrowing_limit", "lending_limit", "hard")


def what_if(api: Client, args: argparse.Namespace) -> int:
    """A quota change simulated by the API (nothing saved): the fields given, and the
    limits given even empty (an empty one removes it)."""
    body = {name: getattr(args, name) for name in WHAT_IF if getattr(args, name)}
    body |= {n: getattr(args, n) for n in WHAT_IF_LIMITS if getattr(args, n) is not None}
    emit(api.post(api.at_cluster("what-if/"), body), args.output, draw_what_if)
    return OK


def draw_what_if(result: dict[str, Any], out: TextIO) -> None:
    if not result.get("known", True):
        out.write("The cluster was not observed yet: nothing to simulate.\n")
        return
    if "rows" in result:  # a namespace quota item
        out.write(f"{result['note']}\n")
        if result.get("used"):
            out.write(f"used now: {result['used']} of {result['resource']}\n")
        table(result["rows"], ["workload", "amount", "fits_before", "fits_after"], out)
        return
    sections = (
        ("Admitted, in order", "admitted", ["order", "workload", "cluster_queue", "flavors"]),
        ("Preempted", "preempted", ["workload", "cluster_queue", "by", "reason"]),
        ("Still waiting", "waiting", ["workload", "cluster_queue", "why"]),
        ("Borrowing", "borrowing", ["cluster_queue", "resource", "borrowed_before",
                                    "borrowed_after", "loses"]),
    )  # fmt: skip
    for title, key, columns in sections:
        out.write(f"{title}:\n")
        if result[key]:
            table(result[key], columns, out)
        else:
            out.write("  (none)\n")
    for missing in result.get("not_modelled") or []:
        out.write(f"not modelled: {missing}\n")


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


def fingerprint_option(command: argparse.ArgumentParser, acted: str) -> None:
    command.add_argument(
        "--fingerprint",
        default="",
        help=f"the assessment's fingerprint you {acted} (qm get shows it); refused when the "
        "assessment changed since",
    )


def add_decision_commands(commands: Any, shared: argparse.ArgumentParser) -> None:
    """``qm pending`` and ``qm approve|reject``."""
    one = commands.add_parser(
        "pending",
        parents=[shared],
        help="requests waiting for your decision",
        description="The MIG changes, drains and quota requests you may decide (approvers "
        "and platform admins), your own left out.",
    )
    one.set_defaults(run=pending)
    for verb in ("approve", "reject"):
        one = commands.add_parser(verb, parents=[shared], help=f"{verb} a request")
        one.add_argument("kind", choices=sorted(KINDS))
        one.add_argument("id", type=int)
        fingerprint_option(one, "decided on")
        one.add_argument("--comment", default="")
        one.set_defaults(run=decide, verb=verb)


def add_mig_commands(commands: Any, shared: argparse.ArgumentParser) -> None:
    """``qm mig plan|create|cancel|abort|rollback``."""
    mig = commands.add_parser("mig", help="MIG changes and the layout planner")
    verbs = mig.add_subparsers(dest="verb", required=True, metavar="VERB")
    one = verbs.add_parser(
        "plan",
        parents=[shared],
        help="the planner's proposal",
        description="The MIG layout the planner proposes for the cluster's demand: the "
        "requests it becomes, with their verdicts, and what stays short (platform admins, "
        "approvers and team leads; other teams' pods counted, never named).",
    )
    one.set_defaults(run=mig_plan)
    one = verbs.add_parser("create", parents=[shared], help="ask for a MIG change")
    one.add_argument("nodes", nargs="+", metavar="NODE")
    one.add_argument("--team", required=True, help="the team asking")
    one.add_argument("--config", required=True, help="the target MIG config, e.g. all-1g.10gb")
    one.add_argument("--reason", required=True)
    one.add_argument("--window-start", default="", help="ISO 8601: not to start before")
    one.set_defaults(run=mig_create)
    helps = {
        "cancel": "withdraw a change that has not started (its requester, platform admins)",
        "abort": "stop a running change at its next step boundary (platform admins)",
        "rollback": "undo the steps a change ran (platform admins)",
    }
    for verb, text in helps.items():
        one = verbs.add_parser(verb, parents=[shared], help=text, description=text + ".")
        one.add_argument("id", type=int)
        fingerprint_option(one, "read")
        one.set_defaults(run=decide, kind="mig-change", comment="")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="qm",
        description="Quartermaster's REST API on the command line (QM_URL and QM_TOKEN, or "
        "~/.config/qm/config.yaml).",
        epilog="Exit codes: 0 done; 1 wait ended in another final state, or why found nothing; "
        "2 usage, configuration or wait timed out; 3 the API refused or was unreachable, or "
        "the object's assessment changed since the --fingerprint given.",
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

    add_decision_commands(commands, shared)
    add_mig_commands(commands, shared)
    one = commands.add_parser(
        "what-if",
        parents=[shared],
        help="what a quota change would do (nothing saved)",
        description="A ClusterQueue entry (--cluster-queue, --flavor and one of its limits) "
        "simulated on the last poll's workloads, or a namespace quota item (--namespace, "
        "--hard) against its waiting workloads. Nothing is saved.",
    )
    one.add_argument("--resource", required=True, help="e.g. nvidia.com/gpu")
    one.add_argument("--cluster-queue", default="", help="the ClusterQueue")
    one.add_argument("--flavor", default="", help="its ResourceFlavor")
    one.add_argument("--nominal-quota", default="", help="the entry's new nominal quota")
    one.add_argument("--borrowing-limit", help='its new borrowing limit ("" removes it)')
    one.add_argument("--lending-limit", help='its new lending limit ("" removes it)')
    one.add_argument("--namespace", default="", help="a namespace of your teams")
    one.add_argument("--hard", help="the namespace quota item's new hard limit")
    one.set_defaults(run=what_if)

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
