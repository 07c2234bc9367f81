"""Placement rules and named configs from the reference data."""

import pytest

from gpus.catalog import (
    config_layout,
    layout_resources,
    model_for_product,
    placement_errors,
    resource_name,
    standard_configs,
)


@pytest.mark.parametrize(
    ("model", "devices"),
    [
        ("A100-80GB", {"3g.40gb": 2}),
        ("A100-80GB", {"4g.40gb": 1, "3g.40gb": 1}),
        ("A100-80GB", {"1g.10gb": 7}),
        ("A100-80GB", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
        ("A100-80GB", {"2g.20gb": 3, "1g.10gb": 1}),
        ("A100-80GB", {"1g.20gb": 4}),
        ("H100-80GB", {"7g.80gb": 1}),
        ("A30-24GB", {"2g.12gb": 2}),
        ("A30-24GB", {"1g.6gb": 4}),
    ],
)
def test_valid_mixes_fit_one_gpu(model: str, devices: dict[str, int]) -> None:
    assert placement_errors(model, devices) == []


@pytest.mark.parametrize(
    ("model", "devices", "message"),
    [
        ("A100-80GB", {"3g.40gb": 2, "1g.10gb": 1}, "does not fit one A100-80GB"),
        ("A100-80GB", {"4g.40gb": 2}, "at most 1 per GPU"),
        ("A100-80GB", {"7g.80gb": 1, "1g.10gb": 1}, "does not fit"),
        ("A100-80GB", {"1g.10gb": 8}, "at most 7 per GPU"),
        ("A100-80GB", {"1g.20gb": 4, "1g.10gb": 1}, "does not fit"),
        ("A100-80GB", {"1g.5gb": 1}, "has no MIG profile 1g.5gb"),
        ("A30-24GB", {"4g.24gb": 1, "1g.6gb": 1}, "does not fit one A30-24GB"),
        ("A30-24GB", {"2g.12gb": 3}, "at most 2 per GPU"),
        ("B300-288GB", {"1g.10gb": 1}, "unknown GPU model"),
    ],
)
def test_invalid_mixes_say_why(model: str, devices: dict[str, int], message: str) -> None:
    errors = placement_errors(model, devices)
    assert errors and message in errors[0]


def test_standard_configs_per_model() -> None:
    layout, errors = config_layout(standard_configs()["all-balanced"], "A100-80GB", 8)
    assert errors == []
    assert layout_resources(layout) == {
        "nvidia.com/mig-1g.10gb": 16,
        "nvidia.com/mig-2g.20gb": 8,
        "nvidia.com/mig-3g.40gb": 8,
    }
    layout, errors = config_layout(standard_configs()["all-disabled"], "H100-80GB", 8)
    assert layout_resources(layout) == {"nvidia.com/gpu": 8}
    # No device filter and a profile the GPU lacks: mig-parted would fail.
    assert config_layout(standard_configs()["all-1g.5gb"], "A100-80GB", 8)[1]
    # Device-filtered to other GPUs: nothing matches (MIG Manager says success, changes nothing).
    layout, errors = config_layout(standard_configs()["all-1g.35gb"], "H100-80GB", 8)
    assert errors == [] and all(gpu is None for gpu in layout)


def test_names_and_labels() -> None:
    assert resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert model_for_product("NVIDIA-A100-SXM4-80GB") == "A100-80GB"
    assert model_for_product("NVIDIA-A100-80GB-PCIe") == "A100-80GB"
    assert model_for_product("NVIDIA-A100-SXM4-80GB-MIG-3g.40gb") == "A100-80GB"
    assert model_for_product("NVIDIA-H200") == "H200-141GB"
    assert model_for_product("Unknown-GPU") is None


def test_a_layout_with_mig_on_and_no_instance_offers_nothing() -> None:
    from gpus.catalog import NO_INSTANCES, promised_resources

    layout, errors = config_layout(standard_configs()["all-enabled"], "H100-80GB", 8)
    assert (layout, errors) == ([NO_INSTANCES] * 8, [])
    assert layout_resources(layout) == {}
    offered, reasons = promised_resources(
        "all-enabled", node="gpu-h100-01", model="H100-80GB", gpu_count=8, custom={}
    )
    assert (offered, reasons) == ({}, [])
