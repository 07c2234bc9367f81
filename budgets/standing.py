"""Where a budget stands (pure: no Django): its period, what was used so far, the forecast
to the period's end, the thresholds reached and whether it is spent.

The forecast is linear: the rate so far (use divided by the time elapsed since the period
began, up to the last hour the usage history has rolled up) carried on to the period's end.
It says nothing before an hour of the period has passed."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

HOUR = 3600.0
FORECAST_AFTER = dt.timedelta(hours=1)


@dataclass(frozen=True)
class Window:
    """One period of a budget: [start, end), UTC midnights."""

    start: dt.datetime
    end: dt.datetime
    monthly: bool

    @property
    def label(self) -> str:
        if self.monthly:
            return f"{self.start:%B %Y}"
        last = self.end - dt.timedelta(days=1)
        return f"{self.start.day} {self.start:%b %Y} to {last.day} {last:%b %Y}"

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / HOUR

    def holds(self, time: dt.datetime) -> bool:
        return self.start <= time < self.end


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def monthly_window(now: dt.datetime) -> Window:
    """The calendar month (UTC) ``now`` falls in."""
    now = now.astimezone(dt.UTC)
    start = dt.datetime(now.year, now.month, 1, tzinfo=dt.UTC)
    following = dt.datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=dt.UTC)
    return Window(start, following, monthly=True)


def custom_window(first: dt.date, last: dt.date) -> Window:
    """A custom period from its first day to its last, both included."""
    return Window(_midnight(first), _midnight(last) + dt.timedelta(days=1), monthly=False)


def _hours(amount: float) -> str:
    return f"{amount:,.1f}"


@dataclass(frozen=True)
class Standing:
    """A budget in its period: ``spent`` counted up to ``measured_to`` (the usage history's
    last rolled-up hour, within the period), ``extended``: the extensions granted for it."""

    window: Window
    amount: float
    extended: float
    spent: float
    measured_to: dt.datetime
    thresholds: tuple[int, ...]
    unit: str = "GPU-hours"  # what the amounts count: GPU-hours, or the prices' currency

    @property
    def limit(self) -> float:
        return self.amount + self.extended

    @property
    def percent(self) -> float:
        return 100.0 * self.spent / self.limit if self.limit > 0 else 0.0

    @property
    def spent_out(self) -> bool:
        return self.spent >= self.limit

    @property
    def reached(self) -> tuple[int, ...]:
        """The thresholds the use has reached, lowest first."""
        return tuple(t for t in sorted(self.thresholds) if self.percent >= t)

    @property
    def elapsed(self) -> dt.timedelta:
        end = min(max(self.measured_to, self.window.start), self.window.end)
        return end - self.window.start

    @property
    def rate(self) -> float | None:
        """Use per hour so far (None: less than an hour of the period measured)."""
        if self.elapsed < FORECAST_AFTER:
            return None
        return self.spent / (self.elapsed.total_seconds() / HOUR)

    @property
    def forecast(self) -> float | None:
        """The use at the period's end at the rate so far (None: too early to say)."""
        rate = self.rate
        if rate is None:
            return None
        left = self.window.hours - self.elapsed.total_seconds() / HOUR
        return self.spent + rate * max(left, 0.0)

    @property
    def runs_out_at(self) -> dt.datetime | None:
        """When the use would reach the limit at the rate so far, if within the period
        (None: spent already, too early to say, or not this period)."""
        rate = self.rate
        if self.spent_out or not rate:
            return None
        start = self.window.start + self.elapsed
        at = start + dt.timedelta(hours=(self.limit - self.spent) / rate)
        return at if at < self.window.end else None

    @property
    def fill(self) -> int:
        """The bar's fill, a whole percentage (0-100), as the home's bars draw it."""
        return max(0, min(100, round(self.percent)))

    @property
    def how_forecast(self) -> str:
        """How the forecast was made, in words."""
        rate = self.rate
        if rate is None:
            return "No forecast yet: less than an hour of the period has been measured."
        days = self.elapsed.total_seconds() / 86400
        return (
            f"Linear: {_hours(self.spent)} used in the {days:,.1f} days measured so far "
            f"({_hours(rate * 24)} a day), carried on to the period's end."
        )
