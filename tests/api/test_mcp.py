"""MCP (SPEC §11) with the official client: catalog resources, prompts, a session's tools.

In memory against `build_server`, with the credential resolved as a key would; the same
flow over HTTP against the production server runs in tests/e2e/test_production_server.py.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from mcp import Client

from contextproto.api import credential_for_key
from contextproto.mcp_server import build_server
from sessions_app.models import FoldRecord, ToolReceipt

pytestmark = pytest.mark.django_db(transaction=True)


def server_for(key: str | None):

    async def resolve(_ctx):
        if key is None:
            return None
        return await sync_to_async(credential_for_key, thread_sensitive=True)(key)

    return build_server(resolve)


def run(coroutine):
    # A thread of its own: Playwright's sync API (browser tests) may have left an event loop
    # running in this one, and asyncio.run() refuses to nest.
    async def then_close():
        try:
            return await coroutine
        finally:
            # The server's thread-sensitive calls ran on asgiref's shared sync thread; its
            # database connection would outlive the test and block the test database's drop.
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, then_close()).result()


def test_an_application_key_sees_the_catalog_and_prompts_but_no_tools(tenant):
    _app, client = tenant()

    async def scenario():
        async with Client(server_for(client.key)) as mcp:
            resources = (await mcp.list_resources()).resources
            prompts = (await mcp.list_prompts()).prompts
            tools = (await mcp.list_tools()).tools
            catalog = await mcp.read_resource("contextproto://catalog")
            prompt = await mcp.get_prompt("unified@2")
            defaults = await mcp.read_resource("contextproto://protocols/unified/3/defaults")
            return resources, prompts, tools, catalog, prompt, defaults

    resources, prompts, tools, catalog, prompt, defaults = run(scenario())
    uris = {str(r.uri) for r in resources}
    assert "contextproto://catalog" in uris
    assert "contextproto://protocols/unified/2/options-schema" in uris
    keys = {p["key"] for p in json.loads(catalog.contents[0].text)["protocols"]}
    assert {"unified@1", "unified@2", "unified@3", "prefix@2"} <= keys
    assert {p.name for p in prompts} >= {"unified@1", "unified@2", "unified@3", "prefix@2"}
    assert "context_window_open" in prompt.messages[0].content.text
    assert json.loads(defaults.contents[0].text)["stateMessagePlacement"] == "trailing_assistant"
    assert tools == []


def test_no_key_sees_nothing(db):
    async def scenario():
        async with Client(server_for(None)) as mcp:
            listed = (
                (await mcp.list_resources()).resources,
                (await mcp.list_prompts()).prompts,
                (await mcp.list_tools()).tools,
            )
            try:
                await mcp.read_resource("contextproto://catalog")
            except Exception as exc:  # the SDK raises the JSON-RPC error
                return listed, str(exc)
            return listed, None

    listed, error = run(scenario())
    assert listed == ([], [], [])
    assert error and "Bearer" in error


def test_session_tools_match_the_tools_endpoint_and_calls_go_through_the_dispatcher(api_session):
    s = api_session(version=2)
    s.input("start")
    first, last = s.host_tool_work()
    s.project()
    endpoint = s.client.get(s.path("tools/")).json()
    protocol_tools = {t["name"]: t["inputSchema"] for t in endpoint["tools"]}

    async def scenario():
        async with Client(server_for(s.client.key)) as mcp:
            listed = (await mcp.list_tools()).tools
            arguments = {
                "purpose": "fold the lookup",
                "fromIndex": first,
                "throughIndex": last,
                "summary": "looked it up",
                "expectedWindowId": "main",
            }
            meta = {"toolCallId": "mcp-fold-1"}
            created = await mcp.call_tool("context_fold_create", arguments, meta=meta)
            again = await mcp.call_tool("context_fold_create", arguments, meta=meta)
            return listed, created, again

    listed, created, again = run(scenario())
    assert {t.name: t.input_schema for t in listed} == {
        name: schema for name, schema in protocol_tools.items() if name.startswith("context_")
    }
    assert created.is_error is False
    assert created.structured_content["success"] is True
    assert created.structured_content["replayed"] is False
    assert again.structured_content["replayed"] is True
    assert again.structured_content["foldId"] == created.structured_content["foldId"]
    assert FoldRecord.objects.filter(session_id=s.id).count() == 1
    assert ToolReceipt.objects.filter(session_id=s.id, tool_call_id="mcp-fold-1").count() == 1

    # A wrong window is a structured tool error; the next call in the right window succeeds.
    s.project()

    async def mismatch_then_success():
        async with Client(server_for(s.client.key)) as mcp:
            wrong = await mcp.call_tool(
                "context_window_memory_set",
                {"purpose": "p", "memory": "m", "expectedWindowId": "elsewhere"},
                meta={"toolCallId": "mcp-2"},
            )
            right = await mcp.call_tool(
                "context_window_memory_set",
                {"purpose": "p", "memory": "m", "expectedWindowId": "main"},
                meta={"toolCallId": "mcp-3"},
            )
            return wrong, right

    wrong, right = run(mismatch_then_success())
    assert wrong.is_error is True
    assert wrong.structured_content["error"]["code"] == "context_window_mismatch"
    assert wrong.structured_content["error"]["currentWindowId"] == "main"
    assert json.loads(wrong.content[0].text)["error"]["code"] == "context_window_mismatch"
    assert right.is_error is False and right.structured_content["success"] is True


def test_another_sessions_key_or_an_application_key_cannot_reach_a_sessions_tools(api_session):
    mine, other = api_session(version=2), api_session(version=3)
    mine.input("start")
    mine.project()

    async def scenario(key):
        async with Client(server_for(key)) as mcp:
            tools = (await mcp.list_tools()).tools
            try:
                result = await mcp.call_tool(
                    "context_task_memory_get", {"purpose": "p"}, meta={"toolCallId": "x1"}
                )
            except Exception as exc:
                return tools, str(exc)
            return tools, result

    app_tools, app_call = run(scenario(mine.app_client.key))
    assert app_tools == [] and "session key" in app_call
    other_tools, other_call = run(scenario(other.client.key))
    # The other session's key reaches its own session only: the call lands there, never here.
    assert {t.name for t in other_tools} >= {"context_task_memory_get"}
    assert other_call.structured_content["success"] is True
    assert ToolReceipt.objects.filter(session_id=other.id, tool_call_id="x1").count() == 1
    assert ToolReceipt.objects.filter(session_id=mine.id).count() == 0


def test_a_call_with_a_reused_id_for_another_tool_is_a_tool_error(api_session):
    s = api_session(version=2)
    s.input("start")
    s.project()

    async def scenario():
        async with Client(server_for(s.client.key)) as mcp:
            await mcp.call_tool(
                "context_task_memory_get", {"purpose": "p"}, meta={"toolCallId": "r"}
            )
            return await mcp.call_tool(
                "context_window_list", {"purpose": "p"}, meta={"toolCallId": "r"}
            )

    result = run(scenario())
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == "tool_call_id_reused"


def test_unified4_lists_history_read_on_both_surfaces_and_serves_it_through_mcp(api_session):
    s = api_session(version=4)
    s.input("start")
    endpoint = s.client.get(s.path("tools/")).json()
    names = [t["name"] for t in endpoint["tools"]]
    assert names[:2] == ["context_history_list", "context_history_read"]

    async def scenario():
        async with Client(server_for(s.client.key)) as mcp:
            listed = (await mcp.list_tools()).tools
            read = await mcp.call_tool(
                "context_history_read",
                {"purpose": "read the input back", "index": 1},
                meta={"toolCallId": "mcp-read-1"},
            )
            return listed, read

    listed, read = run(scenario())
    schemas = {t["name"]: t["inputSchema"] for t in endpoint["tools"]}
    assert {t.name: t.input_schema for t in listed} == schemas
    assert read.is_error is False
    assert read.structured_content["index"] == 1
    assert json.loads(read.structured_content["text"])["content"] == "start"
    assert ToolReceipt.objects.filter(session_id=s.id, tool_call_id="mcp-read-1").count() == 1
