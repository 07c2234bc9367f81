"""Which nodes a node pool holds: one rule, in the three forms the code needs.

The rule: a node belongs to the first pool of its cluster, by name, whose node selector its
labels all carry; a pool without labels selects no node. Two pools may select the same node
(their selectors overlap): the one whose name sorts first holds it, whatever the pools
intend (a pool without a MIG config holds its nodes as much as one with a config).

- In memory: ``pool_of(labels, pools)``, a node's pool among its cluster's pools.
- As an ORM filter of ``ObservedNode`` rows: ``holds(nodes, pool, pools)`` (the caller
  scopes ``nodes`` to the pool's cluster) and ``holds_none(nodes, pools)``.
- As SQL over a node table: ``case_sql(pools, values, default, table)``, a value per pool.

Each form is built from ``in_order`` and ``carries`` below, so the three cannot disagree;
``tests/unit/fleet/test_membership.py`` runs them and their callers over the same nodes.
The module is pure (no Django import: the pure assessment uses it too); the ORM form
filters the queryset it is given.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from portal.vocabulary.names import selector_matches


class Pool(Protocol):
    """A node pool as the rule reads it (``fleet.models.NodePool``, or the assessment's
    facts of one): its name and its node selector."""

    @property
    def name(self) -> str: ...

    @property
    def selector(self) -> Mapping[str, str]: ...


P = TypeVar("P", bound=Pool)
Q = TypeVar("Q")  # a queryset of ``ObservedNode`` (``filter`` and ``exclude``)


def in_order(pools: Iterable[P]) -> list[P]:
    """The pools that select nodes, in the order that decides between them: by name."""
    return sorted((p for p in pools if p.selector), key=lambda p: p.name)


def carries(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether a node with ``labels`` carries every label of a pool's ``selector`` (an empty
    selector selects nothing)."""
    return bool(selector) and selector_matches(selector, labels)


def pool_of(labels: Mapping[str, str], pools: Iterable[P]) -> P | None:
    """The pool among ``pools`` (one cluster's) that holds a node with ``labels``."""
    return next((p for p in in_order(pools) if carries(p.selector, labels)), None)


def holds(nodes: Q, pool: Pool, pools: Iterable[Pool]) -> Q:
    """Of ``nodes`` (``ObservedNode`` rows of the pool's cluster:
    ``ObservedNode.objects.on(pool.cluster_id)``), those ``pool`` holds among ``pools`` (its
    cluster's, itself included): carrying its labels and not those of a pool before it."""
    if not pool.selector:
        return nodes.none()  # type: ignore[attr-defined, no-any-return]
    found = nodes.filter(labels__contains=dict(pool.selector))  # type: ignore[attr-defined]
    for earlier in in_order(pools):
        if earlier.name >= pool.name:
            break
        found = found.exclude(labels__contains=dict(earlier.selector))
    return found  # type: ignore[no-any-return]


def holds_none(nodes: Q, pools: Iterable[Any], *, per_cluster: bool = False) -> Q:
    """Of ``nodes``, those no pool of ``pools`` holds (``per_cluster``: the pools are of
    several clusters, each ``NodePool`` holding only its own cluster's nodes)."""
    for pool in in_order(pools):
        mine = {"cluster_id": pool.cluster_id} if per_cluster else {}
        nodes = nodes.exclude(labels__contains=dict(pool.selector), **mine)  # type: ignore[attr-defined]
    return nodes


def case_sql(
    pools: Sequence[Any],
    values: Sequence[Any],
    default: Any,
    table: str,
    *,
    per_cluster: bool = False,
) -> tuple[str, list[Any]]:
    """SQL giving, for a node row of ``table``, ``values[i]`` of the pool ``pools[i]`` that
    holds it (``default`` when none does), and its parameters. ``per_cluster``: the pools
    are of several clusters (each ``NodePool`` holds only its own cluster's nodes)."""
    value_of = {id(pool): value for pool, value in zip(pools, values, strict=True)}
    whens: list[str] = []
    params: list[Any] = []
    for pool in in_order(pools):
        mine = f"{table}.cluster_id = %s AND " if per_cluster else ""
        whens.append(f"WHEN {mine}{table}.labels @> %s::jsonb THEN %s")
        params += [*([pool.cluster_id] if per_cluster else []), json.dumps(dict(pool.selector))]
        params.append(value_of[id(pool)])
    if not whens:
        return "%s", [default]
    return f"(CASE {' '.join(whens)} ELSE %s END)", [*params, default]
