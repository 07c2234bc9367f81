"""Fixtures of the integration suite's fault tests."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers (a server stopped)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    yield server.getsockname()[1]
    server.close()
