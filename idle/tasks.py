"""Celery task of the idle policy: thin, a cluster's id in."""

from __future__ import annotations

from celery import shared_task

from cluster.connection import gateway_for
from cluster.models import Cluster
from idle.enforce import enforce_idle_policy


@shared_task(acks_late=True, ignore_result=True)
def enforce_idle_policy_task(cluster_id: int) -> list[int]:
    """Suspend the cluster's idle workloads whose team's policy says so (queued by a
    collection that found one a policy covers)."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return []
    return enforce_idle_policy(cluster=cluster, gateway=gateway_for(cluster))
