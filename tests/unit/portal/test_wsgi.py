"""The WSGI entry point loads the portal whole and freezes it out of the cyclic collector."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import gc, json, sys
gc.collect()
before = gc.get_freeze_count()
import portal.wsgi
print(json.dumps({
    "before": before,
    "frozen": gc.get_freeze_count(),
    "tracked": len(gc.get_objects()),
    "views_loaded": all(m in sys.modules for m in ("overview.home", "changes.views")),
    "callable": callable(portal.wsgi.application),
}))
"""


def test_loading_the_wsgi_application_imports_the_views_and_freezes_the_heap() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    facts = json.loads(result.stdout.strip().splitlines()[-1])
    assert facts["before"] == 0
    assert facts["callable"]
    assert facts["views_loaded"]  # imported as the process starts, not on a first request
    # What the collector still tracks is a small part of what was frozen.
    assert facts["frozen"] > 50_000
    assert facts["tracked"] < facts["frozen"] / 10
