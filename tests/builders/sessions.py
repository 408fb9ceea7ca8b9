"""Sessions built turn by turn, as a host builds them: through the services the API uses
(`build_session`, `HostTurns`) or through the API itself (`rich_session`, `recorded_session`,
over an `api_session` handle of tests/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.models import Tool
from sessions_app.models import ProjectionSnapshot
from sessions_app.services import archive
from sessions_app.services.dispatch import tool_dispatch
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.projection import projection_build
from sessions_app.services.runs import run_start
from sessions_app.services.sessions import session_create
from sessions_app.store import body_codec, snapshot_bodies
from sessions_app.store.state import kv_commit

SYSTEM_PROMPT = "You are a careful agent.\n{{context_protocol}}"
PROVIDERS = ("neutral", "openai-chat", "anthropic-messages")
# Longer than unified@4's maskMinChars (1000): a masked one becomes a stub.
RESULT = "price list: " + "1300 EUR per laptop; " * 100


def build_session(version, *, input_text: str = "hello", tool_result: str = "42"):
    """A session with one run, a folded host tool interaction and three snapshots.

    Returns (session, fold_id, last_snapshot). Everything goes through the services the API
    uses: session_create, run_start, projection_build, message_write, tool_dispatch.
    """
    session, _key = session_create(agent_version=version, inputs={"user": "operator"})
    run_start(session_id=session.id, content=input_text)
    first = projection_build(session_id=session.id)
    call = message_write(
        session_id=session.id,
        message=NewMessage(
            role="assistant",
            kind="tool_call",
            content="",
            tool_call_id="host_1",
            tool_name="lookup",
            arguments={"q": "answer"},
            snapshot_id=str(first.id),
        ),
        host=True,
    )
    result = message_write(
        session_id=session.id,
        message=NewMessage(
            role="tool", kind="tool_result", content=tool_result, tool_call_id="host_1"
        ),
        host=True,
    )
    second = projection_build(session_id=session.id)
    arguments = {
        "purpose": "tidy up",
        "fromIndex": call.index,
        "throughIndex": result.index,
        "summary": "Looked up the answer: 42.",
    }
    if version.context_protocol_version >= 2:
        arguments["expectedWindowId"] = "main"
    message_write(
        session_id=session.id,
        message=NewMessage(
            role="assistant",
            kind="tool_call",
            content="",
            tool_call_id="fold_1",
            tool_name="context_fold_create",
            arguments=arguments,
            snapshot_id=str(second.id),
        ),
        host=True,
    )
    receipt = tool_dispatch(session_id=session.id, tool_call_id="fold_1")
    assert receipt.result["success"], receipt.result
    last = projection_build(session_id=session.id)
    session.refresh_from_db()
    return session, receipt.result["foldId"], last


class HostTurns:
    """Drive a session as a host would: project, write the model's call, answer or dispatch.

    Every write goes through the services the API uses; `views` collects each snapshot.
    """

    def __init__(self, session) -> None:
        self.session = session
        self.calls = 0
        self.views = []

    def project(self):
        view = projection_build(session_id=self.session.id)
        self.views.append(view)
        return view

    def _call(self, name: str, arguments: dict):
        view = self.project()
        self.calls += 1
        call_id = f"call_{self.calls}"
        call = message_write(
            session_id=self.session.id,
            message=NewMessage(
                role="assistant",
                kind="tool_call",
                content="",
                tool_call_id=call_id,
                tool_name=name,
                arguments=arguments,
                snapshot_id=str(view.id),
            ),
            host=True,
        )
        return call_id, call

    def host(self, name: str, result: str, arguments: dict | None = None):
        """A host tool call and its result: returns (call, result) messages."""
        call_id, call = self._call(name, {"q": name} if arguments is None else arguments)
        answer = message_write(
            session_id=self.session.id,
            message=NewMessage(
                role="tool", kind="tool_result", content=result, tool_call_id=call_id
            ),
            host=True,
        )
        return call, answer

    def context(self, name: str, **arguments) -> dict:
        """A protocol tool call dispatched through the dispatcher: returns its result."""
        call_id, _ = self._call(name, {"purpose": "test", **arguments})
        receipt = tool_dispatch(session_id=self.session.id, tool_call_id=call_id)
        assert receipt.result["success"], receipt.result
        return receipt.result


def build_context_session(version):
    """A unified@2 session whose last view has every raw-message status.

    main: #1 the run's input, then a host lookup (#2/#3). The agent opens window `research`;
    there lookup A stays raw until a checkpoint covers it, lookups B and C are folded, lookup
    D stays in view. Returns (session, turns, messages by name, fold_id).
    """
    session, _key = session_create(agent_version=version, inputs={"customer": "ACME"})
    turns = HostTurns(session)
    named = {"input": run_start(session_id=session.id, content="Prepare the ACME quote.")[1]}
    named["main_call"], named["main_result"] = turns.host("crm_lookup", "ACME is a customer.")
    turns.context(
        "context_window_open",
        expectedWindowId="main",
        windowId="research",
        goal="Research prices",
        input="Find laptop prices.",
    )
    named["a_call"], named["a_result"] = turns.host("price_lookup", "Laptop A: 1300 EUR.")
    named["b_call"], named["b_result"] = turns.host("price_lookup", "Laptop B: 1250 EUR.")
    named["c_call"], named["c_result"] = turns.host("price_lookup", "Laptop C: 1400 EUR.")
    fold = turns.context(
        "context_fold_create",
        expectedWindowId="research",
        fromIndex=named["b_call"].index,
        throughIndex=named["c_result"].index,
        summary="Laptops B and C: 1250 and 1400 EUR.",
    )
    named["d_call"], named["d_result"] = turns.host("price_lookup", "Laptop D: 1100 EUR.")
    # What a committed maintenance job writes: the checkpoint and its coverage.
    kv_commit(
        session_id=session.id,
        writes={
            "checkpoint/research": "Laptop A costs 1300 EUR.",
            "coveredThrough/research": named["a_result"].index,
        },
    )
    turns.project()
    session.refresh_from_db()
    return session, turns, named, fold["foldId"]


def rich_session(api_session) -> Any:
    """unified@2, three runs, windows main/alpha/beta, a fold, host and protocol tool work."""
    s = api_session(version=2)
    s.input("prepare a quote for ACME, budget 5000")
    s.host_tool_work("lookup", "price list: 价格 😀 𝄞")
    s.write(role="assistant", kind="text", content="Working on it.")
    a1, _ = s.host_tool_work("lookup", "stock: 12")
    _, a2 = s.host_tool_work("lookup", "shipping: 3 days")
    assert s.tool(
        "context_fold_create",
        fromIndex=a1,
        throughIndex=a2,
        summary="looked up stock and shipping",
        expectedWindowId="main",
    )["success"]
    assert s.tool(
        "context_window_open",
        windowId="alpha",
        goal="quote",
        input="quote 5000",
        expectedWindowId="main",
    )["success"]
    s.host_tool_work("calc", "total 4800")
    s.write(
        role="assistant",
        kind="text",
        content=[{"type": "text", "text": "draft quote"}, {"type": "text", "text": "€4800"}],
    )
    s.input("now schedule the delivery")
    assert s.tool(
        "context_window_open",
        windowId="beta",
        goal="schedule",
        input="deliver next week",
        expectedWindowId="alpha",
    )["success"]
    s.host_tool_work("calendar", "free on Tuesday")
    assert s.tool("context_window_memory_set", memory="Tuesday", expectedWindowId="beta")["success"]
    s.input("the budget is now 9000")
    assert s.tool(
        "context_window_open",
        windowId="alpha",
        resume=True,
        input="budget 9000",
        expectedWindowId="beta",
    )["success"]
    s.host_tool_work("calc", "total 8800")
    s.write(role="assistant", kind="text", content="Updated quote: 8800.")
    return s


# ---------------------------------------------------------------- recorded for replay
# Sessions recorded through `projection_build` for the replay tests: every protocol version,
# every adapter, and what a view can depend on (folds, a window switch and back, a pending and
# then committed checkpoint, masked results on unified@4, archived messages, a second run).


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
