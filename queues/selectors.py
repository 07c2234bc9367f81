"""Reads of queues for pages: a ClusterQueue's quotas as rows, next to what Kueue reports
of their use when the loop observed it. Kueue reports two sums: ``flavorsUsage`` (what
admitted workloads hold: "in use") and ``flavorsReservation`` (also the workloads that hold
quota while their admission checks run: what the next workload must fit beside,
"reserved"); without admission checks they are equal."""

from __future__ import annotations

from typing import Any

from queues.models import ClusterQueue
from queues.rules import quota_entries


def _usage(
    status: dict[str, Any], key: str = "flavorsUsage"
) -> dict[tuple[str, str], dict[str, str]]:
    out = {}
    for flavor in status.get(key) or []:
        for resource in flavor.get("resources") or []:
            out[(flavor.get("name", ""), resource.get("name", ""))] = {
                "total": str(resource.get("total", "0")),
                "borrowed": str(resource.get("borrowed", "0")),
            }
    return out


def quota_rows(cq: ClusterQueue, status: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (flavor, resource): nominal quota, borrowing and lending limits, what
    admitted workloads use (``flavorsUsage``), what is reserved (``flavorsReservation``)
    and borrowed ("—" when the queue was not observed yet)."""
    usage = _usage(status)
    reservation = _usage(status, "flavorsReservation")
    rows = []
    for key, flavor, quota in quota_entries(cq.resource_groups):
        used = usage.get((flavor, quota["name"]), {})
        reserved = reservation.get((flavor, quota["name"]), {})
        rows.append(
            {
                "key": key,
                "flavor": flavor,
                "resource": quota["name"],
                "nominal": str(quota.get("nominalQuota", "")),
                "borrowing": str(quota.get("borrowingLimit", "") or ""),
                "lending": str(quota.get("lendingLimit", "") or ""),
                "used": used.get("total", "—" if not status else "0"),
                "reserved": reserved.get("total", "—" if not status else "0"),
                "borrowed": used.get("borrowed", "—" if not status else "0"),
            }
        )
    return rows
