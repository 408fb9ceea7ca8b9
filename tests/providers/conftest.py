"""Provider tests: local API servers, no internet, requests built by the real engine."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.providers.servers import (
    ANTHROPIC_TOOL_USE_REPLY,
    OPENAI_TOOL_CALL_REPLY,
    SDK_ENV,
    Answer,
    FakeAPI,
    serve,
)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse any socket connection that is not to this machine."""
    for name in SDK_ENV:
        monkeypatch.delenv(name, raising=False)
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0]
            if not ipaddress.ip_address(host).is_loopback:
                raise AssertionError(f"a provider test tried to reach {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture
def openai_api() -> Iterator[FakeAPI]:
    with serve(Answer(body=OPENAI_TOOL_CALL_REPLY)) as api:
        yield api


@pytest.fixture
def anthropic_api() -> Iterator[FakeAPI]:
    with serve(Answer(body=ANTHROPIC_TOOL_USE_REPLY)) as api:
        yield api


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL nobody listens on (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
