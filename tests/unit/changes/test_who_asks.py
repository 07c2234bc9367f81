"""Who may ask for a team's changes is one rule (changes.approval.may_ask_for): the quota
and MIG services, the pages' forms, the API and the home's team rows give its answer for
every demo user and team."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client

from changes.approval import may_ask_for
from changes.mig import request_mig_change
from changes.quota import request_quota_change
from queues.selectors import teams_set_up
from tenants.models import Team

pytestmark = pytest.mark.django_db
USERS = ("admin", "approver", "lead-a", "member-a", "lead-b", "viewer-dev")
TEAMS = ("team-a", "team-b", "team-dev")


def service_lets(ask: Callable[..., object], **values: Any) -> bool:
    """Whether a service got past who may ask (a request with no reason is then refused
    for its fields, writing nothing)."""
    try:
        ask(**values, reason="")
    except PermissionDenied:
        return False
    except ValidationError:
        return True
    raise AssertionError("a request with no reason was accepted")


def api_lets(client: Client, url: str, body: dict[str, Any]) -> bool:
    """Whether the API got past who may ask: not refused (403), nor told the team is no
    team to the caller (a field error on ``team``)."""
    answer = client.post(url, body, content_type="application/json")
    return answer.status_code != 403 and "team" not in answer.json().get("errors", {})


def offered_teams(client: Client, url: str) -> set[int]:
    """The teams a page's form offers to ask for (none when the page is refused)."""
    answer = client.get(url)
    if answer.status_code == 403:
        return set()
    select = re.search(r'<select name="team".*?</select>', answer.content.decode(), re.S)
    assert select is not None, url
    return {int(pk) for pk in re.findall(r'value="(\d+)"', select.group(0))}


def test_every_caller_gives_the_rules_answer(demo: None) -> None:
    for username in USERS:
        user = User.objects.get(username=username)
        client = Client()
        client.force_login(user)
        home_rows = {t.slug: t.may_ask for t in teams_set_up(user)}  # type: ignore[attr-defined]
        for slug in TEAMS:
            team = Team.objects.get(slug=slug)
            rule = may_ask_for(user, team)
            namespace = team.namespaces.first()
            answers = {
                "quota service": service_lets(
                    request_quota_change,
                    actor=user,
                    team=team,
                    kind="namespace",
                    namespace=namespace,
                    resource="requests.nvidia.com/gpu",
                    requested="1",
                ),
                "MIG service": service_lets(
                    request_mig_change,
                    actor=user,
                    team=team,
                    nodes=[],
                    target_config="",
                    cluster=namespace.cluster if namespace else None,
                ),
                "quota API": api_lets(
                    client,
                    "/api/v1/quota-requests/",
                    {
                        "team": slug,
                        "kind": "namespace",
                        "resource": "x",
                        "requested": "1",
                        "reason": "",
                    },
                ),
                "MIG API": api_lets(
                    client,
                    "/api/v1/mig-changes/",
                    {"team": slug, "nodes": [], "target_config": "all-3g.40gb", "reason": ""},
                ),
                "quota page's teams": team.pk in offered_teams(client, "/quota/new/"),
                "MIG page's teams": team.pk in offered_teams(client, "/changes/new/"),
            }
            if slug in home_rows:  # the home lists the user's teams (every team for admins)
                answers["home's team row"] = home_rows[slug]
            wrong = {caller: said for caller, said in answers.items() if said != rule}
            assert wrong == {}, (username, slug, rule)
