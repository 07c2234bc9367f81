"""A generated world of Kueue Workloads, as the API lists them: every kind a poll decodes
(waiting with or without Kueue's words, admitted with flavors, finished, evicted and
requeued, not yet seen by Kueue), seeded, so that a test writes it by two paths and
compares what each stored (``rows_of``)."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from django.db import models

NOW = dt.datetime(2026, 12, 6, 9, 0, tzinfo=dt.UTC)


def stamp(r: random.Random) -> str:
    moment = NOW - dt.timedelta(seconds=r.randrange(1, 90 * 86400))
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, status: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": at, "observedGeneration": 1}  # fmt: skip


def _workload(r: random.Random, index: int) -> dict[str, Any]:
    """A Workload as Kueue writes it: waiting (with or without its words), admitted with
    its flavors, finished, evicted and requeued, or with no status yet."""
    created = stamp(r)
    resource = r.choice(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "cpu"])
    amount = r.choice(["1", "2", "8", "500m", "1Gi"])
    item: dict[str, Any] = {
        "metadata": {"namespace": f"team-{index % 7}", "name": f"job-{index:04d}",
                     "creationTimestamp": created if r.random() > 0.05 else None},
        "spec": {"queueName": f"lq-{index % 3}", "priority": r.choice([0, 10, "100", None]),
                 "podSets": [{"name": "main", "count": r.randrange(1, 4), "template": {
                     "spec": {"containers": [{"resources": {"requests": {resource: amount}}}]}}}]},
    }  # fmt: skip
    kind = r.choice(["waiting", "silent", "admitted", "finished", "evicted", "new"])
    at = stamp(r)
    conditions = []
    if kind == "waiting":
        conditions = [_condition("QuotaReserved", "False", "Pending", f"no quota {index}", at)]
    if kind in ("admitted", "finished", "evicted"):
        item["status"] = {"admission": {"clusterQueue": f"cq-{index % 5}", "podSetAssignments": [
            {"name": "main", "flavors": {resource: f"flavor-{index % 2}"},
             "resourceUsage": {resource: amount}}]}}  # fmt: skip
        conditions = [_condition("QuotaReserved", "True", "QuotaReserved", "reserved", at),
                      _condition("Admitted", "True", "Admitted", "admitted", at)]  # fmt: skip
    if kind == "finished":
        conditions.append(_condition("Finished", "True", "Succeeded", "done", stamp(r)))
    if kind == "evicted":
        item["status"] = {"requeueState": {"count": 2, "requeueAt": stamp(r)}}
        conditions = [_condition("Evicted", "True", "PodsReadyTimeout", "timeout", at),
                      _condition("Requeued", "True", "Backoff", "", stamp(r)),
                      _condition("PodsReady", "False", "PodsReady", "", at)]  # fmt: skip
    if kind != "new":
        item.setdefault("status", {})["conditions"] = conditions
    return item


def kueue_workloads(
    seed: int, count: int = 300
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], tuple[int, int]]]:
    """``count`` Workloads and the places in line of some ((namespace, name) -> place in
    the ClusterQueue and in the LocalQueue), as the visibility API gives them."""
    r = random.Random(seed)
    workloads = [_workload(r, index) for index in range(count)]
    positions = {
        (w["metadata"]["namespace"], w["metadata"]["name"]): (index, index // 3)
        for index, w in enumerate(workloads)
        if r.random() < 0.4
    }
    return workloads, positions


def rows_of(model: Any) -> list[tuple[Any, ...]]:
    """Every column of every row but the id, as the database holds it (a JSON column's SQL
    NULL told from JSON's null, which read alike)."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    null = {
        f"{f.attname}_is_null": models.ExpressionWrapper(
            models.Q(**{f"{f.attname}__isnull": True}), output_field=models.BooleanField()
        )
        for f in fields
        if isinstance(f, models.JSONField)
    }
    rows = model.objects.annotate(**null).values_list(*(f.attname for f in fields), *null)
    assert rows
    return sorted(rows, key=repr)
