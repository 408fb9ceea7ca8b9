"""Every reply shape is named once, as a TypedDict beside its `to_wire` builder, and the
serializers that document it for the OpenAPI schema are held to it here, in one table.

Three checks: each (TypedDict, serializer) pair agrees key for key (required/optional,
nullability, field kind, nested shapes); real objects built through their `to_wire` and
real API answers fit their TypedDicts; and no `to_wire` builder returns a bare dict.
"""

from __future__ import annotations

import ast
import uuid
from pathlib import Path
from typing import Literal, TypedDict

import pytest
from django.urls import resolve
from rest_framework import serializers

from agents import apis_shapes
from agents.apis_keys import api_key_to_wire
from agents.apis_tools import tool_to_wire
from agents.models import ApiKey, Tool
from agents.selectors import agent_version_to_wire, gateway_settings_of, gateway_settings_to_wire
from agents.services_gateway import gateway_settings_set
from agents.wire import (
    AgentVersionPublishedWire,
    AgentVersionWire,
    ApiKeyCreatedWire,
    ApiKeyWire,
    GatewaySettingsWire,
    HostToolWire,
    ModelAliasWire,
    ModelSettingsWire,
)
from contextproto.economics.cache_report import CacheEconomyWire
from contextproto.economics.stored_views import projection_from_wire
from contextproto.protocol.catalog import ProtocolVersionPublic
from contextproto.protocol.messages import FrameWire, ModelMessageWire, RawMessageWire, SourceWire
from contextproto.protocol.options import OptionErrorWire
from contextproto.protocol.projection import ProjectionWire
from contextproto.protocol.tool_results import ToolResult
from contextproto.usage import Problem, SessionUsageWire, UsageWire
from sessions_app.api import shapes
from sessions_app.api.conversations import conversation_to_wire
from sessions_app.api.maintenance import job_to_wire
from sessions_app.api.views import fold_to_wire, session_to_wire, window_to_wire
from sessions_app.api.wire import (
    ChildSessionWire,
    FoldWire,
    GatewayConversationWire,
    MaintenanceJobWire,
    SessionCreatedWire,
    SessionDetailWire,
    SessionWire,
    WindowWire,
)
from sessions_app.models import GatewayConversation, MaintenanceJob, ProjectionSnapshot, Session
from sessions_app.reads import lists
from sessions_app.replay import session_replay
from sessions_app.replay_wire import SessionReplayWire
from sessions_app.services import dispatch
from sessions_app.services.dispatch import ReceiptWire
from sessions_app.services.fork import ForkPointWire, fork_point_of
from sessions_app.services.projection import SnapshotDetailWire, SnapshotWire, snapshot_to_wire
from sessions_app.services.sessions import session_create
from sessions_app.services.turns import HostCallWire, TurnWire
from sessions_app.store import body_retention, snapshot_bodies
from tests.api.wire_check import serializer_problems, wire_problems

ROOT = Path(__file__).resolve().parents[2]
# Like tests/maintenance: a small uncompressed tail, so a dozen tool results can be planned.
MAX_INPUT_TOKENS = 4000
SOME_ID = "00000000-0000-4000-8000-000000000000"


def snapshot_detail_output():
    # The view's own Output (the list's Snapshot plus the body's provenance), found by its
    # route so the table does not depend on which module holds the view.
    path = f"/api/v1/sessions/{SOME_ID}/snapshots/{SOME_ID}/"
    return resolve(path).func.view_class.Output


# (TypedDict, serializer that documents it). Nested pairs (a session's forkedFrom, a
# receipt's resultMessage, ...) are checked through their parents as well.
PAIRS = [
    (RawMessageWire, shapes.Message),
    (FrameWire, shapes.Frame),
    (ForkPointWire, shapes.ForkPoint),
    (SessionWire, shapes.Session),
    (UsageWire, shapes.SessionUsage),
    (SessionDetailWire, shapes.SessionDetail),
    (SessionUsageWire, shapes.SessionUsageWithSide),
    (SessionCreatedWire, shapes.SessionCreated),
    (SessionCreatedWire, shapes.SessionForked),
    (ModelMessageWire, shapes.ProjectionMessage),
    (SourceWire, shapes.ProjectionSource),
    (SnapshotWire, shapes.Snapshot),
    (SnapshotDetailWire, snapshot_detail_output),
    (ToolResult, shapes.ToolResult),
    (ReceiptWire, shapes.Receipt),
    (HostCallWire, shapes.HostCall),
    (TurnWire, shapes.Turn),
    (WindowWire, shapes.Window),
    (FoldWire, shapes.Fold),
    (MaintenanceJobWire, shapes.MaintenanceJob),
    (ModelSettingsWire, apis_shapes.ModelSettings),
    (AgentVersionWire, apis_shapes.AgentVersion),
    (ProtocolVersionPublic, apis_shapes.ProtocolVersion),
    (OptionErrorWire, apis_shapes.OptionError),
    (ApiKeyWire, apis_shapes.ApiKey),
    (ApiKeyCreatedWire, apis_shapes.ApiKeyCreated),
    (HostToolWire, apis_shapes.HostTool),
    (Problem, apis_shapes.PublishWarning),
    (AgentVersionPublishedWire, apis_shapes.AgentVersionPublished),
    (ModelAliasWire, apis_shapes.ModelAlias),
    (GatewaySettingsWire, apis_shapes.GatewaySettings),
    (ChildSessionWire, shapes.ChildSession),
    (GatewayConversationWire, shapes.GatewayConversation),
]


# Serializers of the two shape modules with no TypedDict of their own, and why.
UNPAIRED = {
    "Agent": "built inline by the agent views (id and name), no builder",
    "AgentList": "a list of Agent",
    "ProtocolList": "a list of ProtocolVersion (paired) and the fingerprint",
    "OptionValidation": "valid, normalized and a list of OptionError (paired)",
    "ApiKeyList": "a page of ApiKey (paired)",
    "HostToolList": "a page of HostTool (paired)",
    "ToolError": "open (more context fields follow); checked as ToolResult's error",
    "KvEntry": "built inline by the KV list view, no builder",
    "DependencyChecks": "health probes, built inline",
    "CatalogGroup": "health probes, built inline",
    "Health": "health probes, built inline",
    "HealthLive": "health probes, built inline",
    "HealthReady": "health probes, built inline",
}


def test_every_shape_serializer_is_paired_or_says_why_not():
    declared = {
        name
        for module in (shapes, apis_shapes)
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, serializers.Serializer)
        and value.__module__ == module.__name__
    }
    paired = {serializer.__name__ for _, serializer in PAIRS}
    assert declared - paired == set(UNPAIRED)


@pytest.mark.parametrize(
    ("shape", "serializer"), PAIRS, ids=[serializer.__name__ for _, serializer in PAIRS]
)
def test_the_serializer_documents_its_wire_shape_key_for_key(shape, serializer):
    if not isinstance(serializer, type):
        serializer = serializer()
    assert serializer_problems(serializer, shape) == []


class KindsWire(TypedDict):
    kind: Literal["a", "c"]


class Kinds(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["a", "b"])


def test_the_check_finds_a_key_the_schema_misses_and_a_wrong_split():
    class Short(shapes.ForkPoint):
        revision = None  # DRF: a None attribute removes the declared field

    class Loose(shapes.ForkPoint):
        throughIndex = serializers.IntegerField(required=False, allow_null=True)

    assert serializer_problems(Short, ForkPointWire) == [".: sent but not documented: ['revision']"]
    assert serializer_problems(Loose, ForkPointWire) == [
        ".throughIndex: required=False but the shape's key is always there",
        ".throughIndex: allow_null=True but the shape's value is never null",
    ]
    assert serializer_problems(Kinds, KindsWire) == [
        ".kind: choices ['a', 'b'] but sent ['a', 'c']"
    ]
    # NotRequired keys may be absent (Python's own __required_keys__ would say otherwise).
    assert wire_problems({"role": "user", "kind": "input", "content": "hi"}, ModelMessageWire) == []
    assert wire_problems({"sessionId": "s", "throughIndex": "1"}, ForkPointWire) == [
        ".: ForkPointWire keys missing: ['revision']",
        ".throughIndex: '1' is not <class 'int'>",
    ]


def _wire_builders() -> list[tuple[str, str, str]]:
    """(file, builder, return annotation) of every `to_wire` / `*_to_wire` / `*_wire`
    builder of the product (not the `*_from_wire` parsers)."""
    found = []
    for package in ("contextproto", "agents", "sessions_app", "labs"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and (
                    node.name.endswith("_wire") and not node.name.endswith("from_wire")
                ):
                    returns = ast.unparse(node.returns) if node.returns else ""
                    found.append((str(path.relative_to(ROOT)), node.name, returns))
    return found


def test_no_wire_builder_returns_a_bare_dict():
    builders = _wire_builders()
    assert len(builders) >= 30, builders
    bare = [b for b in builders if not b[2] or "dict[" in b[2] or b[2] in ("Any", "dict")]
    assert bare == []


def check(value, shape) -> None:
    assert wire_problems(value, shape) == [], shape.__name__


def ok(response, status: int = 200):
    assert response.status_code == status, response.content
    return response.json()


def test_real_objects_and_answers_fit_their_wire_shapes(api_session, settings):
    settings.MAINTENANCE_TAIL_SHARE = 250 / MAX_INPUT_TOKENS
    s = api_session(version=2, options={"pageSize": 10}, max_input_tokens=MAX_INPUT_TOKENS)
    app, host = s.app_client, s.client

    # The catalog and the configuration.
    for entry in ok(app.get("protocols/"))["protocols"]:
        check(entry, ProtocolVersionPublic)
    refused = ok(app.post("protocols/unified/2/validate/", {"options": {"nope": 1}}))
    assert refused["errors"]
    for error in refused["errors"]:
        check(error, OptionErrorWire)
    tool_body = {"name": "lookup", "description": "d", "inputSchema": {"type": "object"}}
    check(ok(app.post("tools/", tool_body), 201), HostToolWire)
    check(tool_to_wire(Tool.objects.get(name="lookup")), HostToolWire)
    check(ok(app.get(f"agent-versions/{s.agent_version.id}/")), AgentVersionWire)
    check(agent_version_to_wire(s.agent_version), AgentVersionWire)
    created = ok(app.post("api-keys/"), 201)
    check(created, ApiKeyCreatedWire)
    check(ok(app.post(f"api-keys/{created['id']}/revoke/")), ApiKeyWire)
    check(api_key_to_wire(ApiKey.objects.get(id=created["id"])), ApiKeyWire)

    # A session: messages, views, a dispatched call, a recorded turn.
    check(ok(host.get(s.path())), SessionDetailWire)
    started = ok(host.post(s.path("inputs/"), {"content": "prepare the quote"}), 201)
    check(started["message"], RawMessageWire)
    view = s.project("openai-chat")
    check(view, SnapshotWire)
    opened = s.call(
        "context_window_open", windowId="a", goal="g", input="i", expectedWindowId="main"
    )
    check(s.dispatch(opened), ReceiptWire)
    check(dispatch.tool_dispatch(session_id=s.id, tool_call_id=opened).to_wire(), ReceiptWire)
    refusal = s.call("context_window_open", windowId="a", goal="g", input="i")
    check(s.dispatch(refusal), ReceiptWire)
    s.tool("context_window_open", windowId="main", resume=True, input="b", expectedWindowId="a")
    for n in range(12):
        s.host_tool_work(f"lookup{n}", "x" * 400)
    first, last = s.host_tool_work("to-fold", "y")
    folded = s.tool(
        "context_fold_create",
        fromIndex=first,
        throughIndex=last,
        summary="s",
        expectedWindowId="main",
    )
    assert folded["success"], folded
    memory = {"purpose": "p", "memory": "quote"}
    reply = {
        "content": "Noted.",
        "toolCalls": [{"id": "t/1", "name": "context_task_memory_set", "arguments": memory}],
    }
    turn = ok(
        host.post(s.path("turns/"), {"snapshotId": s.project()["snapshotId"], "answer": reply}), 201
    )
    check(turn, TurnWire)
    assert turn["receipt"] is not None
    s.agent_version.tools.add(Tool.objects.get(name="lookup"))
    lookup = {"content": None, "toolCalls": [{"id": "t2", "name": "lookup", "arguments": {}}]}
    handed = ok(
        host.post(s.path("turns/"), {"snapshotId": s.project()["snapshotId"], "answer": lookup}),
        201,
    )
    check(handed, TurnWire)
    assert handed["hostCall"] is not None
    s.write(role="tool", kind="tool_result", content="found", toolCallId="t2")
    usage = {"inputTokens": 10, "outputTokens": 2}
    last_view = s.project()
    ok(host.post(s.path(f"snapshots/{last_view['snapshotId']}/usage/"), usage))

    # The session's lists, each answer and each builder over the rows.
    session = Session.objects.get(id=s.id)
    check(session_to_wire(session), SessionWire)
    check(ok(host.get(s.path())), SessionDetailWire)
    for message in ok(host.get(s.path("messages/"), limit=200))["messages"]:
        check(message, RawMessageWire)
    windows = ok(host.get(s.path("windows/")))["windows"]
    assert len(windows) == 2
    for window in windows:
        check(window, WindowWire)
    for row in lists.window_page(session, cursor=None, limit=50).items:
        check(window_to_wire(row), WindowWire)
    folds = ok(host.get(s.path("folds/")))["folds"]
    assert folds
    for fold in folds:
        check(fold, FoldWire)
    for row in lists.fold_page(session, cursor=None, limit=50).items:
        check(fold_to_wire(row), FoldWire)
    for listed in ok(host.get(s.path("snapshots/"), limit=200))["snapshots"]:
        check(listed, SnapshotWire)
        check(ok(host.get(s.path(f"snapshots/{listed['snapshotId']}/"))), SnapshotDetailWire)
    for snapshot in ProjectionSnapshot.objects.filter(session_id=s.id):
        check(snapshot_to_wire(snapshot), SnapshotWire)
        check(snapshot_to_wire(snapshot, provenance=True), SnapshotDetailWire)
        projection = projection_from_wire(
            snapshot.messages,
            snapshot.sources,
            window_id=snapshot.window_id,
            revision=snapshot.revision,
            upper_bound=snapshot.upper_bound,
            run_id=snapshot.run_id.hex if snapshot.run_id else None,
            protocol=snapshot.protocol,
            options={},
        )
        check(projection.to_wire(), ProjectionWire)
    # A body dropped by retention is rebuilt on read and says so (`bodyHashMatches`).
    assert body_retention.bodies_drop([view["snapshotId"]]) == 1
    snapshot_bodies.forget_cache()
    rebuilt = ok(host.get(s.path(f"snapshots/{view['snapshotId']}/")))
    assert rebuilt["body"] == "rebuilt" and "bodyHashMatches" in rebuilt
    check(rebuilt, SnapshotDetailWire)

    # A fork, its point, and maintenance by an external maintainer.
    fork = ok(app.post(s.path("fork/"), {"snapshotId": last_view["snapshotId"]}), 201)
    check(fork, SessionCreatedWire)
    assert fork["forkedFrom"] is not None
    point = fork_point_of(Session.objects.get(id=fork["id"]))
    assert point is not None
    check(point.to_wire(), ForkPointWire)
    job = ok(host.post(s.path("windows/main/maintenance/plan/"), {}), 201)
    commit = s.path(f"windows/main/maintenance/{job['jobId']}/commit/")
    ok(host.post(commit, {"checkpoint": "Quote in progress."}))
    for listed_job in ok(host.get(s.path("maintenance/")))["jobs"]:
        check(listed_job, MaintenanceJobWire)
    check(job_to_wire(MaintenanceJob.objects.get(id=job["jobId"])), MaintenanceJobWire)

    # The replay report (no API serves it) and the cache economies inside it.
    replay = session_replay(session_id=s.id)
    check(replay.to_wire(), SessionReplayWire)
    check(replay.recorded.to_wire(), CacheEconomyWire)
    check(replay.replayed.to_wire(), CacheEconomyWire)
    assert uuid.UUID(replay.session_id)


def test_gateway_settings_publish_and_conversation_answers_fit_their_wire_shapes(
    tenant, make_version, monkeypatch
):
    app, client = tenant("Shapes")
    version = make_version(app, name="helper", provider="scripted")
    settings_body = {
        "modelAliases": [{"pattern": "claude-*", "agentVersion": "helper@1"}],
        "sideModels": ["*mini*"],
    }
    check(ok(client.put("gateway-settings/", settings_body)), GatewaySettingsWire)
    check(ok(client.get("gateway-settings/")), GatewaySettingsWire)
    gateway_settings_set(application=app, model_aliases=[], side_models=None)
    check(gateway_settings_to_wire(gateway_settings_of(app)), GatewaySettingsWire)

    # A publish that warns (an apiKeyEnv unset on this node).
    monkeypatch.delenv("WIRE_SHAPES_UNSET_KEY", raising=False)
    agent = ok(client.post("agents/", {"name": "keyed"}), 201)
    body = {
        "systemPrompt": "You help.\n{{context_protocol}}",
        "contextProtocolId": "unified",
        "contextProtocolVersion": 2,
        "model": {
            "provider": "openai",
            "name": "m",
            "maxInputTokens": 8000,
            "config": {"apiKeyEnv": "WIRE_SHAPES_UNSET_KEY"},
        },
    }
    draft = ok(client.post(f"agents/{agent['id']}/versions/", body), 201)
    published = ok(client.post(f"agent-versions/{draft['id']}/publish/"))
    assert published["warnings"]
    check(published, AgentVersionPublishedWire)

    main, _ = session_create(agent_version=version, inputs={})
    child, _ = session_create(agent_version=version, inputs={})
    GatewayConversation.objects.create(application=app, conversation_id="c1", session=main)
    GatewayConversation.objects.create(
        application=app, conversation_id="c1", agent_id="sub", session=child, parent=main
    )
    check(ok(client.get("gateway-conversations/c1/")), GatewayConversationWire)
    view = lists.gateway_conversation_get(application_id=app.pk, conversation_id="c1")
    check(conversation_to_wire(view), GatewayConversationWire)
