"""The one way out for calls whose address a user chose: people's webhooks (Slack, Teams,
JSON) and the installation's own webhook.

A URL typed by a team lead is hostile until shown otherwise, so every such call:

1. resolves the host name once and refuses it unless **every** address it resolves to is
   public: loopback, private (RFC 1918, unique-local ``fc00::/7``), link-local (where cloud
   metadata answers, ``169.254.169.254``), multicast, reserved, unspecified, shared
   (``100.64.0.0/10``) and the translation prefixes that embed an IPv4 address are refused,
   and so are the cloud metadata names whatever they resolve to. An operator (environment,
   not the portal) may allow networks with ``QM_EGRESS_ALLOWED_NETWORKS`` (e.g. an internal
   relay at ``10.20.0.0/16``);
2. connects to the address it checked (the name is not resolved again, so a DNS answer
   that changes between the check and the connection cannot turn it inward), with the
   original name in the ``Host`` header and for TLS (SNI and the certificate check);
3. follows no redirect (a 3xx is a failure of its own);
4. tells what happened in a short sentence that never holds the answer's body, and gives
   every failure below HTTP the same words: "connection refused" against "timed out"
   would map the ports of the hosts it may reach.

``check_url`` is the same rule for a form (a field error when saving); ``post_json`` checks
again when sending, so a subscription saved before the rule, or a name whose DNS changed
since, is refused then.

``requests-hardened`` does the same pinning, but checks only the first address a name
resolves to and has no allow-list of networks (only loopback on or off), which an
installation with an internal relay needs: the pinning adapter below follows its approach.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import socket
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Names of cloud metadata services, refused whatever they resolve to (on the cloud they
# resolve to a link-local address, refused anyway; elsewhere a DNS server may say more).
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.internal",
        "instance-data",
        "instance-data.ec2.internal",
    }
)
# Ranges that are "global" to Python but lead inward: shared address space (carrier NAT,
# also some clouds' metadata, 100.100.100.200), and prefixes that embed an IPv4 address.
INWARD = tuple(
    ipaddress.ip_network(net)
    for net in (
        "100.64.0.0/10",
        "192.0.0.0/24",
        "192.88.99.0/24",
        "198.18.0.0/15",
        "64:ff9b::/96",
        "64:ff9b:1::/48",
        "2002::/16",
        "2001::/32",
        "fec0::/10",
    )
)
NOT_PUBLIC = (
    "Not a public address: notifications go to the public internet only (loopback, "
    "private, link-local, multicast, reserved and cloud metadata addresses are refused)."
)
NO_CONNECTION = "could not deliver: no connection"


class Refused(Exception):
    """The address a URL leads to is not one the portal may call."""


class SendFailed(Exception):
    """The endpoint did not take the message: ``retry`` says whether trying later may help.
    The message is a short sentence, safe to show to the URL's owner."""

    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


@functools.cache
def _allowed(networks: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(net.strip(), strict=False) for net in networks if net)


def allowed_networks() -> tuple[Network, ...]:
    """The networks the operator allowed (``QM_EGRESS_ALLOWED_NETWORKS``)."""
    return _allowed(tuple(settings.QM_EGRESS_ALLOWED_NETWORKS))


def is_public(address: Address) -> bool:
    """Whether the portal may call ``address`` (an operator's network counts as public)."""
    if any(address in net for net in allowed_networks() if net.version == address.version):
        return True
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or _ipv4_compatible(address)
        if embedded is not None:
            return is_public(embedded)
    if (
        address.is_loopback
        or address.is_unspecified
        or address.is_link_local
        or address.is_multicast
        or address.is_private
        or address.is_reserved
        or any(address in net for net in INWARD if net.version == address.version)
    ):
        return False
    return address.is_global


def _ipv4_compatible(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """``::a.b.c.d`` (deprecated, but some stacks still route it to the IPv4 address)."""
    if int(address) >> 32 == 0 and int(address) > 1:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the one place the portal asks DNS for a
    user's URL; tests replace it to make a name point where they need)."""
    answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(answer[4][0]) for answer in answers]


def checked_address(host: str, port: int) -> str:
    """The address to connect to for ``host``: ``Refused`` unless every address the name
    resolves to is public; ``OSError`` when it does not resolve."""
    host = host.strip("[]").rstrip(".").lower()
    if host in METADATA_NAMES or host.endswith(".metadata.google.internal"):
        raise Refused(host)
    try:
        literal: Address | None = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        addresses = [ipaddress.ip_address(a.split("%")[0]) for a in resolve(host, port)]
    if not addresses or not all(is_public(address) for address in addresses):
        raise Refused(host)
    return str(addresses[0])


def check_url(url: str) -> str | None:
    """Why the portal may not call ``url`` (a field error's sentence), or ``None``. A name
    that does not resolve now passes: it is checked again when a message is sent."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "A webhook URL with a valid port."
    if not parts.hostname:
        return "A webhook URL, e.g. https://hooks.slack.com/services/…"
    try:
        checked_address(parts.hostname, port)
    except Refused:
        return NOT_PUBLIC
    except (OSError, UnicodeError):
        return None
    return None


class PinnedAdapter(HTTPAdapter):
    """Connects to the checked address of the URL's host, never to a fresh DNS answer."""

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: bool | str, cert: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(
            request, verify, cert
        )
        host, port = str(host_params["host"]).strip("[]"), host_params["port"]
        scheme = host_params["scheme"]
        address = checked_address(host, port or (443 if scheme == "https" else 80))
        shown = f"[{host}]" if ":" in host else host
        request.headers["Host"] = f"{shown}:{port}" if port else shown
        if scheme == "https":  # the certificate is checked against the name, not the address
            pool_kwargs["server_hostname"] = host
            pool_kwargs["assert_hostname"] = host
        host_params["host"] = address
        return host_params, pool_kwargs


THROTTLED = b"Microsoft Teams endpoint returned HTTP error 429"


def post_json(url: str, body: dict[str, Any]) -> None:
    """POST ``body`` to ``url`` under the rule above; ``SendFailed`` with a short sentence
    when the endpoint does not take it."""
    with requests.Session() as session:
        session.trust_env = False  # no proxy or .netrc from the environment
        session.mount("http://", PinnedAdapter(max_retries=0))
        session.mount("https://", PinnedAdapter(max_retries=0))
        try:
            answer = session.post(
                url,
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json", "User-Agent": "Quartermaster"},
                timeout=settings.QM_NOTIFY_TIMEOUT_SECONDS,
                allow_redirects=False,
                stream=True,
            )
        except Refused as exc:
            raise SendFailed("refused: " + NOT_PUBLIC, retry=False) from exc
        except (requests.RequestException, OSError, ValueError) as exc:
            raise SendFailed(NO_CONNECTION, retry=True) from exc
        with answer:
            _judge(answer)


def _judge(answer: requests.Response) -> None:
    status = answer.status_code
    if 300 <= status < 400:
        raise SendFailed(f"HTTP {status}: redirects are not followed", retry=False)
    if status >= 300:
        raise SendFailed(f"HTTP {status}", retry=status == 429 or status >= 500)
    try:
        said = answer.raw.read(65536)
    except (requests.RequestException, OSError, ValueError):
        said = b""
    if THROTTLED in said:  # Teams connectors answer their rate limit with a 200 saying so
        raise SendFailed("throttled: the endpoint said HTTP 429", retry=True)
