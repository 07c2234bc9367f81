"""The API docs page works under the Content-Security-Policy: its scripts and styles are
files (drf-spectacular's split view, its page's inline style moved to static/css)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_api_docs_load_only_files(admin_client: Client) -> None:
    page = admin_client.get("/api/docs/")
    assert page.status_code == 200 and "script-src 'self'" in page["Content-Security-Policy"]
    body = page.content.decode()
    assert re.search(r"<script(?![^>]*\bsrc=)|<style\b|\sstyle=", body) is None
    for src in re.findall(r'<(?:script src|link rel="stylesheet" href)="([^"]+)"', body):
        assert admin_client.get(src.replace("&amp;", "&")).status_code == 200, src
