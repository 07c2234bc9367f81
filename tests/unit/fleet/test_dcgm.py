"""DCGM exporter text into GPU health and findings (pure)."""

from __future__ import annotations

from devcluster import dcgm as exporter
from fleet import dcgm
from fleet.xid import describe

A100_LAYOUT = [{"mig-enabled": 1, "3g.40gb": 2} for _ in range(8)]


def test_the_exporters_text_becomes_gpus_and_mig_instances() -> None:
    text = exporter.exposition(
        node="gpu-a100-01",
        product="NVIDIA-A100-SXM4-80GB",
        memory_mib=81920,
        layout=A100_LAYOUT,
        pods=[("team-b", "filler-0", "main", {"nvidia.com/mig-3g.40gb": 3})],
    )
    nodes = dcgm.gpus_by_node(dcgm.parse_exposition(text))
    (gpus,) = nodes.values()
    assert list(nodes) == ["gpu-a100-01"]
    assert [g.index for g in gpus] == list(range(8))
    first = gpus[0]
    assert first.model == "NVIDIA A100-SXM4-80GB" and first.uuid.startswith("GPU-")
    assert [(i.profile, i.instance, i.pod) for i in first.instances] == [
        ("3g.40gb", 1, "filler-0"),
        ("3g.40gb", 2, "filler-0"),
    ]
    # The third instance given to the pod is on GPU 1 (instance ids count per GPU).
    assert [(i.instance, i.pod) for i in gpus[1].instances] == [(1, "filler-0"), (2, "")]
    assert all(55 <= (i.util or 0) <= 95 for i in first.instances)
    assert gpus[1].instances[1].util == 0.0
    assert first.util is not None and first.temperature_c is not None
    assert gpus[7].util == 0.0 and gpus[7].xid == 0
    assert dcgm.assess(gpus) == []


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
    (finding,) = dcgm.assess(gpus)
    assert finding.severity == "critical" and finding.needs_drain
    assert finding.title == "GPU 5: Xid 79, GPU has fallen off the bus (PCIe) (no metrics since)"
    assert (
        finding.advice == "Cordon and drain the node, then reboot it. Replace the GPU if it recurs."
    )
    assert dcgm.worst([finding]) == "critical"


def test_xid_severity_follows_the_catalog() -> None:
    def severity(code: int) -> str:
        (finding,) = dcgm.assess([dcgm.Gpu(0, temperature_c=40, xid=code)])
        return finding.severity

    assert severity(13) == "info"  # the application's fault
    assert severity(63) == "warning"  # a reset activates the remap
    assert severity(48) == severity(95) == severity(119) == "critical"
    assert severity(999) == "warning"  # unknown: look it up
    assert describe(999, "Some new error").meaning == "Some new error"
    assert not describe(94).needs_drain and describe(74).needs_drain


def test_heat_and_failed_row_remapping_are_findings() -> None:
    findings = dcgm.assess(
        [dcgm.Gpu(0, temperature_c=91), dcgm.Gpu(1, temperature_c=50, row_remap_failure=True)],
        hot_c=85,
    )
    assert [(f.gpu, f.severity, f.needs_drain) for f in findings] == [
        (1, "critical", True),
        (0, "warning", False),
    ]
    assert findings[1].title == "GPU 0: 91 °C"


def test_the_parser_takes_either_host_label_and_escaped_values() -> None:
    text = (
        '# HELP x y\nDCGM_FI_DEV_XID_ERRORS{gpu="0",hostname="n1",err_msg="a \\"quoted\\" text"} 48\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",hostname="n1"} 61 1700000000000\n'
        'DCGM_FI_DEV_SOMETHING_ELSE{gpu="0"} 1\n'
        "garbage line\n"
    )
    (gpu,) = dcgm.gpus_by_node(dcgm.parse_exposition(text))["n1"]
    assert (gpu.xid, gpu.xid_message, gpu.temperature_c) == (48, 'a "quoted" text', 61)


def test_prometheus_query_results_become_the_same_samples() -> None:
    result = [
        {
            "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "2", "Hostname": "n2"},
            "value": [1, "37"],
        },
        {
            "metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": "2", "Hostname": "n2"},
            "value": [1, "55"],
        },
    ]
    (gpu,) = dcgm.gpus_by_node(dcgm.samples_from_prometheus(result))["n2"]
    assert (gpu.index, gpu.util, gpu.temperature_c) == (2, 37.0, 55.0)
