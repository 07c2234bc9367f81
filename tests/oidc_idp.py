"""A small OpenID Connect provider on a loopback port, for the single sign-on tests.

It speaks the authorization-code flow the way Keycloak and Dex do: /authorize redirects back
with a code (the user "already signed in" at the IdP is whoever the test set), /token
exchanges it for an RS256-signed ID token carrying the nonce, /userinfo answers for the
access token, /jwks publishes the key. Nothing is mocked in the portal or its OIDC library.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


def pkce(verifier: str) -> str:
    """The S256 code challenge of a PKCE verifier."""
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class IdP:
    def __init__(self, client_id: str = "quartermaster", client_secret: str = "idp-secret") -> None:
        self.client_id, self.client_secret = client_id, client_secret
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.user: dict[str, Any] = {}
        self.groups_in = "userinfo"  # or "id_token" (Dex puts them there)
        self.codes: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, dict[str, Any]] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def settings(self) -> dict[str, Any]:
        return {
            "OIDC_RP_CLIENT_ID": self.client_id,
            "OIDC_RP_CLIENT_SECRET": self.client_secret,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{self.url}/authorize",
            "OIDC_OP_TOKEN_ENDPOINT": f"{self.url}/token",
            "OIDC_OP_USER_ENDPOINT": f"{self.url}/userinfo",
            "OIDC_OP_JWKS_ENDPOINT": f"{self.url}/jwks",
            "OIDC_RP_SIGN_ALGO": "RS256",
            "QM_OIDC_ENABLED": True,
        }

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(
                self, status: int, body: Any = None, headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                if url.path == "/authorize":
                    if (
                        query.get("client_id") != idp.client_id
                        or query.get("response_type") != "code"
                    ):
                        self._send(400, {"error": "invalid_request"})
                        return
                    code = secrets.token_urlsafe(16)
                    idp.codes[code] = {
                        "nonce": query.get("nonce"),
                        "user": dict(idp.user),
                        "redirect_uri": query["redirect_uri"],
                        "challenge": query.get("code_challenge"),
                    }
                    back = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
                    self._send(302, headers={"Location": back})
                elif url.path == "/jwks":
                    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(idp.key.public_key()))
                    self._send(200, {"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]})
                elif url.path == "/userinfo":
                    token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    user = idp.tokens.get(token)
                    if user is None:
                        self._send(401, {"error": "invalid_token"})
                        return
                    info = {
                        k: v
                        for k, v in user.items()
                        if idp.groups_in == "userinfo" or k != "groups"
                    }
                    self._send(200, info)
                else:
                    self._send(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[-1] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                if urlsplit(self.path).path != "/token":
                    self._send(404, {"error": "not_found"})
                    return
                grant = idp.codes.pop(form.get("code", ""), None)
                if (
                    grant is None
                    or form.get("client_id") != idp.client_id
                    or form.get("client_secret") != idp.client_secret
                    or form.get("redirect_uri") != grant["redirect_uri"]
                    or (
                        grant["challenge"]
                        and pkce(form.get("code_verifier", "")) != grant["challenge"]
                    )
                ):
                    self._send(400, {"error": "invalid_grant"})
                    return
                user = grant["user"]
                now = int(time.time())
                claims = {
                    "iss": idp.url,
                    "aud": idp.client_id,
                    "sub": user.get("sub", "s"),
                    "iat": now,
                    "exp": now + 300,
                    "nonce": grant["nonce"],
                }
                if idp.groups_in == "id_token" and "groups" in user:
                    claims["groups"] = user["groups"]
                id_token = jwt.encode(claims, idp.key, algorithm="RS256", headers={"kid": "k1"})
                access = secrets.token_urlsafe(16)
                idp.tokens[access] = user
                self._send(
                    200,
                    {
                        "access_token": access,
                        "id_token": id_token,
                        "token_type": "Bearer",
                        "expires_in": 300,
                    },
                )

        return Handler
