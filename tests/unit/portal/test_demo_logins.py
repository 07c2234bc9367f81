"""The sign-in page lists the demo logins once the demo loader has run, where the settings
allow it (the run command's), and never in production."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from demo.data import DEMO_PASSWORD, USERS
from demo.services import load_demo
from portal.access.selectors import DEMO_LOADED
from portal.models import AuditEvent

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[3]


def demo_logins_section(page: str) -> str:
    if 'id="demo-logins"' not in page:
        return ""
    return page[
        page.index('id="demo-logins"') : page.index("</section>", page.index('id="demo-logins"'))
    ]


def test_the_demo_logins_are_listed_once_the_demo_is_loaded(client: Client, settings: Any) -> None:
    settings.QM_DEMO_LOGINS = True
    settings.QM_DEMO_PASSWORD = DEMO_PASSWORD
    assert demo_logins_section(client.get("/login/").content.decode()) == ""
    load_demo()
    section = demo_logins_section(client.get("/login/").content.decode())
    assert f"Every login below has the password <code>{DEMO_PASSWORD}</code>." in section
    for user in USERS:
        assert (
            f"<tr><td><code>{user.username}</code></td><td>{user.description}</td></tr>" in section
        )
    assert "<code>approver</code>" in section


def test_without_the_setting_the_demo_logins_are_not_listed(client: Client, settings: Any) -> None:
    settings.QM_DEMO_LOGINS = False
    load_demo()
    page = client.get("/login/").content.decode()
    assert demo_logins_section(page) == "" and DEMO_PASSWORD not in page


def test_the_settings_say_where_they_are_listed() -> None:
    """On for the run command's settings, off by default, forced off in production."""
    assert importlib.import_module("portal.settings.base").QM_DEMO_LOGINS is False
    script = "import portal.settings.{} as s; print(s.QM_DEMO_LOGINS)"
    env = {**os.environ, "QM_DEMO_LOGINS": "true", "SECRET_KEY": "x" * 50}
    script += "; print(s.QM_DEMO_PASSWORD)"
    for module, expected in (("dev", f"True\n{DEMO_PASSWORD}"), ("production", "False\n")):
        answer = subprocess.run(
            [sys.executable, "-c", script.format(module)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert answer.stdout.rstrip("\n") == expected.rstrip("\n"), (module, answer.stderr)


def test_the_marker_names_the_logins_and_no_password() -> None:
    load_demo()
    load_demo()  # again: no second marker
    (marker,) = AuditEvent.objects.filter(event=DEMO_LOADED)
    assert marker.new == {"logins": [[u.username, u.description] for u in USERS]}
    assert DEMO_PASSWORD not in str(marker.new)
