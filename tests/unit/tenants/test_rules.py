"""Quota and LimitRange rules: refused with a field named, or accepted with a warning."""

import pytest

from tenants.models import LimitRangeItem
from tenants.rules import (
    LimitSpec,
    check_limit,
    check_quota_item,
    limit_range_pitfalls,
    queue_coverage_notes,
    stored_limit,
)


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


def test_gpu_max_alone_is_warned_because_the_server_stores_it_as_the_default() -> None:
    check = check_limit(LimitSpec(limit_type="Container", resource="nvidia.com/gpu", max="2"))
    assert check.errors == []
    assert check.warnings == [
        "Its max (2) is stored as the default and defaultRequest, since they are unset: every "
        "container that does not set nvidia.com/gpu gets 2 of it, sidecars, init containers and "
        "CPU-only containers included, and waits for one. Kueue charges that default request "
        "for a Job that sets only limits, so a queue admits pods that then ask for more. Cap "
        "devices with the namespace quota (requests.nvidia.com/gpu) and the team's queue "
        "instead; a container that must not get it sets nvidia.com/gpu: 0.",
        "Pods that ask only for MIG slices (nvidia.com/mig-…) get 2 nvidia.com/gpu as well: "
        "they then need a whole GPU too, and no MIG change starts them.",
    ]


def test_a_mig_max_alone_is_warned_without_the_whole_gpu_note() -> None:
    check = check_limit(LimitSpec("Container", "nvidia.com/mig-1g.10gb", max="2"))
    assert len(check.warnings) == 1
    assert check.warnings[0].startswith(
        "Its max (2) is stored as the default and defaultRequest, since they are unset: every "
        "container that does not set nvidia.com/mig-1g.10gb gets 2 of it"
    )


@pytest.mark.parametrize(
    ("spec", "default", "default_request"),
    [
        (LimitSpec("Container", "nvidia.com/gpu", max="2"), "2", "2"),
        (LimitSpec("Container", "nvidia.com/gpu", default="1", max="2"), "1", "1"),
        (LimitSpec("Container", "cpu", min="100m"), "", "100m"),
        (LimitSpec("Container", "cpu", default="2", min="100m"), "2", "2"),
        (LimitSpec("Container", "cpu", default_request="1", max="4"), "4", "1"),
        (LimitSpec("Pod", "nvidia.com/gpu", max="8"), "", ""),
    ],
)
def test_stored_limit_follows_the_api_servers_defaulting(
    spec: LimitSpec, default: str, default_request: str
) -> None:
    stored = stored_limit(spec)
    assert (stored.default, stored.default_request) == (default, default_request)


def test_a_device_default_request_under_its_max_is_refused_as_the_server_would() -> None:
    check = check_limit(LimitSpec("Container", "nvidia.com/gpu", default_request="1", max="2"))
    assert check.errors == [
        "default_request: default value 2 (the max, stored as the default) must equal "
        "defaultRequest value 1 in nvidia.com/gpu (devices cannot be overcommitted)"
    ]


def test_a_pod_max_for_a_gpu_is_warned_because_it_refuses_cpu_only_pods() -> None:
    check = check_limit(LimitSpec("Pod", "nvidia.com/gpu", max="8"))
    assert check.errors == []
    assert check.warnings == [
        "A Pod max for nvidia.com/gpu refuses every pod that does not set a nvidia.com/gpu "
        'limit (CPU-only pods included): the API server answers "No limit is specified".'
    ]


def test_defaults_for_two_devices_land_on_the_same_containers() -> None:
    specs = [
        LimitSpec("Container", "nvidia.com/mig-2g.20gb", max="1"),
        LimitSpec("Container", "nvidia.com/mig-1g.10gb", max="2"),
        LimitSpec("Container", "cpu", default="2"),
    ]
    assert limit_range_pitfalls(specs) == [
        "Every container that sets none of them gets 2 nvidia.com/mig-1g.10gb and 1 "
        "nvidia.com/mig-2g.20gb at once. A GPU offers one layout: such a pod needs several "
        "flavors together, which Kueue turns into a node selector no node matches."
    ]
    assert limit_range_pitfalls(specs[:1] + specs[2:]) == []


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
    assert "refuses every container that does not request it" in check.warnings[-1]


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


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        (LimitSpec("Container", "nvidia.com/gpu", max="2"), ("2, from max", "2, from max")),
        (LimitSpec("Container", "nvidia.com/gpu", default="1"), ("1", "1, from default")),
        (LimitSpec("Container", "cpu", min="100m"), ("", "100m, from min")),
        (LimitSpec("Container", "cpu", default="2", default_request="1"), ("2", "1")),
        (LimitSpec("Pod", "nvidia.com/gpu", max="8"), ("", "")),
    ],
)
def test_the_page_shows_the_defaults_the_server_stores(
    spec: LimitSpec, shown: tuple[str, str]
) -> None:
    item = LimitRangeItem(**spec.__dict__)
    assert (item.default_shown, item.default_request_shown) == shown


def test_a_gpu_default_is_warned_in_one_sentence() -> None:
    check = check_limit(LimitSpec("Container", "nvidia.com/gpu", default="1", default_request="1"))
    assert check.warnings[0].startswith(
        "Every container that does not set nvidia.com/gpu gets 1 of it, sidecars, init "
        "containers and CPU-only containers included, and waits for one."
    )


def test_a_cpu_quota_beside_queues_that_cover_gpus_only_is_warned() -> None:
    gpu_only = {"cq-infer": ["nvidia.com/gpu", "nvidia.com/mig-3g.40gb"]}
    (note,) = queue_coverage_notes(["requests.cpu", "pods"], gpu_only)
    assert note.startswith("requests.cpu: every pod of this namespace must then ask for cpu")
    assert "cq-infer does not cover cpu" in note
    assert len(queue_coverage_notes(["cpu", "limits.memory"], gpu_only)) == 2
    assert queue_coverage_notes(["requests.cpu"], {"cq": ["cpu", "nvidia.com/gpu"]}) == []
    assert queue_coverage_notes(["requests.cpu"], {}) == []  # no Kueue queue: nothing to say
    assert queue_coverage_notes(["requests.nvidia.com/gpu", "pods"], gpu_only) == []
