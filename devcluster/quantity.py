"""Kubernetes quantities for the demo cluster: parse exactly, print canonically.

Kept separate from the portal's own module on purpose: the demo cluster imports nothing of
the portal, as a real API server would not.
"""

from __future__ import annotations

import re
from fractions import Fraction

PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_BINARY = [("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)]
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


class QuantityError(ValueError):
    pass


def parse(text: str | int | float) -> Fraction:
    if isinstance(text, bool):
        raise QuantityError(str(text))
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(str(text))
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(text)
    number, suffix = Fraction(match["number"]), match["suffix"] or ""
    for name, factor in _BINARY:
        if suffix == name:
            return number * factor
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def canonical(text: str | int) -> str:
    """The API server's canonical form: ``2113638400Ki`` -> ``2064100Mi``, ``1000`` -> ``1k``."""
    return fmt(parse(text), binary=isinstance(text, str) and text.endswith("i"))


def fmt(value: Fraction, *, binary: bool = False) -> str:
    """Print an exact value the way the API server would."""
    if binary and value.denominator == 1 and value >= 1024:
        for name, factor in _BINARY:
            if value % factor == 0:
                return f"{value // factor}{name}"
    if value.denominator == 1:
        n, suffix = int(value), ""
        for name in ("k", "M", "G", "T", "P", "E"):
            if n != 0 and n % 1000 == 0:
                n //= 1000
                suffix = name
            else:
                break
        return f"{n}{suffix}"
    for name, factor in (("m", 1000), ("u", 10**6), ("n", 10**9)):
        scaled = value * factor
        if scaled.denominator == 1:
            return f"{scaled.numerator}{name}"
    # Beyond nano precision the API server rounds up to the next nano unit.
    return f"{-((-value.numerator * 10**9) // value.denominator)}n"
