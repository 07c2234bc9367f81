"""Numbers as people read them (pure): at most one decimal unless told, thousands separated,
rounded half away from zero. The ``qm`` template filters and the charts drawn on the server
write numbers through these, so a page and its charts agree."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

from portal.vocabulary.quantity import QuantityError, parse_quantity

DASH = "—"


def as_came(value: Any) -> str:
    """What cannot be read as a number, shown as it came (nothing as a dash)."""
    return DASH if value in (None, "") else str(value)


def as_fraction(value: Any) -> Fraction | None:
    """``value`` (a number, or a quantity such as ``500m``) exactly; None when it is none."""
    if isinstance(value, bool) or value is None or value == "":
        return None
    if isinstance(value, Fraction | int):
        return Fraction(value)
    if isinstance(value, float | Decimal):
        return Fraction(value) if value == value else None  # NaN reads as nothing
    if isinstance(value, str) and value.isascii() and value.isdigit():  # a plain count: "16"
        return Fraction(int(value))
    try:
        return parse_quantity(str(value).strip())
    except QuantityError:
        return None


def decimal(value: Fraction, places: int) -> str:
    """``value`` with at most ``places`` decimals (trailing zeros dropped) and thousands
    separators; rounding half away from zero, as people do."""
    if value.denominator == 1:  # a whole number: nothing to round (most of what pages show)
        return f"{value.numerator:,}"
    scale = 10**places
    scaled = abs(value) * scale
    whole = int(scaled + Fraction(1, 2))
    units, rest = divmod(whole, scale)
    text = f"{units:,}"
    if rest:
        text += "." + f"{rest:0{places}d}".rstrip("0")
    return ("-" if value < 0 and whole else "") + text


def number(value: Any, places: int = 1) -> str:
    """At most ``places`` decimals (one unless told), thousands separated: 1,234.5. What is
    not a number is shown as it came (nothing as a dash)."""
    if type(value) is int:  # a count, as most are: no fraction to make
        return f"{value:,}"
    amount = as_fraction(value)
    if amount is None:
        return as_came(value)
    return decimal(amount, int(places))


CENT = Decimal("0.01")


def to_cent(amount: Decimal) -> Decimal:
    """Money's rounding rule (costs' totals, idle spells' cost): half to even, to the cent,
    once, on an exact amount."""
    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)
