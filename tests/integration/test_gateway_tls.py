"""An API server whose certificate the portal does not trust is "unreachable", said with
what to check, and the poll is recorded as failed (never left unfinished)."""

from __future__ import annotations

import datetime as dt
import http.server
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cluster.scope import settings_cluster
from cluster.selectors import api_status
from kube import RetryableKubeError, connect
from loop.poll import poll_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def untrusted_server(tmp_path: Path) -> Iterator[str]:
    """An HTTPS server with a self-signed certificate nobody trusts."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_an_untrusted_certificate_is_unreachable_with_what_to_check(untrusted_server: str) -> None:
    gateway = connect(url=untrusted_server, token="any", verify_tls=True)
    with pytest.raises(RetryableKubeError) as refused:
        gateway.version()
    assert refused.value.message.startswith("cannot reach the Kubernetes API: TLS failed (")
    assert "CERTIFICATE_VERIFY_FAILED" in refused.value.message
    assert refused.value.message.endswith(
        "check KUBE_CA_FILE, KUBE_VERIFY_TLS or the kubeconfig's certificate-authority"
    )
    run = poll_cluster(gateway=gateway)
    assert run.finished_at is not None and "TLS failed" in run.error
    status = api_status(settings_cluster())
    assert status.state == "unreachable" and "TLS failed" in status.message
