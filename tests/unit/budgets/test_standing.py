"""Where a budget stands (budgets/standing.py, pure): its period, the linear forecast, when
it would run out, the thresholds reached."""

from __future__ import annotations

import datetime as dt

from budgets.standing import Standing, custom_window, monthly_window

DEC_10 = dt.datetime(2026, 12, 10, tzinfo=dt.UTC)


def standing(spent: float, amount: float = 310.0, extended: float = 0.0) -> Standing:
    return Standing(
        window=monthly_window(DEC_10 + dt.timedelta(hours=5)),
        amount=amount,
        extended=extended,
        spent=spent,
        measured_to=DEC_10,
        thresholds=(100, 80),
    )


def test_a_monthly_budget_runs_over_the_calendar_month_in_utc() -> None:
    window = monthly_window(dt.datetime(2026, 12, 31, 23, 59, tzinfo=dt.UTC))
    assert (window.start, window.end) == (
        dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
        dt.datetime(2027, 1, 1, tzinfo=dt.UTC),
    )
    assert window.label == "December 2026"
    custom = custom_window(dt.date(2026, 11, 20), dt.date(2027, 1, 5))
    assert custom.label == "20 Nov 2026 to 5 Jan 2027"
    assert custom.end == dt.datetime(2027, 1, 6, tzinfo=dt.UTC)


def test_the_forecast_carries_the_rate_so_far_to_the_periods_end() -> None:
    s = standing(90.0)  # 90 in the 9 days measured: 10 a day, over 31 days
    assert s.forecast == 310.0
    assert s.runs_out_at is None  # exactly at the end: not within the period
    assert s.how_forecast == (
        "Linear: 90.0 used in the 9.0 days measured so far (10.0 a day), carried on to the "
        "period's end."
    )
    faster = standing(180.0)  # 20 a day: 310 reached 6.5 days after the 10th
    assert faster.runs_out_at == DEC_10 + dt.timedelta(days=6.5)
    assert faster.reached == ()
    assert standing(250.0).reached == (80,)
    assert standing(320.0).reached == (80, 100) and standing(320.0).spent_out


def test_an_extension_raises_the_limit_and_no_forecast_before_an_hour() -> None:
    s = standing(320.0, extended=50.0)
    assert s.limit == 360.0 and not s.spent_out
    early = Standing(
        window=monthly_window(DEC_10),
        amount=10.0,
        extended=0.0,
        spent=1.0,
        measured_to=dt.datetime(2026, 12, 1, 0, 30, tzinfo=dt.UTC),
        thresholds=(80,),
    )
    assert early.forecast is None and early.runs_out_at is None
    assert early.how_forecast.startswith("No forecast yet")
