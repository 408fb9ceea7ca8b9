"""Sessions recorded through `projection_build` for the replay tests: every protocol version,
every adapter, and what a view can depend on (folds, a window switch and back, a pending and
then committed checkpoint, masked results on unified@4, archived messages, a second run)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.models import Tool
from sessions_app.models import ProjectionSnapshot
from sessions_app.services import archive
from sessions_app.store import body_codec, snapshot_bodies

PROVIDERS = ("neutral", "openai-chat", "anthropic-messages")
# Longer than unified@4's maskMinChars (1000): a masked one becomes a stub.
RESULT = "price list: " + "1300 EUR per laptop; " * 100


@dataclass(frozen=True)
class Flavour:
    """One protocol configuration a session is recorded with."""

    label: str
    protocol: str
    version: int
    options: dict[str, Any]
    fields: dict[str, Any]


FLAVOURS = (
    Flavour("prefix@2", "prefix", 2, {}, {}),
    Flavour("unified@1", "unified", 1, {}, {}),
    Flavour("unified@2", "unified", 2, {}, {"prompt_cache": {"mode": "auto", "ttl": "1h"}}),
    # A trailing assistant state travels as a prefill on Anthropic when the model takes one.
    Flavour(
        "unified@3 A",
        "unified",
        3,
        {"stateMessagePlacement": "trailing_assistant"},
        {"model_config": {"assistantPrefill": True}},
    ),
    Flavour("unified@3 B", "unified", 3, {"stateMessagePlacement": "before_history_assistant"}, {}),
    Flavour("unified@3 C", "unified", 3, {"stateMessagePlacement": "trailing_user"}, {}),
    # Mask every long result but the newest one.
    Flavour("unified@4", "unified", 4, {"maskKeepRecent": 1, "maskStep": 1}, {}),
)


def flavour(label: str) -> Flavour:
    return next(f for f in FLAVOURS if f.label == label)


def bind_host_tools(s) -> None:
    """Two host tools on the version (they follow the protocol tools, by name)."""
    for name, schema in (
        ("lookup", {"type": "object", "properties": {"q": {"type": "string"}}}),
        ("calc", {"type": "object", "properties": {"expr": {"type": "string"}}}),
    ):
        tool = Tool.objects.create(
            application=s.app, name=name, description=f"Host tool {name}.", input_schema=schema
        )
        s.agent_version.tools.add(tool)


def turn(s) -> list[dict]:
    """One turn in every wire format (each a projection snapshot)."""
    return [s.project(provider) for provider in PROVIDERS]


def checkpoint(s, window: str, through: int, *, project_while_pending: bool) -> None:
    """Compress `window` through `through` with the external maintainer API."""
    base = f"windows/{window}/maintenance/"
    planned = s.client.post(s.path(base + "plan/"), {"throughIndex": through})
    assert planned.status_code == 201, planned.content
    job = planned.json()
    for n in range(job["pageCount"]):
        page = s.client.get(s.path(f"{base}{job['jobId']}/pages/{n}/"))
        assert page.status_code == 200, page.content
    if project_while_pending:
        # A new message while the plan is held (above its range: the commit still holds),
        # so every version takes a new view; unified@4's says maintenancePending: true.
        s.write(role="assistant", kind="text", content="Checking the warranty terms.")
        turn(s)
    done = s.client.post(
        s.path(f"{base}{job['jobId']}/commit/"), {"checkpoint": f"Lookups through #{through}."}
    )
    assert done.status_code == 200, done.content


def recorded_session(api_session, flavour: Flavour, *, project_while_pending: bool = True):
    """A session of `flavour` whose every turn is recorded in all three wire formats."""
    s = api_session(
        protocol=flavour.protocol,
        version=flavour.version,
        options=dict(flavour.options),
        **flavour.fields,
    )
    bind_host_tools(s)
    unified = flavour.protocol == "unified"
    guard = {"expectedWindowId": "main"} if flavour.version >= 2 and unified else {}

    s.input("prepare a quote for ACME, budget 5000")
    turn(s)
    first, _ = s.host_tool_work("lookup", RESULT)
    _, last = s.host_tool_work("lookup", RESULT + " stock 12")
    s.host_tool_work("calc", "total 4800")
    turn(s)
    if unified:
        folded = s.tool(
            "context_fold_create",
            fromIndex=first,
            throughIndex=last,
            summary="looked up prices and stock",
            **guard,
        )
        assert folded["success"], folded
        turn(s)
        opened = s.tool(
            "context_window_open",
            windowId="alpha",
            goal="schedule the delivery",
            input="deliver next Tuesday",
            **guard,
        )
        assert opened["success"], opened
        s.host_tool_work("calc", "Tuesday is free")
        turn(s)
        back = s.tool(
            "context_window_open",
            windowId="main",
            resume=True,
            input="delivery booked; confirm the quote",
            **({"expectedWindowId": "alpha"} if guard else {}),
        )
        assert back["success"], back
    s.host_tool_work("lookup", RESULT + " shipping 250")
    _, covered = s.host_tool_work("lookup", RESULT + " warranty 2y")
    s.write(role="assistant", kind="text", content="The quote is 4800 EUR.")
    turn(s)
    checkpoint(s, "main", covered, project_while_pending=project_while_pending)
    turn(s)
    assert archive.archive_session(session_id=s.id, keep_last=3, chunk_size=2)
    turn(s)
    s.input("the budget is now 9000; confirm the quote")
    s.host_tool_work("calc", "9000 - 4800 = 4200 left")
    turn(s)
    return s


def rewrite_bodies(session_id, change) -> None:
    """Store every body of the session whole (as before issue 33), `change(snapshot, body)`
    giving the body to store instead (or None: unchanged), so a test can make a recorded body
    differ from what its turn built without leaving a delta on a changed base."""
    snapshots = list(ProjectionSnapshot.objects.filter(session_id=session_id))
    snapshot_bodies.views_of(snapshots)
    for snap in snapshots:
        body = change(snap, dict(snap.view.body)) or snap.view.body
        ProjectionSnapshot.objects.filter(pk=snap.pk).update(
            body=body_codec.legacy_encode(body_codec.body_text(body).encode()),
            body_encoding="json",
            body_base=None,
            body_depth=0,
        )
    snapshot_bodies.forget_cache()
