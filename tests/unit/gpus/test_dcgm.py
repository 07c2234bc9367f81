"""DCGM exporter text (and Prometheus answers) into per-GPU readings (pure)."""

from __future__ import annotations

from devcluster import dcgm as exporter
from gpus import dcgm

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
