"""A client generated from /api/v1/schema/ with openapi-python-client drives a session turn.

Issue 32 tried the schema as a new user would: operations came out as `agents_retrieve` (for a
list) and `sessions_tool_calls_dispatch_create`, `kind`/`role`/`provider` as plain strings.
Here the client is generated into a temporary directory (generation refuses warnings),
imported, and used against a live server (pytest-django's `live_server`, a real HTTP server
on the test database) for host turns: agent, tool, version, session, input, view, the
model's answer as the OpenAI SDK returned it recorded with `turn_record` (a protocol call with
an id holding `/`, dispatched, the reply's own usage), its replay, a refusal read back as a
typed error, and a neutral answer whose tool result is a typed error. The test fails on any
operation id drf-spectacular would have made up from the path.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from rest_framework.test import APIClient

from agents.services import application_create

PACKAGE = "contextproto_client"
ACTIONS = ("list", "retrieve", "create", "update", "partial_update", "destroy")


def default_ids(method: str, path: str) -> set[str]:
    """The ids drf-spectacular derives from a path when a view names none (`<tokens>_<action>`)."""
    tokens = [
        token.replace("-", "_")
        for token in path.removeprefix("/api/v1/").strip("/").split("/")
        if token and not token.startswith("{")
    ]
    return {"_".join([*tokens, action]) for action in ACTIONS}


@pytest.fixture(scope="module")
def schema(django_db_blocker) -> dict:
    with django_db_blocker.unblock():
        response = APIClient().get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_no_operation_has_a_default_name(schema):
    named = {
        (method, path): operation["operationId"]
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    }
    defaulted = {key: name for key, name in named.items() if name in default_ids(key[0], key[1])}
    assert defaulted == {}
    assert named[("post", "/api/v1/sessions/")] == "session_create"
    assert named[("get", "/api/v1/agents/")] == "agent_list"
    assert (
        named[("post", "/api/v1/sessions/{session_id}/tool-calls/{tool_call_id}/dispatch/")]
        == "tool_call_dispatch"
    )


@pytest.fixture(scope="module")
def client_package(schema, tmp_path_factory) -> Iterator[ModuleType]:
    root = tmp_path_factory.mktemp("generated")
    (root / "schema.json").write_text(json.dumps(schema))
    (root / "config.yaml").write_text(
        f"package_name_override: {PACKAGE}\npost_hooks: []\n"  # no formatter run: offline
    )
    generator = Path(sys.executable).parent / "openapi-python-client"
    done = subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            str(root / "schema.json"),
            "--config",
            str(root / "config.yaml"),
            "--meta",
            "none",
            "--output-path",
            str(root / PACKAGE),
            "--fail-on-warning",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def module(name: str) -> ModuleType:
    return importlib.import_module(f"{PACKAGE}.{name}")


@pytest.mark.django_db(transaction=True)
def test_a_generated_client_runs_a_session_turn(client_package, live_server):
    models = module("models")
    api = "api"
    _app, key = application_create(name="generated-client")
    app = client_package.AuthenticatedClient(base_url=live_server.url, token=key)

    agent = module(f"{api}.agents.agent_create").sync(
        client=app, body=models.AgentCreateInput(name="sales-desk")
    )
    assert isinstance(agent, models.Agent), agent
    agents = module(f"{api}.agents.agent_list").sync(client=app)
    assert [a.name for a in agents.agents] == ["sales-desk"]

    register = module(f"{api}.tools.tool_register")
    tool_body = models.ToolInput.from_dict(
        {
            "name": "price_lookup",
            "description": "Unit price of a product.",
            "inputSchema": {"type": "object", "properties": {"product": {"type": "string"}}},
        }
    )
    tool = register.sync(client=app, body=tool_body)
    assert isinstance(tool, models.HostTool)
    assert register.sync(client=app, body=tool_body).id == tool.id  # idempotent: 200
    clash = models.ToolInput.from_dict({**tool_body.to_dict(), "description": "Other."})
    refused = register.sync_detailed(client=app, body=clash)
    assert refused.status_code == 409
    assert refused.parsed.error.code == models.ErrorCode.TOOL_NAME_TAKEN  # a typed error
    assert refused.parsed.error.details["id"] == str(tool.id)

    version = module(f"{api}.agents.agent_version_create").sync(
        str(agent.id),
        client=app,
        body=models.VersionInput(
            system_prompt="You answer quotes.\n{{context_protocol}}",
            context_protocol_id="unified",
            context_protocol_version=4,
            model=models.ModelInput(
                provider=models.ModelProvider.EXTERNAL, name="gpt-4.1", max_input_tokens=128000
            ),
            tools=[tool.id],
        ),
    )
    assert isinstance(version, models.AgentVersion), version
    published = module(f"{api}.agent_versions.agent_version_publish").sync(
        str(version.id), client=app
    )
    assert published.status == models.AgentVersionStatusEnum.PUBLISHED

    session = module(f"{api}.sessions.session_create").sync(
        client=app, body=models.SessionCreateInput(agent_version_id=version.id)
    )
    assert isinstance(session, models.SessionCreated), session
    host = client_package.AuthenticatedClient(base_url=live_server.url, token=session.session_key)
    sid = str(session.id)

    started = module(f"{api}.sessions.session_input_create").sync(
        sid, client=host, body=models.SessionInputInput(content="Quote 5000 x A-100, please.")
    )
    assert started.index == 1
    view = module(f"{api}.sessions.projection_create").sync(
        sid, client=host, body=models.ProjectionInput(provider=models.WireFormat.OPENAI_CHAT)
    )
    assert view.provider == models.WireFormat.OPENAI_CHAT
    assert view.messages[0].role == models.ViewRole.SYSTEM
    assert view.sources[-1].derived_type == models.DerivedType.CONTEXT_STATE

    # The model's answer as the OpenAI SDK returned it, recorded in one call: a protocol call
    # whose id holds `/`, its arguments as JSON text, the reply's own usage.
    call_id = "functions/context_task_memory_set:0"
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767000000,
        "model": "gpt-4.1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "I'll note the request.",
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": "context_task_memory_set",
                                "arguments": json.dumps(
                                    {"purpose": "keep it", "memory": "Quote 5000 x A-100."}
                                ),
                            },
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 3512, "completion_tokens": 48, "total_tokens": 3560},
    }
    record = module(f"{api}.sessions.turn_record")
    body = models.TurnInput.from_dict({"snapshotId": str(view.snapshot_id), "answer": completion})
    turn = record.sync(sid, client=host, body=body)
    assert isinstance(turn, models.Turn), turn
    assert turn.replayed is False and turn.host_call is None
    assert turn.run_status == models.RunStatus.EXTERNAL
    assert [m.kind for m in turn.messages] == [
        models.MessageKind.TOOL_CALL,
        models.MessageKind.TOOL_RESULT,
    ]
    assert turn.messages[0].content == "I'll note the request."
    assert turn.receipt.tool_call_id == call_id and turn.receipt.result.success is True
    again = record.sync_detailed(sid, client=host, body=body)
    assert again.status_code == 200 and again.parsed.replayed is True
    # The dispatch by path, percent-encoded by the client, replays the receipt.
    receipt = module(f"{api}.sessions.tool_call_dispatch").sync(sid, call_id, client=host)
    assert isinstance(receipt, models.Receipt), receipt
    assert receipt.replayed is True and receipt.state_revision == turn.receipt.state_revision
    other = models.TurnInput.from_dict(
        {"snapshotId": str(view.snapshot_id), "answer": {"content": "Something else."}}
    )
    refused = record.sync_detailed(sid, client=host, body=other)
    assert refused.status_code == 409
    assert refused.parsed.error.code == models.ErrorCode.SNAPSHOT_ALREADY_ANSWERED

    # The next turn's view carries the call and its result; a tool refusal is typed too.
    after = module(f"{api}.sessions.projection_create").sync(
        sid, client=host, body=models.ProjectionInput(provider=models.WireFormat.NEUTRAL)
    )
    assert [m.kind for m in after.messages][-3:-1] == [
        models.ViewMessageKind.TOOL_CALL,
        models.ViewMessageKind.TOOL_RESULT,
    ]
    neutral = {
        "content": None,
        "toolCalls": [
            {"id": "call_2", "name": "context_task_memory_set", "arguments": '{"memory": '}
        ],
    }
    late = record.sync(
        sid,
        client=host,
        body=models.TurnInput.from_dict(
            {
                "snapshotId": str(after.snapshot_id),
                "answer": neutral,
                "usage": {"inputTokens": 3600, "outputTokens": 20},
            }
        ),
    )
    assert late.receipt.result.success is False
    assert late.receipt.result.error.code == models.ToolResultCode.INVALID_ARGUMENTS
    state = module(f"{api}.sessions.session_get").sync(sid, client=host)
    assert state.usage.input_tokens == 3512 + 3600 and state.usage.turns == 2
