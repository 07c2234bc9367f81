"""Kueue's schema, CEL and webhook rules, mirrored so the portal refuses before applying."""

from typing import Any

import pytest

from queues.rules import (
    check_fungibility,
    check_label_selector,
    check_preemption,
    check_resource_groups,
    check_taints,
    check_tolerations,
    check_weight,
)


def group(flavor: str = "h100", quotas: dict[str, Any] | None = None) -> dict[str, Any]:
    resources = [{"name": name, **q} for name, q in (quotas or {}).items()]
    return {
        "coveredResources": [r["name"] for r in resources],
        "flavors": [{"name": flavor, "resources": resources}],
    }


GPU = {"nvidia.com/gpu": {"nominalQuota": "8"}}


def messages(
    groups: Any,
    *,
    has_parent: bool = True,
    owner: str = "ClusterQueue",
    known: list[str] | None = None,
) -> list[str]:
    return [
        str(i)
        for i in check_resource_groups(
            groups, owner=owner, has_parent=has_parent, known_flavors=known
        )
    ]


def test_the_recorded_cluster_queue_shape_is_valid() -> None:
    groups = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {
                    "name": "h100-80gb",
                    "resources": [
                        {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 8}
                    ],
                }
            ],
        },
        {
            "coveredResources": ["nvidia.com/mig-3g.40gb"],
            "flavors": [
                {
                    "name": "a100-80gb-3g",
                    "resources": [{"name": "nvidia.com/mig-3g.40gb", "nominalQuota": 4}],
                }
            ],
        },
    ]
    assert messages(groups, known=["h100-80gb", "a100-80gb-3g"]) == []


def test_borrowing_limit_needs_a_cohort() -> None:
    groups = [group(quotas={"nvidia.com/gpu": {"nominalQuota": "8", "borrowingLimit": "4"}})]
    assert messages(groups, has_parent=False) == [
        "resourceGroups[0].flavors[0].resources[0].borrowingLimit: borrowingLimit must be nil "
        "when cohort is empty: set a cohort to borrow, or clear the limit"
    ]


def test_lending_limit_needs_a_cohort_and_at_most_the_nominal_quota() -> None:
    assert (
        "lendingLimit must be nil when cohort is empty"
        in messages(
            [group(quotas={"nvidia.com/gpu": {"nominalQuota": "8", "lendingLimit": "4"}})],
            has_parent=False,
        )[0]
    )
    assert messages(
        [group(quotas={"nvidia.com/gpu": {"nominalQuota": "8", "lendingLimit": "9"}})]
    ) == [
        "resourceGroups[0].flavors[0].resources[0].lendingLimit: must be less than or equal "
        "to the nominalQuota (8)"
    ]


def test_a_cohort_may_lend_more_than_its_nominal_quota_but_needs_a_parent() -> None:
    groups = [group(quotas={"nvidia.com/gpu": {"nominalQuota": "8", "lendingLimit": "9"}})]
    assert messages(groups, owner="Cohort", has_parent=True) == []
    assert "when parent is empty" in messages(groups, owner="Cohort", has_parent=False)[0]


@pytest.mark.parametrize("key", ["nominalQuota", "borrowingLimit", "lendingLimit"])
def test_negative_quantities_are_refused(key: str) -> None:
    quota = {"nominalQuota": "8", key: "-1"}
    assert messages([group(quotas={"nvidia.com/gpu": quota})]) == [
        f"resourceGroups[0].flavors[0].resources[0].{key}: must be greater than or equal to 0"
    ]


def test_quantities_must_parse_and_devices_be_whole() -> None:
    assert (
        "is not a Kubernetes quantity"
        in messages([group(quotas={"nvidia.com/gpu": {"nominalQuota": "eight"}})])[0]
    )
    assert (
        "whole number of nvidia.com/gpu"
        in messages([group(quotas={"nvidia.com/gpu": {"nominalQuota": "1.5"}})])[0]
    )
    assert messages([group(quotas={"cpu": {"nominalQuota": "1.5"}})]) == []


def test_nominal_quota_is_required() -> None:
    assert messages([group(quotas={"cpu": {}})]) == [
        "resourceGroups[0].flavors[0].resources[0].nominalQuota: is required"
    ]


def test_every_flavor_lists_every_covered_resource_in_order() -> None:
    groups = [
        {
            "coveredResources": ["cpu", "nvidia.com/gpu"],
            "flavors": [
                {"name": "a", "resources": [{"name": "cpu", "nominalQuota": 1}]},
                {
                    "name": "b",
                    "resources": [
                        {"name": "nvidia.com/gpu", "nominalQuota": 1},
                        {"name": "cpu", "nominalQuota": 1},
                    ],
                },
            ],
        }
    ]
    assert messages(groups) == [
        "resourceGroups[0].flavors[0].resources: flavors must have the same number of resources "
        "as the coveredResources (1 given, 2 covered)",
        "resourceGroups[0].flavors[1].resources[0].name: must match the name in "
        "coveredResources ('cpu')",
        "resourceGroups[0].flavors[1].resources[1].name: must match the name in coveredResources "
        "('nvidia.com/gpu')",
    ]


def test_a_resource_or_flavor_appears_in_one_group_only() -> None:
    groups = [group("h100", GPU), group("h100", GPU)]
    found = messages(groups)
    assert any("'nvidia.com/gpu' is already covered by resourceGroups[0]" in m for m in found)
    assert any("flavor 'h100' already appears in resourceGroups[0]" in m for m in found)


def test_unknown_flavor_is_refused_when_the_portal_knows_its_flavors() -> None:
    assert "no ResourceFlavor named 'h200'" in messages([group("h200", GPU)], known=["h100"])[0]


def test_bounds_on_groups_and_lists() -> None:
    many = [group(f"f{i}", {f"example.com/r{i}": {"nominalQuota": "1"}}) for i in range(17)]
    assert "resourceGroups: must have at most 16 groups" in messages(many)
    assert (
        "must list at least one resource" in messages([{"coveredResources": [], "flavors": []}])[0]
    )


def test_unknown_fields_in_groups_are_refused() -> None:
    groups = [group(quotas={"nvidia.com/gpu": {"nominalQuota": "8", "borowingLimit": "2"}})]
    assert messages(groups) == [
        "resourceGroups[0].flavors[0].resources[0]: unknown field(s): borowingLimit"
    ]


def test_quota_keys_are_not_resource_names() -> None:
    groups = [group("h100", {"requests.nvidia.com/gpu": {"nominalQuota": "1"}})]
    assert "not a quota key" in messages(groups)[0]


@pytest.mark.parametrize(
    ("weight", "ok"),
    [
        ("", True),
        ("0", True),
        ("80", True),
        ("0.5", True),
        ("-1", False),
        ("1n", False),
        ("heavy", False),
    ],
)
def test_fair_sharing_weight(weight: str, ok: bool) -> None:
    assert (check_weight(weight) == []) is ok


def test_borrow_within_cohort_needs_reclaim_within_cohort() -> None:
    issues = check_preemption(
        within_cluster_queue="Never",
        reclaim_within_cohort="Never",
        borrow_within_cohort="LowerPriority",
    )
    assert issues[0].field == "preemption_borrow_within_cohort"
    assert (
        check_preemption(
            within_cluster_queue="Never",
            reclaim_within_cohort="Any",
            borrow_within_cohort="LowerPriority",
        )
        == []
    )


def test_fungibility_preference_needs_try_next_flavor_on_both() -> None:
    assert check_fungibility(
        when_can_borrow="MayStopSearch",
        when_can_preempt="TryNextFlavor",
        preference="BorrowingOverPreemption",
    )
    assert not check_fungibility(
        when_can_borrow="TryNextFlavor",
        when_can_preempt="TryNextFlavor",
        preference="BorrowingOverPreemption",
    )


@pytest.mark.parametrize(
    ("selector", "error"),
    [
        ({"matchLabels": {"team": "a b"}}, "matchLabels[team]: a valid label value"),
        ({"matchExpressions": [{"key": "team", "operator": "In"}]}, "must be specified when"),
        (
            {"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]},
            "may not be specified",
        ),
        (
            {"matchExpressions": [{"key": "team", "operator": "Equals", "values": ["a"]}]},
            "must be In, NotIn",
        ),
        ({"matchLabel": {}}, "unknown field(s): matchLabel"),
        ([], "must be a label selector object"),
    ],
)
def test_namespace_selector_is_a_label_selector(selector: Any, error: str) -> None:
    assert error in str(check_label_selector(selector)[0])


def test_empty_selector_is_valid_and_admits_everything() -> None:
    assert check_label_selector({}) == []


def test_taints_and_tolerations() -> None:
    assert (
        check_taints([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]) == []
    )
    dup = [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"}]
    assert "Duplicate value" in str(check_taints(dup)[0])
    assert "must be one of" in str(check_taints([{"key": "k", "effect": "Sometimes"}])[0])
    assert check_tolerations([{"key": "nvidia.com/gpu", "operator": "Exists"}]) == []
    assert "operator must be Exists when key is empty" in str(
        check_tolerations([{"operator": "Equal"}])[0]
    )
    assert "value must be empty" in str(
        check_tolerations([{"key": "k", "operator": "Exists", "value": "v"}])[0]
    )
    assert "effect must be NoExecute" in str(
        check_tolerations([{"key": "k", "operator": "Exists", "tolerationSeconds": 5}])[0]
    )


def test_a_nominal_quota_beyond_any_count_is_refused() -> None:
    from queues.rules import check_resource_groups

    groups = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "1e100"}]}
            ],
        }
    ]
    issues = check_resource_groups(groups, owner="ClusterQueue", has_parent=False)
    messages = [str(issue) for issue in issues]
    assert any("must be at most 2147483647" in m for m in messages), messages
