"""Regressions found driving the API as an external host: no 500, no session left stuck.

Each test drives the HTTP API the way a host runtime does and checks the session can go on
afterwards (a projection succeeds), not only the status of the bad request.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextproto.parsers import MAX_JSON_DEPTH
from contextproto.protocol import catalog, tools
from sessions_app.models import Message, ToolReceipt
from tests.conftest import KeyClient, SessionHandle


def cursor_of(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


def post_json_text(handle, tail: str, text: str):
    """POST a JSON text as is (the test client's encoder refuses lone surrogates)."""
    return handle.client.client.post(
        "/api/v1/" + handle.path(tail), data=text, content_type="application/json"
    )


def write_call(handle, call_id: str, tool: str, arguments: object):
    """Write a tool_call from a fresh projection; return the raw response."""
    return handle.client.post(
        handle.path("messages/"),
        {
            "role": "assistant",
            "kind": "tool_call",
            "content": "",
            "toolCallId": call_id,
            "toolName": tool,
            "arguments": arguments,
            "snapshotId": handle.project()["snapshotId"],
        },
    )


def last_index(handle) -> int:
    return handle.client.get(handle.path()).json()["lastIndex"]


# ---------------------------------------------------------------- 1. handler crashes


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("context_fold_list", {"offset": 2**63}),
        ("context_window_list", {"offset": 2**63}),
        ("context_window_list", {"offset": 10**30}),
        ("context_history_list", {"afterIndex": 2**63}),
        ("context_fold_read", {"foldId": "f_x", "cursor": 10**30}),
    ],
)
def test_out_of_range_integer_argument_gets_an_error_receipt(api_session, tool, arguments):
    s = api_session(version=2)
    s.input("start")
    call = s.call(tool, **arguments)
    receipt = s.dispatch(call)
    error = receipt["result"]["error"]
    assert error["code"] == "invalid_arguments"
    assert error["argument"] == next(iter(arguments.keys() - {"foldId"}))
    assert receipt["resultMessage"]["toolCallId"] == call
    # The call is answered, so the session goes on.
    assert s.project()["messages"][-2]["kind"] == "tool_result"


def test_a_crashing_handler_answers_an_error_receipt_and_the_session_goes_on(
    api_session, monkeypatch
):
    def explode(_invocation):
        raise ZeroDivisionError("a defect in a handler")

    monkeypatch.setitem(tools.HANDLERS, "context_window_list", explode)
    s = api_session(version=2)
    s.input("start")
    call = s.call("context_window_list")
    receipt = s.dispatch(call)
    error = receipt["result"]["error"]
    assert error["code"] == "tool_internal_error" and error["correctable"] is False
    assert receipt["resultMessage"]["isError"] is True
    assert ToolReceipt.objects.filter(session_id=s.id, tool_call_id=call).count() == 1
    assert s.dispatch(call)["replayed"] is True
    s.project()  # not stuck on a pairing violation


def test_a_kv_limit_refusing_the_write_answers_an_error_receipt(api_session, settings):
    s = api_session(version=2)
    s.input("start")
    settings.KV_MAX_VALUE_BYTES = 300
    revision = s.client.get(s.path()).json()["stateRevision"]
    result = s.tool("context_task_memory_set", memory="x" * 500)
    assert result["success"] is False
    assert result["error"]["code"] == "kv_value_too_large"
    assert s.client.get(s.path()).json()["stateRevision"] == revision
    s.project()


# ---------------------------------------------------------------- 2. afterIndex


def test_messages_after_index_minus_one_reads_from_the_start(api_session):
    s = api_session()
    s.input("one")
    s.input("two")
    response = s.client.get(s.path("messages/"), afterIndex=-1)
    assert response.status_code == 200
    assert [m["index"] for m in response.json()["messages"]] == [1, 2]


@pytest.mark.parametrize("value", ["-5", "10000000000000000000000000000", "x", "\u0661"])
def test_messages_after_index_out_of_range_is_a_400_naming_it(api_session, value):
    s = api_session()
    s.input("one")
    response = s.client.get(s.path("messages/"), afterIndex=value)
    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "afterIndex"


# ---------------------------------------------------------------- 3. cursors


@pytest.mark.parametrize("endpoint", ["windows/", "folds/", "snapshots/", "kv/"])
@pytest.mark.parametrize(
    "cursor",
    [
        {"c": "x", "w": 1},
        {"id": "x"},
        {"id": 2**63},
        {"t": 1, "id": []},
        {"t": "yesterday", "id": "not-a-uuid"},
        {"t": "2026-13-45T00:00:00+00:00", "id": "00000000-0000-0000-0000-000000000000"},
        {"k": None},
        {"k": "a\u0000b"},
        [1, 2],
        {},
    ],
)
def test_a_decodable_cursor_of_the_wrong_shape_is_invalid_cursor(api_session, endpoint, cursor):
    s = api_session()
    s.input("one")
    response = s.client.get(s.path(endpoint), cursor=cursor_of(cursor), limit=1)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid_cursor"


@pytest.mark.parametrize("endpoint", ["windows/", "snapshots/", "kv/"])
def test_issued_cursors_still_page(api_session, endpoint):
    s = api_session()
    s.input("one")
    s.tool("context_window_open", windowId="a", goal="g", input="i", expectedWindowId="main")
    s.project()
    first = s.client.get(s.path(endpoint), limit=1).json()
    assert first["nextCursor"]
    second = s.client.get(s.path(endpoint), limit=1, cursor=first["nextCursor"])
    assert second.status_code == 200, second.content


# ---------------------------------------------------------------- 4. NUL and surrogates


NUL = "\u0000"


@pytest.mark.parametrize(
    ("tail", "body", "field"),
    [
        ("inputs/", {"content": f"a{NUL}b"}, "content"),
        ("inputs/", {"content": [{"type": "text", "text": NUL}]}, "content[0].text"),
        ("messages/", {"role": "assistant", "kind": "text", "content": NUL}, "content"),
        ("inputs/", {"content": "\ud800"}, "content"),
        ("inputs/", {"content": "ok", f"k{NUL}": 1}, "k\\u0000"),
    ],
)
def test_unstorable_characters_are_refused_naming_the_field(api_session, tail, body, field):
    s = api_session()
    s.input("one")
    before = last_index(s)
    response = post_json_text(s, tail, json.dumps(body))  # ASCII: \u0000 and \ud800 escapes
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "unsupported_character"
    assert error["details"]["field"] == field
    assert last_index(s) == before


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("context_window_open", {"windowId": "a", "goal": NUL, "input": "i"}, "arguments.goal"),
        ("context_window_memory_set", {"memory": f"m{NUL}"}, "arguments.memory"),
        ("context_task_memory_set", {"memory": NUL}, "arguments.memory"),
    ],
)
def test_nul_in_tool_call_arguments_is_refused_before_the_call_exists(
    api_session, tool, arguments, field
):
    s = api_session()
    s.input("one")
    response = write_call(s, "c1", tool, {"purpose": "p", "expectedWindowId": "main", **arguments})
    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == field
    assert not Message.objects.filter(session_id=s.id, tool_call_id="c1").exists()
    s.project()


def test_json_nested_thousands_deep_is_body_too_deep(api_session):
    s = api_session()
    deep = "[" * 5000 + "]" * 5000
    response = post_json_text(s, "inputs/", '{"content": ' + deep + "}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "body_too_deep"


def test_json_nested_beyond_the_limit_is_body_too_deep(api_session):
    s = api_session()
    value: object = "x"
    for _ in range(MAX_JSON_DEPTH + 1):
        value = [value]
    response = s.client.post(s.path("inputs/"), {"content": value})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "body_too_deep"


@pytest.mark.parametrize(
    "path",
    [
        "kv/?prefix=%00",
        "messages/?window=%00",
        "messages/?afterIndex=%00",
    ],
)
def test_nul_in_a_query_string_is_a_400(api_session, path):
    s = api_session()
    response = s.client.client.get("/api/v1/" + s.path(path))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsupported_character"


def test_nul_in_a_path_segment_is_a_400(api_session):
    s = api_session()
    response = s.client.client.post("/api/v1/" + s.path("tool-calls/%00/dispatch/"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsupported_character"


# ---------------------------------------------------------------- 5. input inside a group


def test_an_input_written_while_a_call_is_open_follows_the_group(api_session):
    s = api_session(version=2)
    s.input("first run")  # 1
    snapshot = s.project()
    s.write(  # 2
        role="assistant",
        kind="tool_call",
        content="",
        toolCallId="host_1",
        toolName="lookup",
        arguments={"q": "x"},
        snapshotId=snapshot["snapshotId"],
    )
    second = s.input("the user speaks while the lookup runs")  # 3
    s.write(role="tool", kind="tool_result", content="42", toolCallId="host_1")  # 4
    view = s.client.post(
        s.path("projection/"), {"provider": "openai-chat", "runId": second["runId"]}
    )
    assert view.status_code == 201, view.content
    body = view.json()
    raw = [src["firstIndex"] for src in body["sources"] if src["derivedType"] == "raw"]
    assert raw == [1, 2, 4, 3]
    wire = body["request"]["messages"]
    call_at = next(i for i, m in enumerate(wire) if m.get("tool_calls"))
    assert wire[call_at + 1]["role"] == "tool"
    assert wire[call_at + 2]["role"] == "user"


# ---------------------------------------------------------------- 6. one call per turn


def test_second_mutating_call_of_one_answer_is_single_tool_call_even_when_stale(api_session):
    s = api_session(version=2)
    s.input("start")
    snapshot = s.project()
    first = s.call("context_task_memory_set", snapshot, memory="one")
    second = s.call("context_task_memory_set", snapshot, memory="two")
    assert s.dispatch(first)["result"]["success"]  # the revision moves
    result = s.dispatch(second)["result"]
    assert result["error"]["code"] == "single_tool_call_per_turn"
    assert result["error"]["executedToolCallId"] == first


# ---------------------------------------------------------------- 7. session key scope


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "protocols/"),
        ("get", "protocols/unified/2/"),
        ("post", "protocols/unified/2/validate/"),
    ],
)
def test_a_session_key_cannot_read_the_catalog_endpoints(api_session, method, path):
    s = api_session()
    if method == "get":
        response = s.client.get(path)
    else:
        response = s.client.post(path, {"options": {}})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert s.app_client.get(path).status_code in (200, 405)


# ---------------------------------------------------------------- property: every tool


JSON_INTEGERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([2**63, 2**63 - 1, -(2**63), 2**64, 2**53, 2**53 - 1, -1, 0, 1]),
)
JSON_STRINGS = st.text(max_size=300)
VALID_BASE = {
    "context_history_list": {},
    "context_fold_create": {"fromIndex": 1, "throughIndex": 1, "summary": "s"},
    "context_fold_list": {},
    "context_fold_read": {"foldId": "f_missing"},
    "context_window_open": {"windowId": "w1", "goal": "g", "input": "i"},
    "context_window_memory_set": {"memory": "m"},
    "context_window_complete": {"outcome": "o"},
    "context_window_list": {},
    "context_window_search": {"query": "q"},
    "context_window_read": {"windowId": "main"},
    "context_task_memory_get": {},
    "context_task_memory_set": {"memory": "m"},
    "context_maintainer_run": {},
}
V2 = catalog.get_version("unified", 2)


@st.composite
def tool_and_arguments(draw):
    tool = draw(st.sampled_from(sorted(V2.tools)))
    properties = V2.tools[tool]["inputSchema"]["properties"]
    arguments = {"purpose": "p", **VALID_BASE[tool]}
    if "expectedWindowId" in properties:
        arguments["expectedWindowId"] = "main"
    name = draw(st.sampled_from(sorted(properties)))
    arguments[name] = draw(JSON_INTEGERS | JSON_STRINGS)
    return tool, arguments


def test_every_protocol_tool_has_a_base_for_the_property_test():
    assert set(VALID_BASE) == set(V2.tools)


@pytest.fixture
def new_session(api_session):
    """Sessions of one AgentVersion, a fresh one per call (examples share the fixture)."""
    base = api_session(version=2)

    def make() -> SessionHandle:
        created = base.app_client.post(
            "sessions/", {"agentVersionId": str(base.agent_version.id), "inputs": {}}
        ).json()
        return SessionHandle(
            base.app,
            base.app_client,
            KeyClient(created["sessionKey"]),
            created["id"],
            base.agent_version,
        )

    return make


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=tool_and_arguments())
def test_any_integer_or_string_argument_gets_a_receipt_for_every_tool(new_session, case):
    tool, arguments = case
    s = new_session()
    s.input("start")
    response = write_call(s, "call", tool, arguments)
    if response.status_code == 400:  # refused before the call exists: nothing to answer
        assert response.json()["error"]["code"] == "unsupported_character"
        assert any("\x00" in v for v in arguments.values() if isinstance(v, str))
        return
    assert response.status_code == 201, response.content
    receipt = s.client.post(s.path("tool-calls/call/dispatch/"))
    assert receipt.status_code == 200, receipt.content
    assert isinstance(receipt.json()["result"]["success"], bool)
    assert s.client.post(s.path("projection/"), {}).status_code == 201
