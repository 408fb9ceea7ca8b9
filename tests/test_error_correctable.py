"""`correctable` is a property of an error code, kept in the registry (issue 35.2).

Every path that answers a tool error (an HTTP dispatch receipt, an MCP tool error, the
runtime's and the gateway's answers to the model, the engine's refusals) takes the flag from
`contextproto.errors` (the engine's codes from `contextproto.protocol.errors`, which the
registry reads); no site decides it itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from mcp import Client

from contextproto.errors import (
    ERRORS,
    INTERNAL_ERROR,
    TOOL_RESULT,
    ApplicationError,
    codes_seen_in,
    correctable,
    tool_error,
)
from contextproto.protocol import errors as engine
from contextproto.protocol.tool_base import Refusal, error_outcome
from sessions_app.auth import credential_for_key
from sessions_app.mcp_server import _failure, _refusal, build_server
from tests.servers import run_coroutine

ROOT = Path(__file__).resolve().parent.parent
# The codes the contract marks "not correctable" among those a tool result carries
# (docs/contract.md §5.3's table), and the service's own failures.
NOT_CORRECTABLE_IN_RESULTS = {
    "context_fold_limit_reached",
    "context_fold_messages_missing",
    "context_window_limit_reached",
    "context_window_state_inconsistent",
    "context_maintainer_not_bound",
    "history_message_missing",
    "kv_key_limit_reached",
    "tool_internal_error",
}


def test_every_code_a_tool_result_can_carry_has_its_flag_in_the_registry():
    in_results = codes_seen_in(TOOL_RESULT)
    assert in_results
    assert all(isinstance(entry.correctable, bool) for entry in ERRORS.values())
    assert {e.code for e in in_results if not e.correctable} == NOT_CORRECTABLE_IN_RESULTS


@pytest.mark.parametrize("code", engine.CODES)
def test_the_engine_and_the_registry_agree_on_every_engine_code(code):
    assert engine.correctable(code) is ERRORS[code].correctable
    for refusal in (engine.ProtocolError(code, "m"), Refusal(code, "m")):
        assert error_outcome(refusal).result["error"]["correctable"] is correctable(code)


@pytest.mark.parametrize("code", sorted(ERRORS))
def test_mcp_refusals_and_receipts_take_the_registry_flag(code):
    mcp = _refusal(ApplicationError(code, "m", {"field": "f"}), "call-1")["error"]
    receipt = tool_error(code, "m", {"field": "f"})["error"]
    assert mcp["correctable"] is receipt["correctable"] is ERRORS[code].correctable


def test_a_service_failure_over_mcp_is_the_registry_flag():
    failed = _failure(RuntimeError("x"), "call-1", "context_task_memory_get")["error"]
    assert (failed["code"], failed["correctable"]) == (INTERNAL_ERROR, correctable(INTERNAL_ERROR))


def test_no_site_outside_the_registry_decides_correctable():
    """Services build tool errors with `tool_error`; only the engine's one builder and the
    registry pass `correctable` on."""
    allowed = {
        "contextproto/errors.py",
        "contextproto/error_registry.py",
        "contextproto/protocol/tool_base.py",
    }
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("agents", "contextproto", "sessions_app", "labs")
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts and path.relative_to(ROOT).as_posix() not in allowed
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bcorrectable=", line)
    ]
    assert not offenders, offenders


@pytest.mark.django_db(transaction=True)
def test_http_and_mcp_answer_an_engine_refusal_with_the_same_flag(api_session):
    # No maintainer bound: context_maintainer_run is refused, not correctably, on both paths.
    s = api_session(version=2)
    s.input("start")
    over_http = s.tool("context_maintainer_run", expectedWindowId="main")["error"]

    async def resolve(_ctx):
        return await sync_to_async(credential_for_key, thread_sensitive=True)(s.client.key)

    async def over_mcp():
        try:
            async with Client(build_server(resolve)) as client:
                result = await client.call_tool(
                    "context_maintainer_run",
                    {"purpose": "p", "expectedWindowId": "main"},
                    meta={"toolCallId": "m"},
                )
                return result.structured_content["error"]
        finally:
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    via_mcp = run_coroutine(over_mcp())
    assert over_http["code"] == via_mcp["code"] == "context_maintainer_not_bound"
    assert over_http["correctable"] is via_mcp["correctable"] is correctable(over_http["code"])
    assert correctable(over_http["code"]) is False
