"""Browser fixtures: Debian's headless Chromium driven through Playwright (the live server,
the Celery worker and the demo cluster come from ``tests/conftest.py``)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import HeldByAFolder

# Playwright's sync API runs an event loop in this thread; the ORM calls the test makes
# between page actions are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ROOT = Path(__file__).resolve().parents[2]
# Screenshots of the main pages, for a person to look at after a run; the README's come from
# `QM_SCREENSHOTS=docs/screenshots python3 dev.py test tests/e2e`. A CI run (CI set) takes
# none unless QM_SCREENSHOTS asks: its clean clone is thrown away with them, and the 61
# full-page PNGs cost Chromium and Playwright's driver 11-22 CPU-seconds of the run (measured).
SCREENSHOTS = ROOT / os.environ.get("QM_SCREENSHOTS", ".data/screenshots")
TAKE_SCREENSHOTS = bool(os.environ.get("QM_SCREENSHOTS") or not os.environ.get("CI"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    """``QM_CHROMIUM``, else Debian's headless shell of Chromium (package
    ``chromium-headless-shell``: the same Chromium build without the desktop browser around
    it, as Playwright drives for headless runs by default), else Debian's ``chromium``. The
    full browser in headless mode took about four times the CPU for the same tests
    (tests/e2e/test_forms_answer.py: 25-28 against 7 CPU-seconds of Chromium), a sixth of
    the whole suite's."""
    path = (
        os.environ.get("QM_CHROMIUM")
        or shutil.which("chromium-headless-shell")
        or shutil.which("chromium")
    )
    if not path:
        raise AssertionError(
            "Browser tests need Debian's chromium-headless-shell or chromium (`python3 dev.py "
            "test` installs the first, or set QM_CHROMIUM to a Chromium binary)."
        )
    return path


@contextlib.contextmanager
def _chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True
        )
        yield chromium
        chromium.close()


# One Chromium for the browser tests a process runs one after the other (each test has a
# context of its own: cookies, storage and cache apart, ``page``): a launch is 0.6-0.8
# CPU-seconds of Playwright's driver and Chromium, which every module had paid (16 a run).
# Closed after the last of them, not kept for the session: Playwright's event loop stays in
# the thread while it runs, and the next test of the process may not be a browser's
# (``asyncio.run`` refuses to start inside it).
_BROWSER = HeldByAFolder(Path(__file__).parent, _chromium)
pytest_runtest_teardown = _BROWSER.teardown_hook()
_browsers = _BROWSER.session_fixture("_browsers")


@pytest.fixture
def browser(_browsers: HeldByAFolder[Any]) -> Any:
    return _browsers.get()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page of its own; whatever the Content-Security-Policy refused on it (an inline
    script, style or handler, an eval) fails the test."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    refused: list[str] = []
    page.on(
        "console",
        lambda message: (
            refused.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    yield page
    context.close()
    assert refused == [], refused


def screenshot(page: Any, name: str) -> None:
    if not TAKE_SCREENSHOTS:
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
