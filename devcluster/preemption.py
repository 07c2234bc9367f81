"""Kueue's preemption and fair sharing, kept simple (see kueue-semantics §2.2 and Kueue's
docs, concepts/preemption)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

Usage = dict[tuple[str, str], Fraction]


def weighted_shares(cqs: dict[str, Any], usage: dict[str, Usage]) -> dict[tuple[str, str], int]:
    return {}
