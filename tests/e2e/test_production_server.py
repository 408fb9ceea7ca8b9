"""The production server (uvicorn, several workers) serving the API, static files and MCP.

Started once, as the README's production command does, on the test's PostgreSQL + Redis;
one host turn is driven over HTTP, then the MCP endpoint with the official client.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import sys
import urllib.error
import urllib.request
from pathlib import Path

import httpx2
import pytest
from django.conf import settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agents.services import application_create
from tests.servers import current_database_url, free_port, run_coroutine, running_server

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def server_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "DEBUG")}
    env.update(
        DATABASE_URL=current_database_url(),
        REDIS_URL=settings.REDIS_URL,
        SECRET_KEY=secrets.token_urlsafe(50),  # production: the dev key would be refused
        ALLOW_DEV_SECRET_KEY="false",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        VAR_DIR=str(tmp_path),
        RUNTIME_AUTOSTART="false",
        DATABASE_POOL_SIZE="4",  # as `make serve` runs it: requests take pooled connections
    )
    return env


class Http:
    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base, key

    def call(self, method: str, path: str, body: object = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture
def production_server(tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "contextproto.asgi:application"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    with running_server(
        command,
        env=server_env(tmp_path),
        log=tmp_path / "server.log",
        base=f"http://127.0.0.1:{port}",
        probe="/api/v1/health/",
    ) as base:
        yield base


@pytest.mark.django_db(transaction=True)
def test_one_host_turn_and_mcp_against_the_production_server(production_server):
    _app, key = application_create(name="production-check")
    api = Http(production_server + "/api/v1/", key)

    status, agent = api.call("POST", "agents/", {"name": "host"})
    assert status == 201, agent
    status, draft = api.call(
        "POST",
        f"agents/{agent['id']}/versions/",
        {
            "systemPrompt": "You help.\n{{context_protocol}}",
            "contextProtocolId": "unified",
            "contextProtocolVersion": 2,
            "options": {},
            "model": {"provider": "external", "name": "host-model", "maxInputTokens": 8000},
        },
    )
    assert status == 201, draft
    assert api.call("POST", f"agent-versions/{draft['id']}/publish/")[0] == 200
    status, session = api.call("POST", "sessions/", {"agentVersionId": draft["id"], "inputs": {}})
    assert status == 201, session
    host = Http(production_server + f"/api/v1/sessions/{session['id']}/", session["sessionKey"])

    # One host turn: input → projection → the model's tool call → dispatch → receipt.
    assert host.call("POST", "inputs/", {"content": "open a window for the quote"})[0] == 201
    status, view = host.call("POST", "projection/", {"provider": "openai-chat"})
    assert status == 201, view
    assert view["request"]["messages"][-1]["role"] == "assistant"  # the state message
    status, _ = host.call(
        "POST",
        "messages/",
        {
            "role": "assistant",
            "kind": "tool_call",
            "content": "",
            "toolCallId": "turn-1",
            "toolName": "context_window_open",
            "arguments": {
                "purpose": "quote",
                "windowId": "quote",
                "goal": "prepare the quote",
                "input": "customer wants 5000 units",
                "expectedWindowId": "main",
            },
            "snapshotId": view["snapshotId"],
        },
    )
    assert status == 201
    status, receipt = host.call("POST", "tool-calls/turn-1/dispatch/", {})
    assert status == 200 and receipt["result"]["success"] is True, receipt
    assert host.call("GET", "")[1]["activeWindow"] == "quote"

    # An id with `/` (contract §5.2): uvicorn decodes %2F before Django routes, and the route
    # takes it whole; dispatched by path, replayed by the body form, and the view builds.
    status, view = host.call("POST", "projection/", {})
    assert status == 201, view
    slash = {"role": "assistant", "kind": "tool_call", "content": "", "toolCallId": "ctx/m:0"}
    slash |= {"toolName": "context_task_memory_get", "arguments": {"purpose": "read"}}
    assert host.call("POST", "messages/", slash | {"snapshotId": view["snapshotId"]})[0] == 201
    status, receipt = host.call("POST", "tool-calls/ctx%2Fm%3A0/dispatch/", {})
    assert status == 200 and receipt["toolCallId"] == "ctx/m:0", receipt
    status, again = host.call("POST", "tool-calls/dispatch/", {"toolCallId": "ctx/m:0"})
    assert status == 200 and again["replayed"] is True, again
    assert host.call("POST", "projection/", {})[0] == 201

    # Static files are served by the same server (the admin is styled).
    with urllib.request.urlopen(production_server + "/static/admin/css/base.css") as css:
        assert css.status == 200 and b"body" in css.read()

    # MCP refuses bodies over the API's limit too (413), on the declared length, before
    # reading them (the body is never sent, so no write races the server's answer).
    host_port = production_server.removeprefix("http://")
    connection_ = http.client.HTTPConnection(host_port, timeout=30)
    try:
        connection_.putrequest("POST", "/mcp/")
        connection_.putheader("Content-Type", "application/json")
        connection_.putheader("Accept", "application/json")
        connection_.putheader("Content-Length", str(3 * 1024 * 1024))
        connection_.endheaders()
        assert connection_.getresponse().status == 413
    finally:
        connection_.close()

    # MCP over HTTP with the session key, on the same server: first a finished host lookup
    # in the quote window to fold.
    status, view = host.call("POST", "projection/", {})
    assert status == 201
    lookup = {"role": "assistant", "kind": "tool_call", "content": "", "toolCallId": "h1"}
    lookup |= {"toolName": "lookup", "arguments": {"q": "price"}, "snapshotId": view["snapshotId"]}
    call_index = host.call("POST", "messages/", lookup)[1]["index"]
    result = {"role": "tool", "kind": "tool_result", "content": "42", "toolCallId": "h1"}
    result_index = host.call("POST", "messages/", result)[1]["index"]
    assert host.call("POST", "projection/", {})[0] == 201
    fold = {
        "purpose": "fold the lookup",
        "fromIndex": call_index,
        "throughIndex": result_index,
        "summary": "price is 42",
        "expectedWindowId": "quote",
    }
    first = mcp(production_server, session["sessionKey"], [("fold", fold), ("fold", fold)])
    assert "contextproto://catalog" in first["resources"]
    assert {"unified@1", "unified@2", "unified@3", "prefix@2"} <= first["catalog"]
    assert {"unified@1", "unified@2", "unified@3", "prefix@2"} <= first["prompts"]
    assert {"context_fold_create", "context_window_memory_set"} <= first["tools"]
    created, again = (r.structured_content for r in first["results"])
    assert created["success"] is True and (created["replayed"], again["replayed"]) == (False, True)
    assert again["foldId"] == created["foldId"]
    assert len(host.call("GET", "folds/")[1]["folds"]) == 1

    # A wrong window is a structured tool error; the next call (a new view) succeeds.
    assert host.call("POST", "projection/", {})[0] == 201
    memory = {"purpose": "note", "memory": "5000 units"}
    second = mcp(
        production_server,
        session["sessionKey"],
        [
            ("m1", {**memory, "expectedWindowId": "main"}),
            ("m2", {**memory, "expectedWindowId": "quote"}),
        ],
        tool="context_window_memory_set",
    )
    wrong, right = second["results"]
    assert wrong.is_error is True
    assert wrong.structured_content["error"]["code"] == "context_window_mismatch"
    assert right.is_error is False and right.structured_content["success"] is True
    entries = {e["key"]: e["value"] for e in host.call("GET", "kv/?prefix=window/")[1]["entries"]}
    assert entries["window/quote"]["memory"] == "5000 units"


def mcp(server: str, key: str, calls: list, tool: str = "context_fold_create") -> dict:
    return run_coroutine(mcp_calls(server + "/mcp/", key, tool, calls))


async def mcp_calls(url: str, key: str, tool: str, calls: list) -> dict:
    """The MCP client scenario of issue 11 over HTTP: listings, the catalog, then `calls`."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        seen: dict = {
            "resources": {str(r.uri) for r in (await client.list_resources()).resources},
            "prompts": {p.name for p in (await client.list_prompts()).prompts},
            "tools": {t.name for t in (await client.list_tools()).tools},
        }
        catalog = await client.read_resource("contextproto://catalog")
        seen["catalog"] = {p["key"] for p in json.loads(catalog.contents[0].text)["protocols"]}
        seen["results"] = [
            await client.call_tool(tool, arguments, meta={"toolCallId": call_id})
            for call_id, arguments in calls
        ]
        return seen
