"""Network before the lock: asking for, approving and suggesting a MIG change or drain read
the cluster (pods, budgets, Jobs: up to 3 s to connect and 10 s to read each) before any
transaction of theirs begins, so no request row is locked while the cluster answers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from changes import mig as changes
from changes.drain import suggest_drain
from changes.facts import fleet_facts
from cluster.models import Cluster
from kube import Gateway
from tests.integration.test_mig_decisions import ask  # the same request of team-a

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("portal_cluster")]
INCIDENT = "gpu-a100-03"


@pytest.fixture
def depths(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How deep in transactions the test's connection was at each call the gateway sent to
    the demo cluster, counted from the test's own (its wrapping transaction)."""
    seen: list[int] = []
    base = len(connection.atomic_blocks)
    for name in ("list", "get"):
        monkeypatch.setattr(Gateway, name, _counted(getattr(Gateway, name), seen, base))
    yield seen


def _counted(sent: Callable[..., Any], seen: list[int], base: int) -> Callable[..., Any]:
    def spy(self: Gateway, *args: Any, **kwargs: Any) -> Any:
        seen.append(len(connection.atomic_blocks) - base)
        return sent(self, *args, **kwargs)

    return spy


def test_asking_reads_the_cluster_outside_its_transaction(depths: list[int]) -> None:
    ask()
    assert depths and set(depths) == {0}


def test_approving_reads_the_cluster_before_it_locks_the_request(depths: list[int]) -> None:
    request = ask()
    depths.clear()
    changes.approve_mig_change(
        request_id=request.pk,
        approver=User.objects.get(username="approver"),
        comment="ok",
        seen=request.assessment["fingerprint"],
    )
    request.refresh_from_db()
    assert request.state in ("approved", "scheduled")
    assert depths and set(depths) == {0}  # the pods, budgets and Jobs, read before the lock


def test_a_stale_approval_also_read_the_cluster_before_the_lock(depths: list[int]) -> None:
    request = ask()
    depths.clear()
    with pytest.raises(Exception, match="decide again"):
        changes.approve_mig_change(
            request_id=request.pk,
            approver=User.objects.get(username="approver"),
            comment="ok",
            seen="not-what-it-shows",
        )
    assert depths and set(depths) == {0}


def test_a_suggested_drain_reads_the_node_before_its_transaction(depths: list[int]) -> None:
    cluster = Cluster.objects.get(name="default")
    facts = fleet_facts(cluster=cluster)
    depths.clear()
    suggest_drain(
        facts, "gpu-h100-01", "gpu-h100-01/gpu0/x/xid79", "Xid 79", "Drain it.", cluster=cluster
    )
    assert depths and set(depths) == {0}
