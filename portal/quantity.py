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


def manifest_value(text: str) -> int | str:
    """How a quantity goes into a manifest: plain integers as integers, the rest verbatim.

    A real API server keeps ``8`` an integer in CRD int-or-string fields (see the recorded
    ClusterQueue apply), and core ResourceLists always serialise as strings.
    """
    return int(text) if re.fullmatch(r"[0-9]+", text) else text


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
