"""A workload's amounts are parsed once per distinct text (``cluster.decode.quantity``): the
value is ``parse_quantity``'s, and what is not a quantity is skipped as before, whatever
its type."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from cluster.decode import charged_requests, quantity, workload_requests


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2", Fraction(2)), (2, Fraction(2)), ("500m", Fraction(1, 2)), ("1Gi", Fraction(2**30))],
)
def test_a_quantity_is_its_exact_value(value: Any, expected: Fraction) -> None:
    assert quantity(value) == expected
    assert quantity(value) == expected  # the second time from the cache, the same


@pytest.mark.parametrize("value", [True, False, 1.5, None, {"a": 1}, ["1"], " 1", "lots"])
def test_what_is_not_a_quantity_is_none(value: Any) -> None:
    assert quantity(value) is None


def test_a_workloads_amounts_skip_what_is_not_whole_or_not_a_quantity() -> None:
    status = {"admission": {"podSetAssignments": [
        {"resourceUsage": {"nvidia.com/gpu": "4", "cpu": "500m", "memory": True}},
        {"resourceUsage": {"nvidia.com/gpu": 2, "bad": {"x": 1}}},
    ]}}  # fmt: skip
    assert charged_requests(status) == {"nvidia.com/gpu": 6}
    spec = {"podSets": [{"count": 3, "template": {"spec": {"containers": [
        {"resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "500m"}}},
        {"resources": {"limits": {"nvidia.com/gpu": "1", "memory": 1.5}}},
    ]}}}]}  # fmt: skip
    assert workload_requests(spec) == {"nvidia.com/gpu": 9}  # 3 x 500m is not whole: skipped
