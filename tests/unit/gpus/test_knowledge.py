"""The fault table as data, and every place that points into it."""

from __future__ import annotations

import re
from pathlib import Path

from django.test import Client

from diagnostics import explain
from gpus import dcgm, knowledge
from health import findings

ROOT = Path(__file__).resolve().parents[3]


def test_the_seed_table_is_all_there_by_layer() -> None:
    layers = dict(knowledge.by_layer())
    assert [len(layers[layer]) for layer in knowledge.LAYERS] == [8, 3, 3, 4]
    # A DRA claim the scheduler cannot allocate waits at scheduling, like a missing GPU node.
    assert "dra-claim" in {f.key for f in layers[knowledge.SCHEDULING]}
    assert {f.key for f in layers[knowledge.HARDWARE]} == {
        "gpu-lost",
        "xid-hardware",
        "thermal",
        "operator-crashloop",
    }
    assert all(f.symptom and f.causes and f.check and f.portal for f in knowledge.FAULTS)


def test_every_topic_the_code_names_exists() -> None:
    named = []
    for path in ("diagnostics/explain.py", "health/findings.py", "diagnostics/operator_check.py"):
        text = (ROOT / path).read_text()
        named += re.findall(r'topic="([^"]+)"', text)
        named += re.findall(r'else "([a-z]+(?:-[a-z]+)+)",?\n', text)
    assert len(named) >= 12
    assert [t for t in named if t not in knowledge.BY_KEY] == []
    assert {knowledge.for_xid(c) for c in (79, 48, 74, 95, 13)} <= set(knowledge.BY_KEY)


def test_explanations_and_findings_point_at_their_fault() -> None:
    view = explain.FleetView(
        offered={"nvidia.com/mig-2g.20gb": 8},
        free={"nvidia.com/mig-2g.20gb": 8},
        offered_by_node={"gpu-a100-03": {"nvidia.com/mig-2g.20gb": 8}},
    )
    why = explain.explain_pod(
        namespace="team-a",
        name="train-3g",
        requests={"nvidia.com/mig-3g.40gb": 1},
        message="0/5 nodes are available: 5 Insufficient nvidia.com/mig-3g.40gb. preemption: "
        "0/5 nodes are available: 5 No preemption victims found for incoming pod.",
        fleet=view,
    )
    assert why.topic == "mig-mismatch"
    (finding,) = findings.assess([dcgm.Gpu(3, xid=79)])
    assert finding.topic == "gpu-lost"


def test_the_troubleshooting_page_lists_every_fault_with_an_anchor(
    client: Client, team_a_member: object
) -> None:
    client.force_login(team_a_member)  # type: ignore[arg-type]
    page = client.get("/fleet/troubleshooting/").content.decode()
    for fault in knowledge.FAULTS:
        assert f'<tr id="{fault.key}">' in page
    assert "Gang scheduling stalls" in page
