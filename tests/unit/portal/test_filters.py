"""The one set of number and time filters every page uses (portal/templatetags/qm.py)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction

import pytest
from django.template import Context, Template
from django.test import override_settings

from portal.templatetags import qm

NOW = dt.datetime(2026, 12, 2, 14, 5, 30, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (64 * 2**30, "64 GiB"),
        ("64Gi", "64 GiB"),
        ("1536Mi", "1.5 GiB"),
        ("80G", "74.5 GiB"),  # decimal gigabytes are not GiB
        ("512Mi", "512 MiB"),
        (0, "0 GiB"),
        ("2048Gi", "2,048 GiB"),
        (None, "—"),
        ("lots", "lots"),
    ],
)
def test_gib(value: object, shown: str) -> None:
    assert qm.gib(value) == shown


@pytest.mark.parametrize(
    ("value", "resource", "shown"),
    [
        ("64Gi", "memory", "64 GiB"),
        ("64Gi", "requests.memory", "64 GiB"),
        ("100Gi", "ephemeral-storage", "100 GiB"),
        ("500m", "cpu", "0.5 cores"),
        ("1", "limits.cpu", "1 core"),
        ("250m", "requests.cpu", "0.25 cores"),
        ("16", "requests.nvidia.com/gpu", "16"),
        ("1k", "pods", "1,000"),
        ("1e3", "nvidia.com/mig-1g.10gb", "1,000"),
    ],
)
def test_quantity_reads_as_its_resource(value: str, resource: str, shown: str) -> None:
    assert qm.quantity(value, resource) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (5000, "5,000"),
        (1234567, "1,234,567"),
        (Fraction(1, 3), "0.3"),
        (2.25, "2.3"),  # half away from zero
        (Decimal("3.0"), "3"),
        (-1234.56, "-1,234.6"),
        (-0.01, "0"),
        (float("nan"), "nan"),
    ],
)
def test_number_keeps_at_most_one_decimal(value: object, shown: str) -> None:
    assert qm.number(value) == shown


def test_thousands_and_percent() -> None:
    assert qm.thousands(5000) == "5,000"
    assert qm.percent(0.75) == "75%"
    assert qm.percent(Fraction(1, 200)) == "0.5%"
    assert qm.percent(None) == "—"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0 s"),
        (45, "45 s"),
        (60, "1 min"),
        (12 * 60 + 59, "12 min"),
        (3600, "1 h"),
        (2 * 3600 + 10 * 60, "2 h 10 min"),
        (86400, "1 d"),
        (3 * 86400 + 4 * 3600 + 59, "3 d 4 h"),
        (dt.timedelta(minutes=90), "1 h 30 min"),
        (400 * 86400, "400 d"),
        (None, "—"),
    ],
)
def test_duration(value: object, shown: str) -> None:
    assert qm.duration(value) == shown


@pytest.mark.parametrize(
    ("delta", "shown"),
    [
        (dt.timedelta(seconds=0), "just now"),
        (dt.timedelta(seconds=59), "just now"),
        (dt.timedelta(minutes=5), "5 min ago"),
        (dt.timedelta(hours=2, minutes=10), "2 h 10 min ago"),
        (dt.timedelta(days=3), "3 d ago"),
        (-dt.timedelta(minutes=30), "in 30 min"),
    ],
)
def test_ago(delta: dt.timedelta, shown: str) -> None:
    assert qm.ago(NOW - delta, now=NOW) == shown


def test_ago_of_nothing_is_a_dash() -> None:
    assert qm.ago(None) == "—"
    assert qm.ago("") == "—"


def test_when_this_year_leaves_the_year_out_and_another_year_shows_it() -> None:
    this_year = qm.when(dt.datetime(2026, 3, 4, 9, 7, tzinfo=dt.UTC), now=NOW)
    assert ">4 Mar, 09:07</time>" in this_year
    assert 'datetime="2026-03-04T09:07:00+00:00"' in this_year
    assert 'title="2026-03-04 09:07:00 UTC"' in this_year
    last_year = qm.when(dt.datetime(2025, 12, 31, 23, 59, tzinfo=dt.UTC), now=NOW)
    assert ">31 Dec 2025, 23:59</time>" in last_year


@override_settings(TIME_ZONE="Asia/Shanghai")
def test_when_uses_the_portals_time_zone_on_the_server() -> None:
    shown = qm.when(dt.datetime(2026, 12, 31, 20, 0, tzinfo=dt.UTC), now=NOW)
    # 20:00 UTC on New Year's Eve is already next year in Shanghai: the year is shown.
    assert ">1 Jan 2027, 04:00</time>" in shown
    assert "CST" in shown


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        ("breaks_quota", "Breaks quota"),
        ("breaksquota", "Breaks quota"),
        ("needs_drain", "Needs a drain"),
        ("NotReady", "Not ready"),
        ("mig-reconfiguring", "MIG reconfiguring"),
        ("in_progress", "In progress"),
        ("gpu", "GPU"),
        ("", "—"),
    ],
)
def test_words(code: str, shown: str) -> None:
    assert qm.words(code) == shown


def test_filters_in_a_template_escape_what_they_show() -> None:
    html = Template(
        "{% load qm %}{{ m|quantity:'memory' }} · {{ n|thousands }} · {{ s|duration }} · "
        "{{ c|words }} · {{ t|when }}"
    ).render(
        Context(
            {
                "m": "96Gi",
                "n": 5000,
                "s": 5400,
                "c": "<b>x</b>",
                "t": dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.UTC),
            }
        )
    )
    assert html.startswith("96 GiB · 5,000 · 1 h 30 min · &lt;b&gt;x&lt;/b&gt; · <time ")


@pytest.mark.parametrize(
    ("requests", "shown"),
    [
        ({"nvidia.com/gpu": 2}, "2 GPUs"),
        ({"nvidia.com/gpu": "1"}, "1 GPU"),
        ({"nvidia.com/mig-3g.40gb": 1}, "1 MIG 3g.40gb slice"),
        (
            {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 3, "cpu": 4},
            "3 MIG 1g.10gb slices + 1 GPU",
        ),
        ({"cpu": "2", "nvidia.com/gpu": 0}, "no GPU"),
        ({}, "no GPU"),
        (None, "—"),
    ],
)
def test_gpus_says_what_a_pod_holds(requests: object, shown: str) -> None:
    assert qm.gpus(requests) == shown


def test_took_says_how_long_from_one_moment_to_another() -> None:
    assert qm.took(NOW, NOW + dt.timedelta(seconds=42)) == "42 s"
    assert qm.took(NOW, NOW + dt.timedelta(hours=2, minutes=10, seconds=5)) == "2 h 10 min"
    assert qm.took(NOW, NOW + dt.timedelta(milliseconds=300)) == "under a second"
    assert qm.took(NOW, None) == "—"  # still running
    assert qm.took(None, NOW) == "—"


@pytest.mark.parametrize(
    ("value", "shown"), [(81559, "79.6 GiB"), (0, "0 GiB"), (512, "512 MiB"), (None, "—")]
)
def test_mib_counts_show_as_gib(value: object, shown: str) -> None:
    assert qm.mib(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (1234567, "1,234,567"),
        (-1234, "-1,234"),
        (0, "0"),
        ("1234567", "1,234,567"),
        ("007", "7"),
        (Fraction(-14, 2), "-7"),
        (True, "True"),  # a flag is not a count
        ("١٢", "١٢"),  # digits of another script are not a quantity
        (10**20, "100,000,000,000,000,000,000"),
    ],
)
def test_whole_numbers_take_the_short_way_and_read_as_before(value: object, shown: str) -> None:
    assert qm.number(value) == qm.thousands(value) == shown
    assert qm.quantity(value, "nvidia.com/gpu") == shown
