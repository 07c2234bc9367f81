"""devcluster/README.md lists every recording the demo cluster is replayed against."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TABLE = ROOT / "devcluster" / "README.md"
FOLDERS = ("kueue-samples", "k8s-api-samples")


def _rows(section: str) -> dict[str, str]:
    """Case -> result of the table under the heading naming ``section``."""
    text = TABLE.read_text()
    start = text.index(f"### tests/data/{section}")
    end = text.find("\n### ", start + 1)
    rows = {}
    for line in text[start : end if end != -1 else None].splitlines():
        match = re.match(r"^\| `([^`]+)` \| (.*) \| (.*) \|$", line)
        if match:
            rows[match[1]] = match[3]
    return rows


def test_every_recording_is_in_the_table() -> None:
    for folder in FOLDERS:
        files = sorted(p.name for p in (ROOT / "tests" / "data" / folder).iterdir())
        rows = _rows(folder)
        assert sorted(rows) == files, folder


def test_every_row_says_how_it_came_out() -> None:
    for folder in FOLDERS:
        for case, result in _rows(folder).items():
            assert result.startswith(("equal", "differs: ", "not replayed")), case
