"""The node registry on a real Redis: records expire, heartbeats refresh them (contract §3)."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from sessions_app import nodes

pytestmark = pytest.mark.redis


@pytest.fixture
def prefix(monkeypatch):
    """A key prefix of this test's own, so records of other processes do not count."""
    value = f"test:{uuid.uuid4().hex}:node:"
    monkeypatch.setattr(nodes, "KEY_PREFIX", value)
    yield value
    client = nodes._client()
    for key in client.scan_iter(match=f"{value}*"):
        client.delete(key)


def key(prefix: str, role: str) -> str:
    return f"{prefix}{role}:{socket.gethostname()}:{os.getpid()}"


@override_settings(NODE_TTL_SECONDS=1)
def test_a_record_carries_what_the_process_reports_and_expires(prefix):
    client = nodes._client()
    assert nodes.node_register("worker") is True
    stored = json.loads(client.get(key(prefix, "worker")))
    assert stored["role"] == "worker" and stored["pid"] == os.getpid()
    assert stored["catalogFingerprint"] == nodes.local_fingerprint()
    assert stored["protocols"] == [v.key for v in nodes.carried_versions()]
    assert stored["codeVersion"] == nodes.code_version()
    assert 0 < client.pttl(key(prefix, "worker")) <= 1000
    assert [n["role"] for n in nodes.live_nodes() if n["pid"] == os.getpid()] == ["worker"]
    time.sleep(1.3)
    assert client.get(key(prefix, "worker")) is None
    assert not [n for n in nodes.live_nodes() if n["role"] == "worker"]


@override_settings(NODE_TTL_SECONDS=1, NODE_REFRESH_SECONDS=0.3)
def test_the_heartbeat_keeps_a_record_alive_past_its_ttl_and_removes_it_on_stop(prefix):
    client = nodes._client()
    beat = nodes._Heartbeat("worker")
    beat.thread.start()
    try:
        first = time.monotonic() + 2
        while client.get(key(prefix, "worker")) is None and time.monotonic() < first:
            time.sleep(0.02)  # the thread's first beat
        deadline = time.monotonic() + 2.5  # more than twice the TTL
        while time.monotonic() < deadline:
            assert client.get(key(prefix, "worker")) is not None
            time.sleep(0.2)
    finally:
        beat.stop()
    assert client.get(key(prefix, "worker")) is None  # a clean stop does not wait for the TTL


@pytest.mark.django_db
@override_settings(NODE_HIDE_PROTOCOLS=("unified@3",))
def test_the_first_request_starts_the_api_heartbeat(prefix, monkeypatch):
    monkeypatch.setattr(nodes, "_heartbeat", None)
    try:
        body = APIClient().get("/api/v1/health/").json()
        assert nodes._heartbeat is not None and nodes._heartbeat.role == "api"
        client = nodes._client()
        deadline = time.monotonic() + 5
        while client.get(key(prefix, "api")) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        stored = json.loads(client.get(key(prefix, "api")))
        assert 0 < client.ttl(key(prefix, "api")) <= 30
        assert stored["protocols"] == ["prefix@2", "unified@1", "unified@2", "unified@4"]
        assert body["registry"] == "redis" and body["redis"] is True
        assert any(n["pid"] == os.getpid() for n in body["nodes"])
    finally:
        nodes.heartbeat_stop()
