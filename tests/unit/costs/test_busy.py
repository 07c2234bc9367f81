"""Busy GPU-hours come from the DCGM readings GPU health keeps, per namespace and resource;
hours no exporter read stay "not read"."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from costs import reports, selectors
from costs.busy import record_busy
from costs.models import BusyDay
from health.models import NodeHealth
from tests.unit.costs.history import NOVEMBER, made

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2026, 11, 16, 10, 0, tzinfo=dt.UTC)


def reading(at: dt.datetime) -> None:
    gpus: list[dict[str, Any]] = [
        # a whole H100 of team-a at 80 %
        {
            "index": 0,
            "model": "NVIDIA H100 80GB HBM3",
            "util": 80.0,
            "namespace": "team-a-work",
            "instances": [],
        },
        # an A100 sliced: a 1g.10gb of team-a at 70 %, one of nobody's, one not read
        {
            "index": 1,
            "model": "NVIDIA A100-SXM4-80GB",
            "util": None,
            "instances": [
                {"profile": "1g.10gb", "instance": 1, "util": 70.0, "namespace": "team-a-work"},
                {"profile": "1g.10gb", "instance": 2, "util": 90.0, "namespace": ""},
                {"profile": "3g.40gb", "instance": 3, "util": None, "namespace": "team-b-work"},
            ],
        },
    ]
    NodeHealth.objects.update_or_create(node="gpu-1", defaults={"observed_at": at, "gpus": gpus})


def test_busy_hours_are_read_utilisation_times_the_devices_share_never_guessed() -> None:
    made()
    reading(T0)
    assert record_busy(now=T0) == 0  # the first run starts the clock
    reading(T0 + dt.timedelta(minutes=5))
    assert record_busy(now=T0 + dt.timedelta(minutes=5)) == 2
    rows = {
        (r.namespace, r.resource): (r.busy_seconds, r.read_seconds)
        for r in BusyDay.objects.on_every_cluster()
    }
    assert rows == {
        ("team-a-work", "nvidia.com/gpu"): pytest.approx((0.8 * 300, 300)),
        ("team-a-work", "nvidia.com/mig-1g.10gb"): pytest.approx((0.7 / 7 * 300, 300)),
    }
    # a reading older than the gap adds nothing: the poller of health was down
    assert record_busy(now=T0 + dt.timedelta(hours=2)) == 0
    charge = selectors.chargeback(NOVEMBER, dt.date(2026, 12, 1), ["team-a", "team-b"])
    bill = reports.invoice(charge, "team-a")
    busy = {(line["day"], line["resource"]): line["busy_gpu_hours"] for line in bill["daily_lines"]}
    assert busy[("2026-11-16", "nvidia.com/gpu")] == "0.067"  # 240 GPU-seconds
    assert busy[("2026-11-15", "nvidia.com/gpu")] is None  # not read
    assert reports.invoice(charge, "team-b")["busy_gpu_hours"] is None
