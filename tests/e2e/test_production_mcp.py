"""MCP on the production server (uvicorn, several workers) as a client meets it (issue 23).

One server for the module, started as the README's production command does, on the test's
PostgreSQL + Redis: keys are checked before the MCP SDK (401 with a Bearer challenge, GET
answered at once), unstorable JSON is a tool error instead of database text, and an MCP-only
client makes mutating calls one after another, fenced by the revision it saw.
"""

from __future__ import annotations

import http.client
import json
import sys
import time

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agents.services import application_create
from tests.e2e.test_production_server import Http, server_env
from tests.servers import free_port, run_coroutine, running_server

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("production-mcp")
    with django_db_blocker.unblock():
        env = server_env(tmp)
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "contextproto.asgi:application"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    with running_server(
        command,
        env=env,
        log=tmp / "server.log",
        base=f"http://127.0.0.1:{port}",
        probe="/api/v1/health/",
    ) as base:
        yield base


def new_session(server: str) -> tuple[dict, str]:
    """A session of a published unified@2 version for an external host, and its key."""
    _app, key = application_create(name="mcp-check")
    api = Http(server + "/api/v1/", key)
    agent = api.call("POST", "agents/", {"name": "host"})[1]
    draft = api.call(
        "POST",
        f"agents/{agent['id']}/versions/",
        {
            "systemPrompt": "You help.\n{{context_protocol}}",
            "contextProtocolId": "unified",
            "contextProtocolVersion": 2,
            "options": {},
            "model": {"provider": "external", "name": "host-model", "maxInputTokens": 8000},
        },
    )[1]
    assert api.call("POST", f"agent-versions/{draft['id']}/publish/")[0] == 200
    status, session = api.call("POST", "sessions/", {"agentVersionId": draft["id"], "inputs": {}})
    assert status == 201, session
    return session, key


def raw(server: str, method: str, headers: dict, body: str | None = None):
    """(status, headers, JSON body, seconds) of one request, with a short read timeout."""
    connection = http.client.HTTPConnection(server.removeprefix("http://"), timeout=5)
    try:
        started = time.monotonic()
        connection.request(method, "/mcp/", body=body, headers=headers)
        response = connection.getresponse()
        text = response.read()
        took = time.monotonic() - started
        return response.status, dict(response.headers), json.loads(text or b"{}"), took
    finally:
        connection.close()


JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


@pytest.mark.django_db(transaction=True)
def test_mcp_keys_are_checked_before_the_sdk_and_get_never_hangs(server):
    session, app_key = new_session(server)
    listing = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'

    for method, body in (("POST", listing), ("GET", None)):
        status, headers, answer, took = raw(server, method, JSON_HEADERS, body)
        assert status == 401, (method, answer)
        assert headers["www-authenticate"] == 'Bearer realm="mcp"'
        assert answer["error"]["code"] == "not_authenticated"
        assert took < 2
    wrong = {**JSON_HEADERS, "Authorization": "Bearer typo-in-the-key"}
    status, headers, answer, _took = raw(server, "POST", wrong, listing)
    assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]

    # An authenticated GET (an event-stream request) is answered at once too.
    streaming = {"Accept": "text/event-stream", "Authorization": f"Bearer {session['sessionKey']}"}
    status, headers, answer, took = raw(server, "GET", streaming)
    assert (status, headers["allow"], answer["error"]["code"]) == (
        405,
        "POST",
        "method_not_allowed",
    )
    assert took < 2

    # The right keys still see what they may.
    for key, expected in ((app_key, False), (session["sessionKey"], True)):
        authorized = {**JSON_HEADERS, "Authorization": f"Bearer {key}"}
        status, _headers, answer, _took = raw(server, "POST", authorized, listing)
        assert status == 200, answer
        names = {tool["name"] for tool in answer["result"]["tools"]}
        assert ("context_window_open" in names) is expected

    # 1e999 in the arguments: a tool error naming the field, no PostgreSQL text, no write.
    authorized = {**JSON_HEADERS, "Authorization": f"Bearer {session['sessionKey']}"}
    params = {"name": "context_task_memory_set", "arguments": {"purpose": "p", "memory": 0}}
    params["_meta"] = {"toolCallId": "inf-1"}
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
    status, _headers, answer, _took = raw(
        server, "POST", authorized, body.replace('"memory": 0', '"memory": 1e999')
    )
    assert status == 200, answer
    result = answer["result"]["structuredContent"]
    assert (result["error"]["code"], result["error"]["field"]) == (
        "non_finite_number",
        "arguments.memory",
    )
    host = Http(server + f"/api/v1/sessions/{session['id']}/", session["sessionKey"])
    assert host.call("GET", "messages/?afterIndex=-1")[1]["messages"] == []


@pytest.mark.django_db(transaction=True)
def test_an_mcp_only_client_makes_five_mutating_calls_then_a_stale_one_is_fenced(server):
    session, _app_key = new_session(server)
    host = Http(server + f"/api/v1/sessions/{session['id']}/", session["sessionKey"])
    # A finished host lookup in main to fold; then no projection over HTTP at all.
    assert host.call("POST", "inputs/", {"content": "quote 5000 units"})[0] == 201
    view = host.call("POST", "projection/", {})[1]
    lookup = {"role": "assistant", "kind": "tool_call", "content": "", "toolCallId": "h1"}
    lookup |= {"toolName": "lookup", "arguments": {"q": "price"}, "snapshotId": view["snapshotId"]}
    first = host.call("POST", "messages/", lookup)[1]["index"]
    answer = {"role": "tool", "kind": "tool_result", "content": "42", "toolCallId": "h1"}
    last = host.call("POST", "messages/", answer)[1]["index"]

    results = mcp_chain(server + "/mcp/", session["sessionKey"], first, last)
    *five, stale = results
    for result in five:
        assert result["success"] is True, result
    start = five[0]["stateRevision"] - 1
    assert [r["stateRevision"] for r in five] == list(range(start + 1, start + 6))
    assert stale["error"]["code"] == "context_state_stale"
    assert stale["error"]["correctable"] is True
    assert stale["stateRevision"] == start + 5
    state = host.call("GET", "")[1]
    assert (state["stateRevision"], state["activeWindow"]) == (start + 5, "main")
    assert len(host.call("GET", "folds/")[1]["folds"]) == 1


def mcp_chain(url: str, key: str, first: int, last: int) -> list[dict]:
    return run_coroutine(_chain(url, key, first, last))


async def _chain(url: str, key: str, first: int, last: int) -> list[dict]:
    """Five mutating calls, each sending the previous result's stateRevision, then one more
    naming the revision the first call saw."""
    calls = [
        (
            "context_window_open",
            {"windowId": "quote", "goal": "prepare the quote", "input": "5000 units; return"}
            | {"expectedWindowId": "main"},
        ),
        ("context_window_memory_set", {"memory": "price 42", "expectedWindowId": "quote"}),
        ("context_task_memory_set", {"memory": "quote under way"}),
        ("context_window_complete", {"outcome": "quoted 42", "expectedWindowId": "quote"}),
        (
            "context_fold_create",
            {"fromIndex": first, "throughIndex": last, "summary": "price looked up: 42"}
            | {"expectedWindowId": "main"},
        ),
    ]
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        results: list[dict] = []
        seen = None
        for position, (tool, arguments) in enumerate(calls):
            meta: dict = {"toolCallId": f"chain-{position}"}
            if seen is not None:
                meta["stateRevision"] = seen
            result = await client.call_tool(tool, {"purpose": "p", **arguments}, meta=meta)
            results.append(result.structured_content)
            seen = result.structured_content["stateRevision"]
        first_seen = results[0]["stateRevision"] - 1
        stale = await client.call_tool(
            "context_task_memory_set",
            {"purpose": "p", "memory": "late"},
            meta={"toolCallId": "chain-stale", "stateRevision": first_seen},
        )
        results.append(stale.structured_content)
        return results
