"""``qm-mcp``'s tools as an assistant lists them, its drafts, which send nothing (each one's
command is one ``qm`` parses into the very request its JSON body is), and the server
refusing to start without a portal to ask."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from assist.main import main as console_script
from cli.client import Client
from cli.config import Target
from cli.main import parser


@pytest.fixture(scope="module")
def server() -> Any:
    """``assist.server``, imported by the tests that use it: the MCP SDK it imports (some 550
    pydantic models, about half a second) is not paid by every process collecting the suite."""
    import assist.server

    return assist.server


@pytest.fixture(scope="module")
def tools(server: Any) -> Any:
    return server.Tools(
        Client(Target(url="http://127.0.0.1:1", token="qm_unused", cluster="training"))
    )


def test_each_tool_is_read_only_and_says_what_it_returns_and_to_whom(
    server: Any, tools: Any
) -> None:
    from mcp import Client as McpClient

    async def listed() -> list[object]:
        async with McpClient(server.build(tools.api)) as client:
            return list((await client.list_tools()).tools)

    offered: list[object] = asyncio.run(listed())
    assert len(offered) == len(tools.each()) == 9
    for tool in offered:
        text = str(tool.description)  # type: ignore[attr-defined]
        assert tool.annotations.read_only_hint, tool  # type: ignore[attr-defined]
        assert "Returns" in text and ("Scope" in text or "nothing is sent" in text), text
        assert not any(line.startswith(" ") for line in text.splitlines()), text  # dedented


def parsed(command: str) -> dict[str, object]:
    words = shlex.split(command)
    assert words[0] == "qm"
    return vars(parser().parse_args(words[1:]))


def test_a_quota_request_draft_is_the_command_that_submits_its_body(tools: Any) -> None:
    drafted = tools.draft_quota_request(
        team="team-a",
        kind="queue",
        resource="nvidia.com/gpu",
        requested="16",
        reason="a sweep's week; then back",
        cluster_queue="cq-train",
        flavor="h100-80gb",
        grant_until="2027-01-08T00:00:00Z",
    )
    assert drafted["endpoint"] == "POST /api/v1/quota-requests/"
    assert drafted["body"] == {
        "cluster": "training",  # the configured cluster
        "team": "team-a",
        "kind": "queue",
        "cluster_queue": "cq-train",
        "flavor": "h100-80gb",
        "resource": "nvidia.com/gpu",
        "requested": "16",
        "reason": "a sweep's week; then back",
        "grant_until": "2027-01-08T00:00:00Z",
    }
    args = parsed(drafted["command"])
    assert (args["command"], args["verb"]) == ("quota", "request")
    assert {k: args[k] for k in drafted["body"]} == drafted["body"]


def test_a_mig_change_draft_is_the_command_that_submits_its_body(tools: Any) -> None:
    drafted = tools.draft_mig_change(
        team="team-a",
        nodes=["gpu-a100-03", "gpu-a100-04"],
        target_config="all-3g.40gb",
        reason="back to the pool's layout",
        cluster="default",
    )
    body = drafted["body"]
    assert body["nodes"] == ["gpu-a100-03", "gpu-a100-04"] and body["cluster"] == "default"
    args = parsed(drafted["command"])
    assert (args["command"], args["verb"]) == ("mig", "create")
    assert (args["nodes"], args["config"], args["team"], args["reason"], args["cluster"]) == (
        body["nodes"],
        body["target_config"],
        body["team"],
        body["reason"],
        body["cluster"],
    )


def test_without_a_portal_configured_it_says_how_and_does_not_start(
    server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("QM_URL", "QM_TOKEN", "QM_CLUSTER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("QM_CONFIG", str(tmp_path / "absent.yaml"))
    assert server.main([]) == 2
    assert "qm-mcp: no portal configured: set QM_URL and QM_TOKEN" in capsys.readouterr().err


def test_without_the_sdk_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("mcp", "mcp.server"):  # as if the mcp extra were not installed
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "assist.server", raising=False)
    assert console_script() == 2
    assert "pip install 'quartermaster[mcp]'" in capsys.readouterr().err
