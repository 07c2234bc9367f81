from fractions import Fraction

import pytest

from portal.vocabulary.quantity import (
    QuantityError,
    canonical_quantity,
    format_quantity,
    parse_quantity,
    whole_count,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("16", Fraction(16)),
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        ("64Gi", Fraction(64 * 2**30)),
        ("1Ki", Fraction(1024)),
        ("2k", Fraction(2000)),
        ("1M", Fraction(10**6)),
        ("2e3", Fraction(2000)),
        ("1E", Fraction(10**18)),
        ("100n", Fraction(1, 10**7)),
        ("+3", Fraction(3)),
        ("-1", Fraction(-1)),
        (".5", Fraction(1, 2)),
        ("3000m", Fraction(3)),
        (7, Fraction(7)),
    ],
)
def test_parses_kubernetes_quantities_exactly(text: str | int, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["two", "", "1.5.1", "1Gb", "1 Gi", " 1", "1e", "Gi", "1ki", True])
def test_refuses_what_the_api_server_refuses(text: str) -> None:
    with pytest.raises(QuantityError, match="is not a Kubernetes quantity"):
        parse_quantity(text)


def test_sums_never_drift_like_floats() -> None:
    assert sum(parse_quantity("100m") for _ in range(10)) == 1


def test_format_quantity_is_exact() -> None:
    assert format_quantity(Fraction(16)) == "16"
    assert format_quantity(Fraction(1, 2)) == "500m"
    with pytest.raises(QuantityError):
        format_quantity(Fraction(1, 3))


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("16", "16"),
        ("1e3", "1k"),
        ("1000", "1k"),
        ("1.5k", "1500"),
        ("0.5", "500m"),
        ("2e9", "2G"),
        ("65536Mi", "64Gi"),
        ("1.5Gi", "1536Mi"),
        ("250u", "250u"),
        ("0e5", "0"),
    ],
)
def test_one_spelling_per_value(text: str, canonical: str) -> None:
    assert canonical_quantity(text) == canonical
    assert parse_quantity(canonical) == parse_quantity(text)


def test_counts_are_plain_integers() -> None:
    assert whole_count("1e3") == "1000"
    with pytest.raises(QuantityError):
        whole_count("1.5")
