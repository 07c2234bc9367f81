"""``qm-mcp``: the portal's REST API as read-only tools for an assistant, over the Model
Context Protocol on stdio.

A client of the API like ``qm``, with the user's own token and ``qm``'s configuration
(``QM_URL``/``QM_TOKEN`` or a context of ``~/.config/qm/config.yaml``): every answer is the
API's answer to that user, scoped and redacted as the API scopes and redacts it, and every
refusal is the API's message, returned as a tool error. Nothing here writes: the tools read
(the what-if is a simulation that saves nothing) and the one draft is text to submit with
``qm``."""

from __future__ import annotations

import argparse
import inspect
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from cli.client import ApiError, Client, pending_decisions
from cli.config import ConfigError, resolve

INSTRUCTIONS = """\
Quartermaster manages GPU quotas, Kueue queues, MIG layouts and reviewed changes on \
Kubernetes clusters. These tools read its REST API with the user's own token: an answer is \
exactly what the portal shows this user (their teams' namespaces, workloads and requests; \
every team's for approvers and platform admins), other teams' pods and workloads counted, \
never named. A refusal (a team or namespace that is not theirs, an unknown cluster) comes \
back as a tool error with the API's own message: report it, do not guess past it. Nothing \
here changes anything: no request is made, approved or cancelled. To ask for a quota change, \
use draft_quota_request and hand the user the command to run themselves."""

CLUSTER = Field(
    description="The cluster's name; empty: the one configured for the user (or every "
    "cluster they may see, where the API allows it)."
)
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# The fields of a request an approver weighs, beside its assessment (a MIG change's whole
# object also holds its steps).
DECISION_FIELDS = (
    "id", "kind", "cluster", "team", "state", "verdict", "nodes", "pool_name",
    "target_config", "reason", "window_start", "requested_by", "created_at", "teams_hit",
    "namespace_name", "cluster_queue_name", "flavor", "resource", "previous", "requested",
    "grant_until",
)  # fmt: skip


class Tools:
    """Each tool one or a few reads of the API as the token's user."""

    def __init__(self, api: Client) -> None:
        self.api = api

    def _cluster(self, cluster: str) -> str:
        return cluster or self.api.target.cluster

    def _get(self, path: str, **params: Any) -> Any:
        try:
            return self.api.get(path, **params)
        except ApiError as exc:
            raise ToolError(str(exc)) from None

    def _get_all(self, path: str, **params: Any) -> list[Any]:
        try:
            return self.api.get_all(path, **params)
        except ApiError as exc:
            raise ToolError(str(exc)) from None

    def why_waiting(
        self,
        namespace: Annotated[str, Field(description="The namespace, one of the user's teams'.")],
        name: Annotated[str, Field(description="A pod, a Kueue Workload or a Job's name.")],
        cluster: Annotated[str, CLUSTER] = "",
    ) -> dict[str, Any]:
        """Why one pod, Kueue workload or Job waits and when it could start.

        Returns {"waiting": [...]}: each row its kind, namespace, name, cluster, queue,
        workload, cause, next_step, the cluster's own words (evidence) and an estimate (a
        range with its basis: its place in line and the run times of those ahead, or "no
        estimate" and why). Scope: a namespace of the user's teams (every team's for
        approvers and platform admins); another team's namespace is refused with the API's
        message, which names the namespaces the user may ask about."""
        rows = self._get("waiting/", namespace=namespace, cluster=self._cluster(cluster))
        found = [r for r in rows if name in (r["name"], r.get("workload"))]
        if not found:
            raise ToolError(f"Nothing waits as {namespace}/{name} in what the portal shows.")
        return {"waiting": found}

    def waiting(
        self,
        team: Annotated[str, Field(description="Only this team's (its slug); empty: all.")] = "",
        namespace: Annotated[str, Field(description="Only this namespace.")] = "",
        cluster: Annotated[str, CLUSTER] = "",
    ) -> dict[str, Any]:
        """Everything that waits and why, with each one's estimate and place in line.

        Returns {"waiting": [...]}, rows as why_waiting's. Scope: the user's teams'
        namespaces (every team's for approvers and platform admins); a team or namespace
        that is not theirs is refused with the API's message."""
        params = {"team": team, "namespace": namespace, "cluster": self._cluster(cluster)}
        return {"waiting": self._get("waiting/", **params)}

    def team_quotas(
        self,
        team: Annotated[str, Field(description="The team's slug, one of the user's.")],
        days: Annotated[int, Field(description="The use over the last 1, 7, 30 or 90 days.")] = 7,
        cluster: Annotated[str, CLUSTER] = "",
    ) -> dict[str, Any]:
        """A team's quotas and what it used of them.

        Returns {"namespaces": [...]} (each namespace's cluster, ResourceQuota hard items
        and LimitRange items), {"utilisation": [...]} (average use against each namespace
        quota over the period) and {"gpu_hours": [...]} (the team's GPU-hours by resource).
        Scope: one of the user's teams (any for approvers and platform admins); another is
        refused with the API's message."""
        where = {"team": team, "cluster": self._cluster(cluster)}
        return {
            "namespaces": self._get_all("namespaces/", **where),
            "utilisation": self._get("reports/quota-utilisation/", days=days, **where),
            "gpu_hours": self._get("reports/gpu-hours/", days=days, **where),
        }

    def queues(self, cluster: Annotated[str, CLUSTER] = "") -> dict[str, Any]:
        """The Kueue ClusterQueues and the user's LocalQueues.

        Returns {"cluster_queues": [...]} (cohort, resource groups with each flavor's
        nominal quota, borrowing and lending limits, preemption and fair-sharing settings)
        and {"local_queues": [...]} (each with the ClusterQueue it points at). Scope: every
        ClusterQueue of the clusters the user may see; the LocalQueues of the user's teams'
        namespaces only."""
        on = {"cluster": self._cluster(cluster)}
        return {
            "cluster_queues": self._get_all("cluster-queues/", **on),
            "local_queues": self._get_all("local-queues/", **on),
        }

    def quota_what_if(
        self,
        resource: Annotated[str, Field(description="e.g. nvidia.com/gpu")],
        cluster_queue: Annotated[str, Field(description="A ClusterQueue (with flavor).")] = "",
        flavor: Annotated[str, Field(description="The ClusterQueue entry's flavor.")] = "",
        nominal_quota: Annotated[str, Field(description="Its new nominal quota.")] = "",
        borrowing_limit: Annotated[
            str | None, Field(description='Its new borrowing limit ("" removes it).')
        ] = None,
        lending_limit: Annotated[
            str | None, Field(description='Its new lending limit ("" removes it).')
        ] = None,
        namespace: Annotated[str, Field(description="Or a namespace of the user's.")] = "",
        hard: Annotated[str, Field(description="The namespace quota item's new hard.")] = "",
        cluster: Annotated[str, CLUSTER] = "",
    ) -> dict[str, Any]:
        """What a quota change would do, simulated; nothing is saved or asked for.

        Returns, for a ClusterQueue entry (cluster_queue, flavor, resource and at least one
        of nominal_quota, borrowing_limit, lending_limit), which waiting workloads Kueue
        would admit (in order, on which flavor), whom that preempts, what the cohort borrows
        before and after, and what the simulation does not model; for a namespace quota
        item (namespace, resource, hard), which waiting workloads' pods would fit.
        Scope: any ClusterQueue; a namespace of the user's teams only. Other teams'
        workloads are not named."""
        body = {
            "resource": resource,
            "cluster_queue": cluster_queue,
            "flavor": flavor,
            "nominal_quota": nominal_quota,
            "namespace": namespace,
            "hard": hard,
        }
        body = {k: v for k, v in body.items() if v}
        for key, value in (("borrowing_limit", borrowing_limit), ("lending_limit", lending_limit)):
            if value is not None:
                body[key] = value
        path = f"clusters/{self._cluster(cluster)}/what-if/" if self._cluster(cluster) else ""
        try:
            return dict(self.api.post(path or "what-if/", body))
        except ApiError as exc:
            raise ToolError(str(exc)) from None

    def pending_decisions(self, cluster: Annotated[str, CLUSTER] = "") -> dict[str, Any]:
        """The MIG changes (and drains) and quota requests that wait for this user's decision.

        Returns {"mig_changes": [...], "quota_requests": [...]}: each pending request
        with its team, what it asks, its requester, its verdict and its assessment (its
        fingerprint is what an approver decides on). Scope: only approvers and platform
        admins decide, and they see every team's requests; for anyone else both lists are
        empty. The user's own requests are left out (nobody decides what they asked for).
        Deciding is done by the user on the portal or with
        `qm approve|reject KIND ID --fingerprint FP`, never by these tools."""
        try:
            found = pending_decisions(self.api, self._cluster(cluster))
        except ApiError as exc:
            raise ToolError(str(exc)) from None
        return {kind: [shown(r) for r in rows] for kind, rows in found.items()}

    def mig_plan(self, cluster: Annotated[str, CLUSTER] = "") -> dict[str, Any]:
        """The MIG layout planner's proposal for a cluster (read only).

        Returns the demand against capacity per resource (lines), each node it would
        change (config before and after, the pods it would evict), the MIG change requests
        it would become (batches, each with its verdict and reasons), what stays short, its
        notes and its fingerprint. Scope: platform admins, approvers and team leads; other
        teams' pods are counted, never named."""
        return dict(self._get("mig-plan/", cluster=self._cluster(cluster)))

    def draft_quota_request(
        self,
        team: Annotated[str, Field(description="The team asking (its slug).")],
        kind: Annotated[str, Field(description='"namespace" or "queue".')],
        resource: Annotated[str, Field(description="e.g. requests.nvidia.com/gpu")],
        requested: Annotated[str, Field(description="The new amount, e.g. 8.")],
        reason: Annotated[str, Field(description="Why, in the user's words.")],
        namespace: Annotated[str, Field(description='kind "namespace": which.')] = "",
        cluster_queue: Annotated[str, Field(description='kind "queue": which.')] = "",
        flavor: Annotated[str, Field(description='kind "queue": its flavor.')] = "",
        grant_until: Annotated[str, Field(description="ISO 8601, a temporary grant.")] = "",
        cluster: Annotated[str, CLUSTER] = "",
    ) -> dict[str, Any]:
        """A quota request drafted for the user to submit; nothing is sent.

        Returns {"body": ...} (the JSON of POST /api/v1/quota-requests/), {"command": ...}
        (the `qm quota request` command that submits it) and a note. The portal checks it
        only when the user submits it (permission, validation with field errors, the
        assessment an approver decides on): quota_what_if shows its effect first."""
        body = {
            "cluster": self._cluster(cluster),
            "team": team,
            "kind": kind,
            "namespace": namespace,
            "cluster_queue": cluster_queue,
            "flavor": flavor,
            "resource": resource,
            "requested": requested,
            "reason": reason,
        }
        if grant_until:
            body["grant_until"] = grant_until
        return draft(body, ["qm", "quota", "request"], "POST /api/v1/quota-requests/")

    def draft_mig_change(
        self,
        team: Annotated[str, Field(description="The team asking (its slug).")],
        nodes: Annotated[list[str], Field(description="The nodes to change.")],
        target_config: Annotated[str, Field(description="e.g. all-3g.40gb")],
        reason: Annotated[str, Field(description="Why, in the user's words.")],
        cluster: Annotated[str, CLUSTER] = "",
    ) -> dict[str, Any]:
        """A MIG change request drafted for the user to submit; nothing is sent.

        Returns {"body": ...} (the JSON of POST /api/v1/mig-changes/), {"command": ...}
        (the `qm mig create` command that submits it) and a note. The portal assesses it
        only when the user submits it (which pods it evicts, which quotas it breaks: the
        verdict an approver decides on); mig_plan shows what the planner would ask for."""
        body = {
            "cluster": self._cluster(cluster),
            "team": team,
            "target_config": target_config,
            "reason": reason,
        }
        command = ["qm", "mig", "create", *nodes]
        return draft(body, command, "POST /api/v1/mig-changes/", nodes=nodes)

    def each(self) -> list[Callable[..., dict[str, Any]]]:
        return [
            self.why_waiting,
            self.waiting,
            self.team_quotas,
            self.queues,
            self.quota_what_if,
            self.pending_decisions,
            self.mig_plan,
            self.draft_quota_request,
            self.draft_mig_change,
        ]


def draft(body: dict[str, Any], command: list[str], endpoint: str, **more: Any) -> dict[str, Any]:
    """A request the user submits: its JSON (``body`` and ``more``, the empty fields left
    out) and the ``qm`` command (``command`` and a flag per field of ``body``)."""
    renamed = {"target_config": "config"}  # qm mig create's flag
    flags = [(f"--{renamed.get(k, k).replace('_', '-')}", v) for k, v in body.items() if v]
    return {
        "endpoint": endpoint,
        "body": {k: v for k, v in (body | more).items() if v},
        "command": shlex.join([*command, *(part for flag in flags for part in flag)]),
        "note": "A draft: nothing was sent. The user submits it, and an approver decides.",
    }


def shown(request: dict[str, Any]) -> dict[str, Any]:
    """A request as an approver weighs it: what it asks and its assessment."""
    kept = {k: request[k] for k in DECISION_FIELDS if request.get(k) not in (None, "", [])}
    return kept | {"assessment": request.get("assessment") or {}}


def build(api: Client) -> MCPServer:
    """The server: every tool read-only, described by its docstring (dedented)."""
    server = MCPServer("quartermaster", instructions=INSTRUCTIONS)
    for tool in Tools(api).each():
        server.add_tool(tool, description=inspect.getdoc(tool), annotations=READ_ONLY)
    return server


def main(argv: Sequence[str] | None = None) -> int:
    top = argparse.ArgumentParser(
        prog="qm-mcp",
        description="Quartermaster's read-only tools for an assistant (Model Context Protocol "
        "over stdio), with qm's configuration: QM_URL and QM_TOKEN, or a context of "
        "~/.config/qm/config.yaml.",
    )
    top.add_argument("--context", help="a context of the configuration file")
    top.add_argument("--cluster", help="the cluster asked about by default")
    args = top.parse_args(argv)
    try:
        target = resolve(context=args.context, cluster=args.cluster)
    except ConfigError as exc:
        print(f"qm-mcp: {exc}", file=sys.stderr)
        return 2
    build(Client(target)).run("stdio")
    return 0
