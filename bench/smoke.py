"""Every benchmark's ``--smoke`` size: the same run at a size that takes seconds, so that the
test suite runs each benchmark end to end (``tests/integration/test_bench_smoke.py``) and a
benchmark cannot break unseen. A smoke measures nothing worth reading; it proves the bench
still builds its data as the product does, runs, and prints its machine-readable last line.
A failure exits non-zero: an exception, a failed request (``SystemExit`` with its message) or
a bench's own check."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def parse(
    parser: argparse.ArgumentParser, smoke: dict[str, object], argv: Sequence[str] | None = None
) -> argparse.Namespace:
    """The bench's arguments, with ``--smoke`` added: it makes ``smoke`` (destination ->
    value) the defaults, so a size given on the command line still counts."""
    tiny = " ".join(f"--{name.replace('_', '-')} {value}" for name, value in smoke.items())
    parser.add_argument(
        "--smoke", action="store_true", help=f"a tiny run that takes seconds ({tiny}), as CI runs"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**smoke)
        args = parser.parse_args(argv)
    return args
