"""A stored snapshot reads back as the view built at its turn (issue #13).

Whatever the snapshot's storage, what the API, the admin and the runtime read back must be
exactly what the engine projected and the adapter built in the turn: the messages, their
sources and the provider request, in order, for every protocol mapping.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from contextproto.protocol import adapters, catalog
from contextproto.protocol import projection as engine
from contextproto.protocol import view as view_builder
from sessions_app.models import ProjectionSnapshot

MAPPINGS = [
    pytest.param("unified", 1, {}, id="unified@1"),
    pytest.param("unified", 2, {}, id="unified@2"),
    *(
        pytest.param(
            "unified", 3, {"stateMessagePlacement": placement}, id=f"unified@3-{placement}"
        )
        for placement in catalog.STATE_MESSAGE_PLACEMENTS
    ),
    pytest.param("unified", 4, {}, id="unified@4"),
    # Every result but the newest masked, so stubs and their sources are read back too.
    pytest.param(
        "unified",
        4,
        {"maskKeepRecent": 1, "maskStep": 1, "maskMinChars": 0},
        id="unified@4-masked",
    ),
    pytest.param(
        "unified",
        4,
        {"stateMessagePlacement": "before_history_assistant"},
        id="unified@4-before_history_assistant",
    ),
    pytest.param("prefix", 2, {}, id="prefix@2"),
]


def _history(s, protocol: str) -> None:
    """A session with text, parts, a finished host call and, where the protocol has them,
    task memory, a second window and a fold."""
    s.input("Quote ACME: 40 seats, ünïcode and a NUL-free \\u escape")
    s.input(
        [
            {"type": "text", "text": "parts"},
            {"type": "image", "mediaType": "image/png", "data": "AAAA"},
        ]
    )
    first_call, first_result = s.host_tool_work("lookup", result="stock 12")
    s.write(role="assistant", kind="text", content="Found 12 in stock.")
    if protocol != "unified":
        s.host_tool_work("lookup", result="stock 13")
        return
    assert s.tool("context_task_memory_set", memory="ACME quote, 40 seats")["success"]
    s.host_tool_work("lookup", result="price 9")
    # unified@2 and later name the window a mutating call expects.
    expected = {} if s.agent_version.context_protocol_version == 1 else {"expectedWindowId": "main"}
    folded = s.tool(
        "context_fold_create",
        fromIndex=first_call,
        throughIndex=first_result,
        summary="stock",
        **expected,
    )
    assert folded["success"], folded
    s.input("And the price?")


@pytest.mark.parametrize(("protocol", "version", "options"), MAPPINGS)
@pytest.mark.parametrize("provider", ["neutral", "openai-chat", "anthropic-messages"])
def test_snapshot_reads_back_as_the_view_built_at_the_turn(
    api_session, admin_client, monkeypatch, protocol, version, options, provider
):
    s = api_session(protocol=protocol, version=version, options=options)
    _history(s, protocol)

    built: dict = {}
    real_project, real_adapt = engine.project, adapters.adapt

    def project(*args, **kwargs):
        built["projection"] = real_project(*args, **kwargs)
        return built["projection"]

    def adapt(*args, **kwargs):
        built["adapted"] = real_adapt(*args, **kwargs)
        return built["adapted"]

    # The one view builder projects and adapts every live turn.
    monkeypatch.setattr(view_builder, "project", project)
    monkeypatch.setattr(view_builder.adapters, "adapt", adapt)
    answered = s.project(provider)
    monkeypatch.undo()

    wire = built["projection"].to_wire()
    # JSON round trip: what was built is compared as it goes over the wire.
    expected = json.loads(
        json.dumps(
            {
                "messages": wire["messages"],
                "sources": wire["sources"],
                "request": built["adapted"].body,
            }
        )
    )
    assert expected["messages"] and len(expected["messages"]) == len(expected["sources"])
    assert any(src.get("messageIds") for src in expected["sources"])
    if options.get("maskMinChars") == 0:
        assert any(src["derivedType"] == "masked" for src in expected["sources"])

    def same(document: dict) -> None:
        assert document["messages"] == expected["messages"]
        assert document["sources"] == expected["sources"]
        assert document["request"] == expected["request"]
        # Key order too: the request is read back as sent, not as a database reordered it.
        assert json.dumps(document["request"]) == json.dumps(expected["request"])

    same(answered)
    stored = ProjectionSnapshot.objects.get(pk=answered["snapshotId"])
    same({"messages": stored.messages, "sources": stored.sources, "request": stored.request})
    listed = s.client.get(s.path("snapshots/")).json()["snapshots"]
    same(next(x for x in listed if x["snapshotId"] == answered["snapshotId"]))

    # The cache answers the same turn with the same stored snapshot.
    again = s.project(provider)
    assert again["snapshotId"] == answered["snapshotId"]
    same(again)

    # The admin snapshot viewer renders every message of the stored view.
    page = admin_client.get(
        reverse("admin:sessions_app_session_browse_snapshot", args=[s.id, answered["snapshotId"]])
    )
    assert page.status_code == 200
    body = page.content.decode()
    assert "Found 12 in stock." in body
    assert str(len(expected["messages"])) in body
