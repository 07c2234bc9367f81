"""Kubernetes resource quantities, parsed exactly (never as floats).

The grammar is Kubernetes' own (``k8s.io/apimachinery/pkg/api/resource``)::

    <quantity>  ::= <signedNumber><suffix>
    <suffix>    ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>  ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI> ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

Values are :class:`fractions.Fraction`, so ``500m`` is exactly 1/2 and ``64Gi`` exactly
68719476736; comparisons and sums never round.
"""

from __future__ import annotations

import re
from fractions import Fraction

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}

GRAMMAR_HELP = "a Kubernetes quantity such as 16, 500m, 1.5, 64Gi or 2e3"


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse_quantity(text: str | int) -> Fraction:
    """Parse a Kubernetes quantity exactly, or raise :class:`QuantityError`."""
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not {GRAMMAR_HELP}")
    if isinstance(text, int):
        return Fraction(text)
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if not match or text.strip() != text:
        raise QuantityError(f"{text!r} is not {GRAMMAR_HELP}")
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def is_whole(value: Fraction) -> bool:
    return value.denominator == 1


def format_quantity(value: Fraction) -> str:
    """A canonical, exact text for a value: integers plainly, else milli-units or a decimal."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    nano = value * 10**9
    if nano.denominator == 1:
        return f"{nano.numerator}n"
    raise QuantityError(f"{value} cannot be written exactly as a Kubernetes quantity")


# The largest quantity Kubernetes keeps exactly (an int64 of milli-units, as
# resource.Quantity's MilliValue): anything above it is no quota anyone means.
MAX_QUANTITY = Fraction(2**63 - 1, 1000)
MAX_COUNT = 2**31 - 1  # devices and objects: what a 32-bit count holds
MAX_VALUE = 2**63 - 1  # any other quantity: what Kubernetes keeps as an int64 of base units


def bound_error(amount: Fraction, *, whole: bool) -> str:
    """Why ``amount`` is too large to store ("" when it is not): counts of devices and
    objects stay below 2^31, anything else within an int64 of its base unit (``1Ei`` of
    memory is fine)."""
    if whole and amount > MAX_COUNT:
        return f"must be at most {MAX_COUNT} (devices and objects are counted in whole units)"
    if amount > MAX_VALUE:
        return f"must be at most {MAX_VALUE} (what Kubernetes keeps exactly)"
    return ""


def canonical_quantity(text: str) -> str:
    """The one spelling a value is stored and shown in, as Kubernetes' canonical form
    writes it: a binary suffix stays binary (``65536Mi`` is ``64Gi``), anything else takes
    the largest decimal suffix that keeps it exact (``1e3`` is ``1k``, ``0.5`` is ``500m``),
    and plain integers below 1000 stay plain. Raises :class:`QuantityError`."""
    value = parse_quantity(text)
    match = _QUANTITY.match(text.strip())
    suffix = (match["suffix"] if match else "") or ""
    if value == 0:
        return "0"
    scales: dict[str, Fraction] = (
        {k: Fraction(v) for k, v in _BINARY.items()} if suffix in _BINARY else dict(_DECIMAL)
    )
    for name, factor in sorted(scales.items(), key=lambda item: -item[1]):
        scaled = value / factor
        if scaled.denominator == 1:
            return f"{scaled.numerator}{name}"
    return format_quantity(value)


def whole_count(text: str) -> str:
    """A device or object count as a plain integer (``1e3`` is ``1000``); raises
    :class:`QuantityError` when it is not a whole number."""
    value = parse_quantity(text)
    if not is_whole(value):
        raise QuantityError(f"{text!r} is not a whole number")
    return str(value.numerator)
