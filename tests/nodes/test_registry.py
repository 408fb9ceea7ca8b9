"""The node registry and health/ (contract §3): what a process carries, skew, the no-Redis case."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from django.test import override_settings
from rest_framework.test import APIClient

from contextproto.errors import ApplicationError
from contextproto.protocol import catalog
from sessions_app import nodes

ROOT = Path(__file__).resolve().parents[2]


def health() -> dict:
    response = APIClient().get("/api/v1/health/")
    assert response.status_code == 200, response.content
    return response.json()


def record(role: str, pid: int, fingerprint: str, protocols: list[str]) -> dict:
    return {
        "role": role,
        "host": "node-a",
        "pid": pid,
        "codeVersion": "v1",
        "catalogFingerprint": fingerprint,
        "protocols": protocols,
        "seenAt": "2026-01-01T00:00:00+00:00",
    }


@pytest.mark.django_db
@override_settings(REDIS_URL="")
def test_without_redis_health_lists_this_process_alone_and_keeps_its_fields():
    body = health()
    assert body["status"] == "ok" and body["role"] == "api" and body["redis"] is False
    assert body["checks"] == {"database": "ok", "cache": "ok"}
    assert body["catalogFingerprint"] == catalog.fingerprint()
    assert body["registry"] == "off"
    [me] = body["nodes"]
    assert (me["host"], me["pid"], me["role"]) == (socket.gethostname(), os.getpid(), "api")
    assert me["protocols"] == ["prefix@2", "unified@1", "unified@2", "unified@3", "unified@4"]
    assert me["codeVersion"] == nodes.code_version() != ""
    assert body["skew"] is False
    assert [g["nodes"] for g in body["fingerprints"]] == [[f"api {me['host']}:{me['pid']}"]]


@override_settings(REDIS_URL="")
def test_registering_without_redis_is_a_no_op():
    assert nodes.node_register("worker") is False
    assert nodes.heartbeat_start("worker") is False
    assert nodes._heartbeat is None or nodes._heartbeat.role == "api"


@override_settings(NODE_HIDE_PROTOCOLS=("unified@3",))
def test_a_hidden_version_leaves_what_the_process_carries_and_its_fingerprint():
    carried = ["prefix@2", "unified@1", "unified@2", "unified@4"]
    assert [v.key for v in nodes.carried_versions()] == carried
    assert nodes.local_fingerprint() != catalog.fingerprint()
    assert nodes.local_fingerprint() == catalog.fingerprint_of(
        v for v in catalog.all_versions() if v.key != "unified@3"
    )
    assert nodes.node_record("worker")["protocols"] == carried


def test_nothing_hidden_carries_the_whole_catalog():
    assert nodes.carried_versions() == catalog.all_versions()
    assert nodes.local_fingerprint() == catalog.fingerprint()


@pytest.mark.django_db
def test_health_reports_skew_and_which_nodes_carry_which_fingerprint(monkeypatch):
    full = ["prefix@2", "unified@1", "unified@2", "unified@3"]
    live = [
        record("api", 11, "f" * 64, full),
        record("worker", 12, "f" * 64, full),
        record("worker", 13, "a" * 64, full[:3]),
        {**record("api", os.getpid(), catalog.fingerprint(), full), "host": socket.gethostname()},
    ]
    monkeypatch.setattr(nodes, "live_nodes", lambda: live)
    body = health()
    assert body["skew"] is True
    assert body["nodes"] == live
    groups = {g["catalogFingerprint"]: g for g in body["fingerprints"]}
    assert set(groups) == {"f" * 64, "a" * 64, catalog.fingerprint()}
    assert groups["a" * 64]["nodes"] == ["worker node-a:13"]
    assert groups["a" * 64]["protocols"] == full[:3]
    assert groups["f" * 64]["nodes"] == ["api node-a:11", "worker node-a:12"]
    assert body["status"] == "ok"  # skew is reported, not a 503


@pytest.mark.django_db
def test_nodes_agreeing_are_no_skew_and_this_process_is_listed_before_its_first_beat(
    monkeypatch,
):
    fingerprint = catalog.fingerprint()
    monkeypatch.setattr(
        nodes,
        "live_nodes",
        lambda: [
            {**record("worker", 12, fingerprint, ["prefix@2"]), "codeVersion": nodes.code_version()}
        ],
    )
    body = health()
    assert body["skew"] is False and body["codeSkew"] is False
    assert [n["pid"] for n in body["nodes"]] == [12, os.getpid()]


@pytest.mark.django_db
def test_health_answers_with_this_process_when_the_registry_is_unreachable(monkeypatch):
    def down():
        raise redis.ConnectionError("refused")

    monkeypatch.setattr(nodes, "live_nodes", down)
    body = health()
    assert body["registry"] == "error: ConnectionError"
    assert [n["pid"] for n in body["nodes"]] == [os.getpid()]
    assert body["skew"] is False


def test_code_version_is_computed_once_with_fallbacks(monkeypatch):
    calls = []

    def no_git(*args, **kwargs):
        calls.append(args)
        raise FileNotFoundError("git")

    monkeypatch.setattr(nodes.subprocess, "run", no_git)
    nodes._described_version.cache_clear()
    try:
        with override_settings(NODE_CODE_VERSION=""):
            assert nodes.code_version() == "0.1.0"  # the package version
            assert nodes.code_version() == "0.1.0"
        assert len(calls) == 1  # once per process
        with override_settings(NODE_CODE_VERSION="build-42"):
            assert nodes.code_version() == "build-42"
    finally:
        nodes._described_version.cache_clear()


def test_a_malformed_hidden_protocol_fails_settings_loudly():
    env = {**os.environ, "NODE_HIDE_PROTOCOLS": "unified3", "ALLOW_DEV_SECRET_KEY": "true"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "NODE_HIDE_PROTOCOLS: 'unified3' is not id@version" in done.stderr


def test_require_protocol_names_the_version_and_this_catalog():
    with override_settings(NODE_HIDE_PROTOCOLS=("unified@3",)):
        with pytest.raises(ApplicationError) as caught:
            nodes.require_protocol("unified", 3)
        assert caught.value.code == "protocol_unknown_on_worker"
        fingerprint = nodes.local_fingerprint()
        assert caught.value.message.startswith(
            f"unified@3 is not in this worker's catalog (fingerprint {fingerprint[:12]}"
        )
        assert caught.value.details["protocols"] == [
            "prefix@2",
            "unified@1",
            "unified@2",
            "unified@4",
        ]
    assert nodes.require_protocol("unified", 3).key == "unified@3"
    with pytest.raises(ApplicationError, match="unified@9 is not in this worker's catalog"):
        nodes.require_protocol("unified", 9)
