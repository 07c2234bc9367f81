"""What ``qm`` prints: a table for people, ``-o json`` / ``-o yaml`` for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import yaml

FORMATS = ("table", "json", "yaml")


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(cell(v) for v in value) or "-"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str], out: TextIO) -> None:
    """Aligned columns with an upper-case header (``columns``: the keys shown)."""
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    header = [c.upper().replace("_", " ") for c in columns]
    widths = [max(len(r[i]) for r in [header, *cells]) for i in range(len(columns))]
    for line in [header, *cells]:
        out.write("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
        out.write("\n")


def fields(item: dict[str, Any], keys: Sequence[str], out: TextIO) -> None:
    """One object as ``key: value`` lines (``keys``: those shown, in order)."""
    width = max(len(k) for k in keys)
    for key in keys:
        out.write(f"{(key.replace('_', ' ') + ':').ljust(width + 2)}{cell(item.get(key))}\n")


def emit(data: Any, fmt: str, show: Any = None, out: TextIO = sys.stdout) -> None:
    """``data`` as JSON or YAML, or for people as ``show(data, out)`` draws it."""
    if fmt == "json":
        json.dump(data, out, indent=2, sort_keys=False)
        out.write("\n")
    elif fmt == "yaml":
        yaml.safe_dump(data, out, sort_keys=False, allow_unicode=True)
    else:
        show(data, out)
