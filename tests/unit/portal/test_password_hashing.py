"""Passwords are hashed with Argon2; a PBKDF2 hash stored before is replaced at the next
sign-in. The test settings keep a fast hasher for the suite: these tests use the real ones."""

from __future__ import annotations

import importlib

import pytest
from django.conf import settings
from django.contrib.auth.hashers import get_hasher, make_password
from django.test import Client, override_settings

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

BASE = importlib.import_module("portal.settings.base")


def test_argon2_comes_first_and_pbkdf2_is_still_read() -> None:
    assert BASE.PASSWORD_HASHERS[0] == "django.contrib.auth.hashers.Argon2PasswordHasher"
    assert "django.contrib.auth.hashers.PBKDF2PasswordHasher" in BASE.PASSWORD_HASHERS
    assert settings.PASSWORD_HASHERS == ["django.contrib.auth.hashers.MD5PasswordHasher"]


@override_settings(PASSWORD_HASHERS=BASE.PASSWORD_HASHERS)
def test_a_pbkdf2_hash_is_upgraded_to_argon2_at_sign_in(client: Client) -> None:
    user = UserFactory(username="old-hash")
    user.password = make_password("an old password", hasher="pbkdf2_sha256")
    user.save(update_fields=["password"])
    assert user.password.startswith("pbkdf2_sha256$")
    answer = client.post("/login/", {"username": "old-hash", "password": "an old password"})
    assert answer.status_code == 302
    user.refresh_from_db()
    assert user.password.startswith("argon2$argon2id$")
    assert get_hasher().algorithm == "argon2"
    # and the new hash signs in too
    assert Client().login(username="old-hash", password="an old password")


@override_settings(PASSWORD_HASHERS=BASE.PASSWORD_HASHERS)
def test_a_wrong_password_keeps_the_old_hash(client: Client) -> None:
    user = UserFactory(username="old-hash")
    user.password = make_password("an old password", hasher="pbkdf2_sha256")
    user.save(update_fields=["password"])
    answer = client.post("/login/", {"username": "old-hash", "password": "a wrong one"})
    assert answer.status_code == 200
    user.refresh_from_db()
    assert user.password.startswith("pbkdf2_sha256$")
