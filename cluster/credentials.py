"""Cluster credentials at rest: Fernet tokens, keys from the environment (``QM_CREDENTIALS_KEY``).

A stored credential (a bearer token, or a kubeconfig) is only ever written encrypted and only
ever decrypted to build a gateway. The setting takes several keys, comma-separated: the first
encrypts, every one decrypts (``MultiFernet``), so a key is rotated by putting the new one
first, re-encrypting (``manage.py rotate_cluster_credentials``) and dropping the old one.

Nothing here logs or returns a credential in words: errors name the cluster, never the value.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

MAKE_A_KEY = (
    'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
)


class CredentialKeyError(ImproperlyConfigured):
    """The keys cannot encrypt, or a stored credential cannot be decrypted with them."""


def _keys() -> list[str]:
    return [key.strip() for key in settings.QM_CREDENTIALS_KEY.split(",") if key.strip()]


def _fernet() -> MultiFernet:
    keys = _keys()
    if not keys:
        raise CredentialKeyError(
            "QM_CREDENTIALS_KEY (or QM_CREDENTIALS_KEY_FILE) is not set: the portal needs it "
            f"to store a cluster's credentials encrypted. Make one with {MAKE_A_KEY}"
        )
    fernets = []
    for place, key in enumerate(keys, start=1):
        try:
            fernets.append(Fernet(key.encode()))
        except ValueError:
            raise CredentialKeyError(
                f"QM_CREDENTIALS_KEY: key {place} of {len(keys)} is not a Fernet key (32 "
                f"url-safe base64-encoded bytes). Make one with {MAKE_A_KEY}"
            ) from None
    return MultiFernet(fernets)


def check_keys() -> None:
    """Raise :class:`CredentialKeyError` when a key is set but malformed (none set is fine
    until a credential is stored)."""
    if _keys():
        _fernet()


def encrypt(secret: str) -> str:
    """The Fernet token of ``secret`` under the first key (empty stays empty)."""
    if not secret:
        return ""
    return _fernet().encrypt(secret.encode()).decode()


def decrypt(token: str, *, cluster: str) -> str:
    """The secret behind ``token``; a clear error naming ``cluster`` when no key opens it."""
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise CredentialKeyError(
            f"The stored credentials of cluster {cluster!r} cannot be decrypted with "
            "QM_CREDENTIALS_KEY: the key that encrypted them is missing (add it back, "
            "comma-separated after the new one, then run manage.py rotate_cluster_credentials)."
        ) from None


def rotate(token: str, *, cluster: str) -> str:
    """``token`` re-encrypted under the first key (readable by any of the keys)."""
    if not token:
        return ""
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken:
        decrypt(token, cluster=cluster)  # raises the clear error
        raise


def check_stored_credentials() -> str:
    """Every stored credential decrypts with the keys (what /readyz reports, what
    ``manage.py check`` and a starting worker require); CredentialKeyError otherwise."""
    from cluster.models import Cluster  # lazy: models load after settings

    check_keys()
    stored = list(Cluster.objects.exclude(credential="").values_list("name", "credential"))
    for name, token in stored:
        decrypt(token, cluster=name)
    return f"ok ({len(stored)} stored)" if stored else "ok (none stored)"
