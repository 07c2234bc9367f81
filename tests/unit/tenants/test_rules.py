"""Quota and LimitRange rules: refused with a field named, or accepted with a warning."""

import pytest

from tenants.rules import LimitSpec, check_limit, check_quota_item


@pytest.mark.parametrize(
    ("resource", "hard"),
    [
        ("requests.nvidia.com/gpu", "16"),
        ("requests.nvidia.com/mig-3g.40gb", "2"),
        ("requests.nvidia.com/mig-1g.10gb.me", "1"),
        ("pods", "50"),
        ("requests.cpu", "500m"),
        ("requests.memory", "64Gi"),
        ("limits.memory", "128Gi"),
        ("count/jobs.batch", "10"),
        ("gold.storageclass.storage.k8s.io/requests.storage", "1Ti"),
        ("requests.nvidia.com/gpu", "0"),
    ],
)
def test_valid_quota_items_pass_without_warning(resource: str, hard: str) -> None:
    check = check_quota_item(resource, hard)
    assert check.errors == []
    assert check.warnings == []


@pytest.mark.parametrize(
    ("resource", "hard", "error"),
    [
        ("requests.nvidia.com/gpu", "two", "hard: 'two' is not a Kubernetes quantity"),
        ("requests.nvidia.com/gpu", "1500m", "hard: must be a whole number"),
        ("requests.nvidia.com/gpu", "1.5", "hard: must be a whole number"),
        ("requests.cpu", "-1", "hard: must be greater than or equal to 0"),
        ("pods", "2.5", "hard: must be a whole number"),
        ("gpus", "4", "resource: 'gpus' is not a quota resource"),
        ("requests.nvidia.com/", "4", "resource: name part must be non-empty"),
        ("requests.nvidia.com/mig 3g", "4", "resource: name part must consist of"),
        ("", "4", "resource: this field is required"),
    ],
)
def test_invalid_quota_items_name_the_field(resource: str, hard: str, error: str) -> None:
    check = check_quota_item(resource, hard)
    assert any(message.startswith(error) for message in check.errors), check.errors


@pytest.mark.parametrize("resource", ["limits.nvidia.com/gpu", "nvidia.com/gpu"])
def test_extended_resource_quota_without_requests_prefix_is_accepted_but_warned(
    resource: str,
) -> None:
    check = check_quota_item(resource, "16")
    assert check.errors == []
    assert len(check.warnings) == 1
    assert "never enforced" in check.warnings[0]
    assert "Use requests.nvidia.com/gpu" in check.warnings[0]


def test_seed_limit_range_default_gpu_is_accepted_with_a_sidecar_warning() -> None:
    check = check_limit(
        LimitSpec(
            limit_type="Container", resource="nvidia.com/gpu", default="1", default_request="1"
        )
    )
    assert check.errors == []
    assert "sidecars" in check.warnings[0]


def test_gpu_max_only_is_the_quiet_choice() -> None:
    check = check_limit(LimitSpec(limit_type="Container", resource="nvidia.com/gpu", max="2"))
    assert check.errors == []
    assert check.warnings == []


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (
            LimitSpec("Container", "nvidia.com/gpu", default="2", default_request="1"),
            "default_request: default value 2 must equal defaultRequest value 1 in nvidia.com/gpu",
        ),
        (LimitSpec("Container", "nvidia.com/gpu", max="0.5"), "max: must be a whole number"),
        (
            LimitSpec("Container", "cpu", default="1", default_request="2"),
            "default_request: default request 2",
        ),
        (
            LimitSpec("Container", "cpu", min="4", max="2"),
            "min: min value 4 is greater than max value 2",
        ),
        (LimitSpec("Container", "cpu", default="8", max="4"), "default: 8 is greater than max 4"),
        (
            LimitSpec("Pod", "cpu", default="1"),
            "default: default and default_request may not be set",
        ),
        (LimitSpec("Node", "cpu", max="1"), "limit_type: must be one of Container, Pod"),
        (LimitSpec("Container", "cpu"), "set at least one of"),
        (
            LimitSpec("Container", "requests.cpu", max="1"),
            "resource: a LimitRange names the resource",
        ),
        (LimitSpec("Container", "memory", max="lots"), "max: 'lots' is not a Kubernetes quantity"),
    ],
)
def test_invalid_limits_name_the_field(spec: LimitSpec, error: str) -> None:
    check = check_limit(spec)
    assert any(message.startswith(error) for message in check.errors), check.errors


def test_gpu_min_is_warned_because_it_rejects_sidecars() -> None:
    check = check_limit(LimitSpec("Container", "nvidia.com/gpu", min="1", max="2"))
    assert check.errors == []
    assert "rejects every container" in check.warnings[0]


@pytest.mark.parametrize(
    ("resource", "hint"),
    [
        ("requests.nvidia.com/mig-3g.40g", "Did you mean nvidia.com/mig-3g.40gb?"),
        ("requests.nvidia.com/tpu", ""),
    ],
)
def test_gpu_resources_no_gpu_offers_are_warned_with_a_suggestion(resource: str, hint: str) -> None:
    check = check_quota_item(resource, "2")
    assert check.errors == []
    assert "not offered by any GPU model in the MIG catalog" in check.warnings[0]
    assert hint in check.warnings[0]


def test_plus_in_a_mig_name_is_refused_with_the_right_spelling() -> None:
    check = check_quota_item("requests.nvidia.com/mig-1g.10gb+me", "1")
    assert "resource: MIG resource names spell '+' as '.': requests.nvidia.com/mig-1g.10gb.me" in (
        check.errors
    )


def test_every_mig_profile_name_of_the_catalog_is_known() -> None:
    for resource in (
        "nvidia.com/mig-1g.10gb.me",
        "nvidia.com/mig-4g.96gb.gfx",
        "nvidia.com/mig-3g.40gb.shared",
        "nvidia.com/gpu.shared",
    ):
        assert check_quota_item(f"requests.{resource}", "1").warnings == []


def test_limit_range_typo_in_gpu_resource_is_warned() -> None:
    check = check_limit(LimitSpec("Container", "nvidia.com/mig-2g.20g", max="1"))
    assert "Did you mean nvidia.com/mig-2g.20gb?" in check.warnings[0]


@pytest.mark.parametrize(
    ("resource", "value", "refused"),
    [
        ("requests.nvidia.com/gpu", "1e100", True),
        ("requests.nvidia.com/gpu", "16Gi", True),
        ("requests.nvidia.com/gpu", "2147483648", True),
        ("requests.nvidia.com/gpu", "2147483647", False),
        ("pods", "9223372036854775808", True),
        ("requests.memory", "1Ei", False),
        ("requests.memory", "1e100", True),
    ],
)
def test_every_quantity_has_an_upper_bound(resource: str, value: str, refused: bool) -> None:
    errors = check_quota_item(resource, value).errors
    assert bool(errors) == refused, errors
    if refused:
        assert errors[0].startswith("hard: must be at most ")
