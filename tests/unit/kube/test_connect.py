"""``kube.connect`` from a cluster's stored connection: a CA given as text, a kubeconfig
given as content (its context chosen), and the errors of one that cannot be used."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kube import PermanentKubeError, connect

PEM = "-----BEGIN CERTIFICATE-----\nMIIBdemo\n-----END CERTIFICATE-----\n"


def test_a_ca_given_as_text_is_kept_in_a_private_file() -> None:
    gateway = connect(url="https://10.0.0.1:6443", token="t", ca_data=PEM)
    path = Path(gateway.api.configuration.ssl_ca_cert)
    assert path.read_text() == PEM
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0  # only its owner reads it
    again = connect(url="https://10.0.0.2:6443", token="t", ca_data=PEM)
    assert again.api.configuration.ssl_ca_cert == str(path)  # one file per certificate


def kubeconfig(context: str = "one") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": "https://10.0.0.1:6443"}},
            {"name": "d", "cluster": {"server": "https://10.0.0.9:6443"}},
        ],
        "users": [{"name": "u", "user": {"token": "tok"}}],
        "contexts": [
            {"name": "one", "context": {"cluster": "c", "user": "u"}},
            {"name": "two", "context": {"cluster": "d", "user": "u"}},
        ],
        "current-context": context,
    }


def test_a_kubeconfig_given_as_content_uses_the_named_context() -> None:
    gateway = connect(kubeconfig_data=kubeconfig(), context="two")
    assert gateway.api.configuration.host == "https://10.0.0.9:6443"  # not the current one
    assert gateway.api.configuration.api_key == {"BearerToken": "Bearer tok"}


def test_a_kubeconfig_that_cannot_be_used_is_a_permanent_error() -> None:
    with pytest.raises(PermanentKubeError, match="the kubeconfig cannot be used"):
        connect(kubeconfig_data=kubeconfig(), context="three")
    with pytest.raises(PermanentKubeError, match="no in-cluster service account here"):
        connect(in_cluster=True)
