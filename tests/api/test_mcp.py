"""MCP (contract §13) with the official client: catalog resources, prompts, a session's tools.

In memory against `build_server`, with the credential resolved as a key would; the same
flow over HTTP against the production server runs in tests/e2e/test_production_server.py.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.db import DataError, connections
from mcp import Client

from sessions_app.auth import credential_for_key
from sessions_app.mcp_server import build_server
from sessions_app.models import FoldRecord, Message, ToolReceipt
from tests.servers import run_coroutine

pytestmark = pytest.mark.django_db(transaction=True)


def server_for(key: str | None):

    async def resolve(_ctx):
        if key is None:
            return None
        return await sync_to_async(credential_for_key, thread_sensitive=True)(key)

    return build_server(resolve)


def run(coroutine):
    async def then_close():
        try:
            return await coroutine
        finally:
            # The server's thread-sensitive calls ran on asgiref's shared sync thread; its
            # database connection would outlive the test and block the test database's drop.
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    return run_coroutine(then_close())


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


# ---------------------------------------------------------------- framing (issue 23.1)


def five_mutating_calls(first: int, last: int) -> list[tuple[str, dict]]:
    """Window open, window memory, task memory, window complete, fold create: (tool, args)."""
    opening = {"windowId": "quote", "goal": "prepare the quote", "input": "5000 units; return"}
    return [
        ("context_window_open", {**opening, "expectedWindowId": "main"}),
        ("context_window_memory_set", {"memory": "price 42", "expectedWindowId": "quote"}),
        ("context_task_memory_set", {"memory": "quote under way"}),
        ("context_window_complete", {"outcome": "quoted 42", "expectedWindowId": "quote"}),
        (
            "context_fold_create",
            {"fromIndex": first, "throughIndex": last, "summary": "price looked up: 42"}
            | {"expectedWindowId": "main"},
        ),
    ]


def test_an_mcp_only_client_makes_five_mutating_calls_in_a_row(api_session):
    # No projection over HTTP in between: each call is framed by the state the client saw,
    # the stateRevision of the previous result (the first call by the state at the call).
    s = api_session(version=2)
    s.input("start")
    first, last = s.host_tool_work()
    start = s.client.get(s.path()).json()["stateRevision"]

    async def scenario():
        results = []
        async with Client(server_for(s.client.key)) as mcp:
            seen = None
            for position, (tool, arguments) in enumerate(five_mutating_calls(first, last)):
                meta = {"toolCallId": f"mcp-{position}"}
                if seen is not None:
                    meta["stateRevision"] = seen
                result = await mcp.call_tool(tool, {"purpose": "p", **arguments}, meta=meta)
                results.append(result)
                seen = result.structured_content["stateRevision"]
        return results

    results = run(scenario())
    for result in results:
        assert result.is_error is False, result.structured_content
        assert result.structured_content["success"] is True
    revisions = [r.structured_content["stateRevision"] for r in results]
    assert revisions == list(range(start + 1, start + 6))  # each call moved the state once
    session = s.client.get(s.path()).json()
    assert (session["stateRevision"], session["activeWindow"]) == (start + 5, "main")
    assert FoldRecord.objects.filter(session_id=s.id).count() == 1
    receipts = ToolReceipt.objects.filter(session_id=s.id, tool_call_id__startswith="mcp-")
    assert sorted(r.state_revision for r in receipts) == revisions


def test_a_stale_state_revision_gets_the_correctable_stale_receipt(api_session):
    s = api_session(version=2)
    s.input("start")

    async def scenario():
        async with Client(server_for(s.client.key)) as mcp:
            opened = await mcp.call_tool(
                "context_window_open",
                {"purpose": "p", "windowId": "w", "goal": "g", "input": "i"}
                | {"expectedWindowId": "main"},
                meta={"toolCallId": "open"},
            )
            before = opened.structured_content["stateRevision"]
            # Another writer (here the same key, without a revision) moves the state on.
            await mcp.call_tool(
                "context_task_memory_set",
                {"purpose": "p", "memory": "moved"},
                meta={"toolCallId": "mover"},
            )
            stale = await mcp.call_tool(
                "context_window_memory_set",
                {"purpose": "p", "memory": "late", "expectedWindowId": "w"},
                meta={"toolCallId": "stale", "stateRevision": before},
            )
            retried = await mcp.call_tool(
                "context_window_memory_set",
                {"purpose": "p", "memory": "late", "expectedWindowId": "w"},
                meta={"toolCallId": "stale", "stateRevision": before},
            )
            return before, stale, retried

    before, stale, retried = run(scenario())
    assert stale.is_error is True
    error = stale.structured_content["error"]
    assert (error["code"], error["correctable"]) == ("context_state_stale", True)
    assert (error["frozenRevision"], error["currentRevision"]) == (before, before + 1)
    assert stale.structured_content["stateRevision"] == before + 1  # the revision to send now
    # A receipt like any stale call over HTTP, replayed on retry; nothing changed.
    assert ToolReceipt.objects.filter(session_id=s.id, tool_call_id="stale").count() == 1
    assert retried.structured_content["replayed"] is True
    assert retried.structured_content["error"] == error
    entries = s.client.get(s.path("kv/"), prefix="window/w").json()["entries"]
    assert entries[0]["value"].get("memory", "") != "late"


def test_a_retry_replays_its_receipt_after_the_revision_moved(api_session):
    s = api_session(version=2)
    s.input("start")
    arguments = {"purpose": "p", "memory": "first"}

    async def scenario():
        async with Client(server_for(s.client.key)) as mcp:
            done = await mcp.call_tool(
                "context_task_memory_set", arguments, meta={"toolCallId": "a"}
            )
            seen = done.structured_content["stateRevision"]
            await mcp.call_tool(
                "context_task_memory_set",
                {"purpose": "p", "memory": "second"},
                meta={"toolCallId": "b", "stateRevision": seen},
            )
            again = await mcp.call_tool(
                "context_task_memory_set", arguments, meta={"toolCallId": "a", "stateRevision": 0}
            )
            return done, again

    done, again = run(scenario())
    assert again.structured_content["replayed"] is True
    assert again.structured_content["success"] is True
    assert again.structured_content["stateRevision"] == done.structured_content["stateRevision"]
    memory = s.client.get(s.path("kv/"), prefix="task").json()["entries"]
    assert [e["value"] for e in memory if e["key"] == "taskMemory"] == ["second"]


@pytest.mark.parametrize(
    ("revision", "what"),
    [(10**6, "ahead"), (-1, "type"), ("3", "type"), (True, "type"), (1.5, "type")],
)
def test_a_state_revision_ahead_or_not_a_count_is_refused_before_anything_is_written(
    api_session, revision, what
):
    s = api_session(version=2)
    s.input("start")
    before = s.client.get(s.path()).json()

    async def scenario():
        async with Client(server_for(s.client.key)) as mcp:
            return await mcp.call_tool(
                "context_task_memory_set",
                {"purpose": "p", "memory": "m"},
                meta={"toolCallId": "r1", "stateRevision": revision},
            )

    result = run(scenario())
    assert result.is_error is True
    error = result.structured_content["error"]
    assert (error["code"], error["field"], error["correctable"]) == (
        "state_revision_invalid",
        "_meta.stateRevision",
        True,
    )
    if what == "ahead":
        assert error["currentRevision"] == before["stateRevision"]
        assert result.structured_content["stateRevision"] == before["stateRevision"]
    assert not Message.objects.filter(session_id=s.id, tool_call_id="r1").exists()
    assert s.client.get(s.path()).json()["lastIndex"] == before["lastIndex"]


def test_a_stale_revision_without_a_stored_view_is_refused_for_writes_and_read_now(
    api_session, monkeypatch
):
    # Only the newest view is looked at: the views at older revisions are out of reach.
    monkeypatch.setattr("sessions_app.services.mcp_calls.FRAME_LOOKBACK", 1)
    s = api_session(version=2)
    s.input("start")

    async def scenario():
        async with Client(server_for(s.client.key)) as mcp:
            first = await mcp.call_tool(
                "context_task_memory_set", {"purpose": "p", "memory": "1"}, meta={"toolCallId": "1"}
            )
            seen = first.structured_content["stateRevision"]
            await mcp.call_tool(
                "context_task_memory_set", {"purpose": "p", "memory": "2"}, meta={"toolCallId": "2"}
            )
            await mcp.call_tool(
                "context_task_memory_get", {"purpose": "p"}, meta={"toolCallId": "3"}
            )
            write = await mcp.call_tool(
                "context_task_memory_set",
                {"purpose": "p", "memory": "late"},
                meta={"toolCallId": "4", "stateRevision": seen - 1},
            )
            read = await mcp.call_tool(
                "context_task_memory_get",
                {"purpose": "p"},
                meta={"toolCallId": "5", "stateRevision": seen - 1},
            )
            return seen, write, read

    seen, write, read = run(scenario())
    error = write.structured_content["error"]
    assert (error["code"], error["correctable"]) == ("context_state_stale", True)
    assert (error["frozenRevision"], error["currentRevision"]) == (seen - 1, seen + 1)
    assert not Message.objects.filter(session_id=s.id, tool_call_id="4").exists()
    assert read.structured_content["success"] is True
    assert read.structured_content["memory"] == "2"


# ---------------------------------------------------------------- storability (issue 23.2)
# In memory the client serializes NaN and Infinity as null, so the non-finite cases are sent
# as raw JSON over HTTP in tests/api/test_mcp_http.py.


def deep(levels: int) -> object:
    value: object = "x"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("arguments", "meta", "code", "field"),
    [
        ({"memory": "a\u0000b"}, {}, "unsupported_character", "arguments.memory"),
        ({"memory": "\ud800"}, {}, "unsupported_character", "arguments.memory"),
        ({"memory": "m", "k\u0000": 1}, {}, "unsupported_character", "arguments.k\\u0000"),
        ({"memory": deep(70)}, {}, "body_too_deep", "arguments.memory" + "[0]" * 62),
        ({"memory": "m"}, {"toolCallId": "id\u0000"}, "unsupported_character", "_meta.toolCallId"),
        (
            {"memory": "m"},
            {"toolCallId": deep(70)},
            "body_too_deep",
            "_meta.toolCallId" + "[0]" * 62,
        ),
        (
            {"memory": "m"},
            {"stateRevision": deep(70)},
            "body_too_deep",
            "_meta.stateRevision" + "[0]" * 62,
        ),
        ({"memory": "m"}, {"toolCallId": 7}, "tool_call_id_invalid", "_meta.toolCallId"),
        # contract §5.2: ids are 1-256 code points without control characters (was 1-200).
        ({"memory": "m"}, {"toolCallId": "x" * 257}, "tool_call_id_invalid", "_meta.toolCallId"),
        ({"memory": "m"}, {"toolCallId": "a\tb"}, "tool_call_id_invalid", "_meta.toolCallId"),
    ],
)
def test_unstorable_arguments_or_meta_are_a_tool_error_and_never_stored(
    api_session, arguments, meta, code, field
):
    s = api_session(version=2)
    s.input("start")
    before = s.client.get(s.path()).json()["lastIndex"]

    async def scenario():
        async with Client(server_for(s.client.key)) as mcp:
            return await mcp.call_tool(
                "context_task_memory_set", {"purpose": "p", **arguments}, meta=meta
            )

    result = run(scenario())
    assert result.is_error is True
    error = result.structured_content["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert error["correctable"] is True
    assert s.client.get(s.path()).json()["lastIndex"] == before
    assert not ToolReceipt.objects.filter(session_id=s.id).exists()


def test_a_database_failure_in_a_call_is_a_tool_error_without_its_text(api_session, monkeypatch):
    def fail(**_kwargs):
        raise DataError('invalid input syntax for type json\nDETAIL: Token "Infinity" is invalid.')

    monkeypatch.setattr("sessions_app.mcp_server.tool_call_record_and_dispatch", fail)
    s = api_session(version=2)
    s.input("start")

    async def scenario():
        async with Client(server_for(s.client.key)) as mcp:
            return await mcp.call_tool(
                "context_task_memory_get", {"purpose": "p"}, meta={"toolCallId": "t"}
            )

    result = run(scenario())
    assert result.is_error is True
    error = result.structured_content["error"]
    assert (error["code"], error["correctable"]) == ("internal_error", False)
    assert "Infinity" not in result.content[0].text and "json" not in error["message"]
    assert result.structured_content["toolCallId"] == "t"


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
