"""The README's API examples, run as written (bash and curl) against the portal served on
the two-cluster demo: the training cluster applied and polled, the inference cluster
registered beside it. Only the tokens and the address are filled in; every curl must
answer 2xx (``--fail-with-body``) and the script must run to its end."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User

from portal.access.tokens import create_token

ROOT = Path(__file__).resolve().parents[2]
TOKENS = {"LEAD": "lead-a", "APPROVER": "approver", "ADMIN": "admin"}


def readme_examples() -> str:
    """The first shell block of the README's "Automate it (REST API)" section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Automate it (REST API)") :]
    found = re.search(r"```sh\n(.*?)```", section, re.S)
    assert found, "no shell block in the API section"
    return found.group(1)


@pytest.mark.django_db(transaction=True)
def test_the_readmes_api_examples_run_as_written(
    portal_cluster: Any, inference_cluster: Any, live_server: Any, settings: Any, tmp_path: Path
) -> None:
    script = readme_examples()
    script = script.replace("PORTAL=http://127.0.0.1:8000", f"PORTAL={live_server.url}")
    for variable, user in TOKENS.items():
        _, token = create_token(user=User.objects.get(username=user), name="readme")
        assert f"{variable}=qm_…" in script, f"the examples set {variable} themselves"
        script = script.replace(f"{variable}=qm_…", f"{variable}={token}")
    ran = subprocess.run(
        [
            "bash",
            "-c",
            'set -euo pipefail\ncurl() { command curl --fail-with-body "$@"; }\n' + script,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # nothing runs what it queued
    assert ran.returncode == 0, (ran.stdout[-3000:], ran.stderr[-3000:])
    assert "breaks_quota" in ran.stdout or "verdict" in ran.stdout  # the change's assessment
    assert ran.stdout.count("\n") > 20
