"""What needs attention on a node's GPUs, from their DCGM readings (pure)."""

from __future__ import annotations

from devcluster import dcgm as exporter
from gpus import dcgm
from gpus.xid import describe
from health import findings

A100_LAYOUT = [{"mig-enabled": 1, "3g.40gb": 2} for _ in range(8)]


def test_a_healthy_node_has_no_findings() -> None:
    text = exporter.exposition(
        node="gpu-a100-01",
        product="NVIDIA-A100-SXM4-80GB",
        memory_mib=81920,
        layout=A100_LAYOUT,
        pods=[("team-b", "filler-0", "main", {"nvidia.com/mig-3g.40gb": 3})],
    )
    gpus = dcgm.gpus_by_node(dcgm.parse_exposition(text))["gpu-a100-01"]
    assert findings.assess(gpus) == []
    assert findings.worst([]) == "ok"


def test_an_xid_79_gpu_reports_nothing_else_and_needs_the_node_drained() -> None:
    text = exporter.exposition(
        node="gpu-h100-02",
        product="NVIDIA-H100-80GB-HBM3",
        memory_mib=81559,
        layout=[{} for _ in range(8)],
        pods=[],
        xids={5: 79},
    )
    gpus = dcgm.gpus_by_node(dcgm.parse_exposition(text))["gpu-h100-02"]
    lost = gpus[5]
    assert (lost.xid, lost.xid_message, lost.lost, lost.temperature_c) == (
        79,
        "GPU has fallen off the bus",
        True,
        None,
    )
    (finding,) = findings.assess(gpus)
    assert finding.severity == "critical" and finding.needs_drain
    assert finding.title == "GPU 5: Xid 79, GPU has fallen off the bus (PCIe) (no metrics since)"
    assert (
        finding.advice == "Cordon and drain the node, then reboot it. Replace the GPU if it recurs."
    )
    assert findings.worst([finding]) == "critical"


def test_xid_severity_follows_the_catalog() -> None:
    def severity(code: int) -> str:
        (finding,) = findings.assess([dcgm.Gpu(0, temperature_c=40, xid=code)])
        return finding.severity

    assert severity(13) == "info"  # the application's fault
    assert severity(63) == "warning"  # a reset activates the remap
    assert severity(48) == severity(95) == severity(119) == "critical"
    assert severity(999) == "warning"  # unknown: look it up
    assert describe(999, "Some new error").meaning == "Some new error"
    assert not describe(94).needs_drain and describe(74).needs_drain


def test_heat_and_failed_row_remapping_are_findings() -> None:
    found = findings.assess(
        [dcgm.Gpu(0, temperature_c=91), dcgm.Gpu(1, temperature_c=50, row_remap_failure=True)],
        hot_c=85,
    )
    assert [(f.gpu, f.severity, f.needs_drain) for f in found] == [
        (1, "critical", True),
        (0, "warning", False),
    ]
    assert found[1].title == "GPU 0: 91 °C"
