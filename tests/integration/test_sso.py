"""Single sign-on end to end: the portal's OIDC views and library talk HTTP to a real
(loopback) OpenID provider; groups become platform roles and team memberships."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth.models import User
from django.test import Client

from portal.models import AuditEvent, PlatformRole
from tenants.models import Membership, SsoIdentity
from tenants.oidc import team_roles
from tests.factories import MembershipFactory, TeamFactory
from tests.oidc_idp import IdP

pytestmark = pytest.mark.django_db
BACKENDS = ["tenants.oidc.PortalOIDCBackend", "django.contrib.auth.backends.ModelBackend"]


@pytest.fixture
def idp(settings: Any) -> Iterator[IdP]:
    provider = IdP()
    for key, value in provider.settings().items():
        setattr(settings, key, value)
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    settings.QM_OIDC_PROVIDER_NAME = "Keycloak"
    settings.QM_OIDC_ADMIN_GROUPS = ["platform-admins"]
    settings.QM_OIDC_APPROVER_GROUPS = ["/gpu/gpu-approvers"]  # a Keycloak full path
    yield provider
    provider.stop()


def sign_in(client: Client, idp: IdP, next_url: str = "/") -> Any:
    """Click "Sign in with …", let the IdP answer, land back on the callback."""
    start = client.get(f"/oidc/authenticate/?next={next_url}")
    assert start.status_code == 302
    assert start["Location"].startswith(f"{idp.url}/authorize?")
    query = parse_qs(urlsplit(start["Location"]).query)
    assert query["scope"] == ["openid email profile"] and query["nonce"]
    assert query["code_challenge_method"] == ["S256"]
    back = requests.get(start["Location"], allow_redirects=False, timeout=5)
    assert back.status_code == 302, back.text
    callback = urlsplit(back.headers["Location"])
    return client.get(f"{callback.path}?{callback.query}")


def test_groups_map_to_team_roles_highest_role_winning() -> None:
    groups = [
        "quartermaster:team-a:member",
        "quartermaster:team-a:lead",
        "quartermaster:team-b:viewer",
        "quartermaster:Team-C:lead",  # not a team slug
        "quartermaster:team-d:owner",  # not a role
        "other:team-e:lead",
    ]
    assert team_roles(groups, "quartermaster:{team}:{role}") == {
        "team-a": "lead",
        "team-b": "viewer",
    }
    assert team_roles(["gpu-team-a-leads"], "gpu-{team}-{role}s") == {"team-a": "lead"}
    assert team_roles(["x"], "no placeholders") == {}


def test_first_sign_in_creates_the_user_with_roles_from_groups(client: Client, idp: IdP) -> None:
    team_a = TeamFactory(slug="team-a")
    TeamFactory(slug="team-b")
    idp.user = {
        "sub": "u-1",
        "preferred_username": "jdoe",
        "email": "jdoe@example.org",
        "given_name": "Jo",
        "family_name": "Doe",
        "groups": ["/gpu/gpu-approvers", "quartermaster:team-a:lead", "quartermaster:nope:lead"],
    }
    response = sign_in(client, idp, next_url="/changes/")
    assert response.status_code == 302 and response["Location"] == "/changes/"
    user = User.objects.get(username="jdoe")
    assert (user.email, user.first_name, user.has_usable_password()) == (
        "jdoe@example.org",
        "Jo",
        False,
    )
    assert list(PlatformRole.objects.filter(user=user).values_list("role", "granted_by")) == [
        ("approver", "sso")
    ]
    assert list(Membership.objects.filter(user=user).values_list("team", "role", "granted_by")) == [
        (team_a.pk, "lead", "sso")
    ]
    assert client.get("/").status_code == 200
    events = list(
        AuditEvent.objects.filter(source="sso").order_by("id").values_list("event", flat=True)
    )
    assert events == ["user.created", "platform_role.granted", "membership.granted"]


def test_groups_removed_at_the_idp_are_roles_removed_at_the_next_sign_in(
    client: Client, idp: IdP
) -> None:
    TeamFactory(slug="team-a")
    team_b = TeamFactory(slug="team-b")
    idp.user = {
        "preferred_username": "jdoe",
        "groups": ["platform-admins", "quartermaster:team-a:lead"],
    }
    sign_in(client, idp)
    user = User.objects.get(username="jdoe")
    # An admin also made jdoe a viewer of team-b by hand in the portal: that one stays.
    MembershipFactory(user=user, team=team_b, role="viewer")
    client.logout()
    idp.user = {"preferred_username": "jdoe", "groups": ["quartermaster:team-a:member"]}
    idp.groups_in = "id_token"  # and this time they come in the ID token (as from Dex)
    sign_in(client, idp)
    assert not PlatformRole.objects.filter(user=user).exists()
    assert dict(Membership.objects.filter(user=user).values_list("team__slug", "role")) == {
        "team-a": "member",
        "team-b": "viewer",
    }
    changed = AuditEvent.objects.get(event="membership.changed")
    assert (changed.old["role"], changed.new["role"], changed.actor_name) == (
        "lead",
        "member",
        "jdoe",
    )
    assert AuditEvent.objects.filter(event="platform_role.revoked").count() == 1


def test_a_subgroup_ending_in_a_granting_group_grants_nothing(client: Client, idp: IdP) -> None:
    TeamFactory(slug="team-a")
    idp.user = {
        "sub": "u-2",
        "preferred_username": "mallory",
        "groups": [
            "/users/mallory-sandbox/platform-admins",
            "/users/mallory-sandbox/gpu-approvers",
            "/projects/x/quartermaster:team-a:lead",
            "/gpu/gpu-approvers/sub",
        ],
    }
    assert sign_in(client, idp).status_code == 302
    user = User.objects.get(username="mallory")
    assert not PlatformRole.objects.filter(user=user).exists()
    assert not Membership.objects.filter(user=user).exists()


def test_accounts_are_keyed_by_issuer_and_subject_not_by_username(client: Client, idp: IdP) -> None:
    idp.user = {"sub": "u-1", "preferred_username": "jdoe", "groups": ["platform-admins"]}
    sign_in(client, idp)
    jdoe = User.objects.get(username="jdoe")
    assert SsoIdentity.objects.get(user=jdoe).subject == "u-1"
    client.logout()
    # another person at the IdP takes the name "jdoe": a new account of its own, no roles
    idp.user = {"sub": "u-666", "preferred_username": "jdoe", "groups": []}
    sign_in(client, idp)
    other = User.objects.get(sso_identities__subject="u-666")
    assert other != jdoe and other.username == "jdoe-2"
    assert int(client.session["_auth_user_id"]) == other.pk
    assert not PlatformRole.objects.filter(user=other).exists()
    client.logout()
    # the first one renamed at the IdP: still their account, under its first name
    idp.user = {"sub": "u-1", "preferred_username": "john", "groups": ["platform-admins"]}
    sign_in(client, idp)
    assert int(client.session["_auth_user_id"]) == jdoe.pk
    assert not User.objects.filter(username="john").exists()


def test_an_account_made_by_sso_before_subjects_is_linked_at_its_next_sign_in(
    client: Client, idp: IdP
) -> None:
    legacy = User.objects.create_user("jdoe")  # no password: made by single sign-on
    idp.user = {"sub": "u-1", "preferred_username": "jdoe"}
    sign_in(client, idp)
    assert int(client.session["_auth_user_id"]) == legacy.pk
    assert SsoIdentity.objects.get(user=legacy).subject == "u-1"
    assert AuditEvent.objects.filter(event="sso_identity.linked", target_id=str(legacy.pk)).exists()


def test_the_idp_cannot_take_over_a_local_account(client: Client, idp: IdP) -> None:
    User.objects.create_user("admin", password="local-password-123")
    idp.user = {"preferred_username": "admin", "groups": ["platform-admins"]}
    response = sign_in(client, idp)
    assert response.status_code == 302 and response["Location"] == "/login/?sso=failed"
    assert "_auth_user_id" not in client.session
    page = client.get("/login/?sso=failed")
    assert "A local account named &#x27;admin&#x27; exists." in page.content.decode()
    assert not PlatformRole.objects.exists()


def test_a_missing_username_claim_is_refused_with_the_reason(client: Client, idp: IdP) -> None:
    idp.user = {"sub": "u-9", "email": "x@example.org"}
    response = sign_in(client, idp)
    assert response["Location"] == "/login/?sso=failed"
    assert (
        "sent no usable &#x27;preferred_username&#x27; claim"
        in client.get(response["Location"]).content.decode()
    )
    assert not User.objects.exists()


def test_a_forged_callback_signs_nobody_in(client: Client, idp: IdP) -> None:
    idp.user = {"preferred_username": "jdoe"}
    client.get("/oidc/authenticate/")
    response = client.get("/oidc/callback/?code=made-up&state=made-up")
    assert "_auth_user_id" not in client.session
    # The state is not one this session started: refused as a suspicious request.
    assert response.status_code == 400
    assert not User.objects.exists()


def test_the_login_page_offers_both_and_passwords_can_be_switched_off(
    client: Client, idp: IdP, settings: Any
) -> None:
    page = client.get("/login/").content.decode()
    assert "Sign in with Keycloak" in page and 'name="password"' in page
    settings.QM_LOCAL_LOGIN = False
    User.objects.create_user("local", password="local-password-123")
    page = client.get("/login/").content.decode()
    assert "Sign in with Keycloak" in page and 'name="password"' not in page
    refused = client.post("/login/", {"username": "local", "password": "local-password-123"})
    assert refused.status_code == 403
    assert "_auth_user_id" not in client.session


def test_without_sso_the_oidc_urls_do_not_exist(client: Client, settings: Any) -> None:
    settings.QM_OIDC_ENABLED = False
    assert client.get("/oidc/authenticate/").status_code == 404
    assert "Sign in with" not in client.get("/login/").content.decode()


def test_a_half_configured_sso_is_reported_at_start_up(settings: Any) -> None:
    from portal.checks import check_single_sign_on

    settings.QM_OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_SECRET = "x"
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = "https://idp.example.org/auth"
    settings.OIDC_OP_TOKEN_ENDPOINT = ""
    settings.OIDC_OP_USER_ENDPOINT = "https://idp.example.org/userinfo"
    settings.OIDC_OP_JWKS_ENDPOINT = "https://idp.example.org/jwks"
    settings.QM_OIDC_TEAM_GROUP_PATTERN = "gpu-{team}"
    errors = check_single_sign_on()
    assert [(e.id, e.msg) for e in errors] == [
        ("quartermaster.E001", "OIDC_OP_TOKEN_ENDPOINT is not set but OIDC_RP_CLIENT_ID is."),
        ("quartermaster.E003", "QM_OIDC_TEAM_GROUP_PATTERN needs both {team} and {role}."),
    ]
