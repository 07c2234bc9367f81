"""``qm-mcp``, the installed console script, started over stdio by the Model Context
Protocol SDK's own client against the portal served on the demo scenario and cluster: its
tools are the API's answers to the token's user, redacted as the API redacts them, and none
of them writes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from changes.models import MigChangeRequest, QuotaChangeRequest
from cli.client import describe
from cluster.models import ObservedPod
from portal.models import AuditEvent
from tests.integration.conftest import token

pytestmark = pytest.mark.django_db(transaction=True)
QM_MCP = Path(sys.executable).with_name("qm-mcp")
TOOLS = {
    "why_waiting", "waiting", "team_quotas", "queues", "quota_what_if", "pending_decisions",
    "mig_plan", "draft_quota_request", "draft_mig_change",
}  # fmt: skip


def session(url: str, key: str, calls: list[tuple[str, dict[str, Any]]], home: Path) -> Any:
    """``qm-mcp`` as a subprocess with only ``QM_URL``/``QM_TOKEN``: its tools as listed,
    and each call's result (``is_error``, the text the model reads, the structured content)."""
    # lazy: the SDK's import builds some 550 pydantic models (0.5-1.1 s); at the top of the
    # module every test process of a run paid it while collecting, not only the one that runs
    # these tests
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=str(QM_MCP),
        env={"QM_URL": url, "QM_TOKEN": key, "HOME": str(home), "PATH": os.environ["PATH"]},
    )

    async def talk() -> tuple[Any, list[Any]]:
        async with Client(server) as client:
            listed = (await client.list_tools()).tools
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
            return listed, results

    listed, results = asyncio.run(talk())
    return listed, [
        (r.is_error, "\n".join(c.text for c in r.content), r.structured_content) for r in results
    ]


def writes() -> tuple[int, int, int]:
    """What a write of intent would leave: audit rows and requests."""
    return (
        AuditEvent.objects.count(),
        MigChangeRequest.objects.count(),
        QuotaChangeRequest.objects.count(),
    )


def test_a_lead_reads_every_tool_as_the_api_answers_them(portal: str, tmp_path: Path) -> None:
    lead = token("lead-a")
    before = writes()
    calls = [
        ("why_waiting", {"namespace": "team-a", "name": "train-3g"}),
        ("waiting", {"team": "team-a"}),
        ("team_quotas", {"team": "team-a", "days": 7}),
        ("queues", {}),
        (
            "quota_what_if",
            {
                "cluster_queue": "cq-train",
                "flavor": "a100-80gb-3g",
                "resource": "nvidia.com/mig-3g.40gb",
                "nominal_quota": "32",
            },
        ),
        ("pending_decisions", {}),
        ("mig_plan", {}),
        (
            "draft_quota_request",
            {
                "team": "team-a",
                "kind": "namespace",
                "namespace": "team-a",
                "resource": "requests.nvidia.com/gpu",
                "requested": "20",
                "reason": "a sweep's week",
            },
        ),
        (
            "draft_mig_change",
            {
                "team": "team-a",
                "nodes": ["gpu-a100-03"],
                "target_config": "all-3g.40gb",
                "reason": "back to its pool's layout",
            },
        ),
        # Another team's: the API's refusal, word for word.
        ("why_waiting", {"namespace": "team-b", "name": "dev-test-1g"}),
        ("team_quotas", {"team": "team-b"}),
    ]
    listed, results = session(portal, lead, calls, tmp_path)
    assert {tool.name for tool in listed} == TOOLS
    assert all(tool.annotations.read_only_hint for tool in listed)
    assert all("Returns" in (tool.description or "") for tool in listed)
    for (name, _), (error, text, _) in zip(calls[:9], results[:9], strict=True):
        assert not error, (name, text)
    why, waiting, quotas, queues, what_if, pending, plan, draft, mig = (r[2] for r in results[:9])
    (row,) = why["waiting"]
    assert (row["namespace"], row["name"]) == ("team-a", "train-3g")
    assert "3g.40gb" in row["cause"] + " ".join(row["evidence"])
    assert set(row["estimate"]) >= {"summary", "basis"}
    assert row in waiting["waiting"]
    assert {ns["team"] for ns in quotas["namespaces"]} == {"team-a"}
    assert quotas["namespaces"][0]["quota"]["requests.nvidia.com/gpu"] == "16"
    assert {"cq-train", "cq-infer", "cq-dev"} <= {q["name"] for q in queues["cluster_queues"]}
    assert {q["name"] for q in queues["local_queues"]} == {"team-a-train"}
    assert what_if["known"] is True and "admitted" in what_if
    assert set(pending) == {"mig_changes", "quota_requests"}
    assert plan["fingerprint"] and plan["batches"]
    # The plan evicts another team's pod: counted, never named.
    assert [n["evicts"] for n in plan["nodes"]] == [["(another team's pod)"]]
    assert draft["body"]["requested"] == "20"
    assert draft["command"].startswith("qm quota request --team team-a --kind namespace")
    assert mig["command"].startswith("qm mig create gpu-a100-03 --team team-a")
    # The refusals are the API's own words, and so the answers name no other team's pod.
    headers = {"Authorization": f"Bearer {lead}"}
    asked = requests.get(
        f"{portal}/api/v1/waiting/", params={"namespace": "team-b"}, headers=headers, timeout=30
    )
    assert asked.status_code == 400
    refused, other_team = results[9:]
    assert refused[:2] == (True, f"Error executing tool why_waiting: {describe(asked)}")
    assert "namespace: No such namespace among your teams': use one of team-a." in refused[1]
    assert other_team[0] and "team: No such team among yours: use one of team-a." in other_team[1]
    others = set(
        ObservedPod.objects.on_every_cluster()
        .exclude(namespace="team-a")
        .values_list("name", flat=True)
    )
    assert others
    said = "\n".join(text for _, text, _ in results)
    assert [pod for pod in others if pod in said] == []
    assert writes() == before  # nothing written, not even an audit row


def test_an_approver_sees_what_waits_for_a_decision_and_no_tool_decides(
    portal: str, tmp_path: Path
) -> None:
    asked = requests.post(
        f"{portal}/api/v1/quota-requests/",
        json={
            "team": "team-a",
            "kind": "namespace",
            "namespace": "team-a",
            "resource": "requests.nvidia.com/gpu",
            "requested": "20",
            "reason": "a sweep",
        },
        headers={"Authorization": f"Bearer {token('lead-a')}"},
        timeout=30,
    )
    assert asked.status_code == 201, asked.text
    approver = token("approver")  # (its creation is audited)
    before = writes()
    _, [(error, text, pending)] = session(portal, approver, [("pending_decisions", {})], tmp_path)
    assert not error, text
    (request,) = [r for r in pending["quota_requests"] if r["id"] == asked.json()["id"]]
    assert (request["state"], request["team"], request["requested"]) == ("pending", "team-a", "20")
    assert request["assessment"]["fingerprint"] == asked.json()["assessment"]["fingerprint"]
    assert json.loads(text) == pending
    assert writes() == before
    assert QuotaChangeRequest.objects.get(pk=request["id"]).state == "pending"
    # A platform admin's own request is none of theirs to decide: left out for them alone.
    admin = token("admin")
    own = requests.post(
        f"{portal}/api/v1/quota-requests/",
        json={
            "team": "team-b",
            "kind": "namespace",
            "namespace": "team-b",
            "resource": "requests.nvidia.com/gpu",
            "requested": "24",
            "reason": "a bigger sweep",
        },
        headers={"Authorization": f"Bearer {admin}"},
        timeout=30,
    )
    assert own.status_code == 201, own.text
    _, [(_, _, mine)] = session(portal, admin, [("pending_decisions", {})], tmp_path)
    ids = [r["id"] for r in mine["quota_requests"]]
    assert request["id"] in ids and own.json()["id"] not in ids
    _, [(_, _, theirs)] = session(portal, approver, [("pending_decisions", {})], tmp_path)
    (seen,) = [r for r in theirs["quota_requests"] if r["id"] == own.json()["id"]]
    assert seen["requested_by"] == "admin"
    _, [(_, _, none)] = session(portal, token("lead-a"), [("pending_decisions", {})], tmp_path)
    assert none == {"mig_changes": [], "quota_requests": []}  # a lead decides nothing
