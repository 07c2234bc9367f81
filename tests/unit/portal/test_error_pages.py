"""The 403, 404 and 500 pages: styled, with the navigation and the reason in words; the API
keeps its JSON errors; the 500 page renders without the database (it may be what failed)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from django.test import Client, RequestFactory

from portal import urls
from portal.views import NOT_FOUND, SERVER_ERROR, server_error
from tests.factories import MigChangeRequestFactory

NAV = '<nav aria-label="Main">'


def reason(page: str) -> str:
    start = page.index('<p class="reason" id="error-reason">') + len(
        '<p class="reason" id="error-reason">'
    )
    return page[start : page.index("</p>", start)]


def test_the_handlers_are_the_portals() -> None:
    assert urls.handler403 == "portal.views.forbidden"
    assert urls.handler404 == "portal.views.not_found"
    assert urls.handler500 == "portal.views.server_error"


@pytest.mark.django_db
def test_403_says_what_the_user_may_not_do(
    client: Client, team_a_member: Any, settings: Any
) -> None:
    settings.DEBUG = False
    client.force_login(team_a_member)
    answer = client.get("/changes/new/")
    assert answer.status_code == 403
    page = answer.content.decode()
    assert reason(page) == "Only team leads and platform admins ask for MIG changes."
    assert NAV in page and "<title>Not allowed · Quartermaster</title>" in page
    assert "You are signed in as bob. Ask a platform admin if you need this." in page


@pytest.mark.django_db
def test_404_of_an_unknown_address(client: Client, team_a_member: Any, settings: Any) -> None:
    settings.DEBUG = False
    client.force_login(team_a_member)
    answer = client.get("/no-such-page/")
    assert answer.status_code == 404
    page = answer.content.decode()
    assert reason(page) == NOT_FOUND == "There is no page at this address."
    assert NAV in page and "<title>Not found · Quartermaster</title>" in page


@pytest.mark.django_db
def test_404_of_another_teams_request_says_only_that_there_is_none(
    client: Client, team_a_member: Any, team_b: Any, settings: Any
) -> None:
    settings.DEBUG = False
    change = MigChangeRequestFactory(team=team_b)
    client.force_login(team_a_member)
    answer = client.get(f"/changes/{change.pk}/")
    assert answer.status_code == 404
    assert reason(answer.content.decode()) == "No such request."


@pytest.mark.django_db
def test_a_model_lookups_404_names_no_model(client: Client, team_a_member: Any) -> None:
    client.force_login(team_a_member)
    answer = client.get("/fleet/nodes/nowhere/")
    assert answer.status_code == 404
    assert "matches the given query" not in answer.content.decode()


@pytest.mark.django_db
def test_the_api_keeps_its_json_errors(client: Client) -> None:
    answer = client.get("/api/v1/no-such-thing/")
    assert answer.status_code == 404
    assert answer.json() == {"detail": "Not found.", "code": "not_found"}


@pytest.mark.django_db
@pytest.mark.urls("tests.unit.portal.error_urls")
def test_500_with_debug_off_is_the_styled_page(team_a_member: Any, settings: Any) -> None:
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    client.force_login(team_a_member)
    answer = client.get("/fails/", headers={"X-Request-ID": "req-500-test"})
    assert answer.status_code == 500
    page = answer.content.decode()
    assert reason(page) == SERVER_ERROR
    assert SERVER_ERROR.startswith("Something went wrong on our side and nothing was changed.")
    assert NAV in page and 'href="/fleet/">Fleet</a>' in page
    assert '<code id="error-request-id">req-500-test</code>' in page
    assert "a bug in a view" not in page and "Traceback" not in page


def test_500_renders_without_the_database() -> None:
    """No ``django_db`` mark: any query here raises, so the page must not make one."""
    answer = server_error(RequestFactory().get("/anything/"))
    assert answer.status_code == 500
    page = answer.content.decode()
    assert reason(page) == SERVER_ERROR
    assert NAV in page and 'href="/changes/">MIG changes</a>' in page


def test_the_run_commands_settings_serve_the_portals_error_pages() -> None:
    """The run command's settings leave debug off (it served Django's yellow debug 404 with
    the URL patterns): a missing page there is the portal's own 404 above."""
    env = {k: v for k, v in os.environ.items() if k != "DEBUG"}
    shown = subprocess.run(
        [sys.executable, "-c", "import portal.settings.dev as s; print(s.DEBUG)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == "False"
