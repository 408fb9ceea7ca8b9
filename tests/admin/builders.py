"""Session builders for admin and browser tests: data made through the services (bulk
inserts of finished messages aside, which the log allows)."""

from __future__ import annotations

import uuid

from django.db import connection
from django.utils import timezone

from sessions_app.models import Message, Session
from sessions_app.services.dispatch import tool_dispatch
from sessions_app.services.messages import message_write
from sessions_app.services.projection import projection_build
from sessions_app.services.runs import run_start
from sessions_app.services.sessions import session_create
from sessions_app.store.state import kv_commit

SYSTEM_PROMPT = "You are a careful agent.\n{{context_protocol}}"


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
        role="assistant",
        kind="tool_call",
        content="",
        tool_call_id="host_1",
        tool_name="lookup",
        arguments={"q": "answer"},
        snapshot_id=str(first.id),
    )
    result = message_write(
        session_id=session.id,
        role="tool",
        kind="tool_result",
        content=tool_result,
        tool_call_id="host_1",
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
        role="assistant",
        kind="tool_call",
        content="",
        tool_call_id="fold_1",
        tool_name="context_fold_create",
        arguments=arguments,
        snapshot_id=str(second.id),
    )
    receipt = tool_dispatch(session_id=session.id, tool_call_id="fold_1")
    assert receipt.result["success"], receipt.result
    last = projection_build(session_id=session.id)
    session.refresh_from_db()
    return session, receipt.result["foldId"], last


def bulk_messages(session, count: int, windows: tuple[str, ...] = ("main", "w1", "w2")) -> None:
    """Append `count` finished assistant texts round-robin over `windows` (raw inserts)."""
    start = Session.objects.get(pk=session.pk).next_message_index
    now = timezone.now()
    rows = [
        Message(
            id=uuid.uuid4(),
            session_id=session.pk,
            index=start + n,
            window_id=windows[n % len(windows)],
            role="assistant",
            kind="text",
            content=f"note {start + n}",
            created_at=now,
        )
        for n in range(count)
    ]
    Message.objects.bulk_create(rows, batch_size=2000)
    Session.objects.filter(pk=session.pk).update(next_message_index=start + count)
    session.refresh_from_db()


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
            role="assistant",
            kind="tool_call",
            content="",
            tool_call_id=call_id,
            tool_name=name,
            arguments=arguments,
            snapshot_id=str(view.id),
        )
        return call_id, call

    def host(self, name: str, result: str, arguments: dict | None = None):
        """A host tool call and its result: returns (call, result) messages."""
        call_id, call = self._call(name, {"q": name} if arguments is None else arguments)
        answer = message_write(
            session_id=self.session.id,
            role="tool",
            kind="tool_result",
            content=result,
            tool_call_id=call_id,
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


def sql_bulk_messages(session, count: int, windows: tuple[str, ...] = ("w1", "w2", "w3")) -> None:
    """Append `count` short assistant texts round-robin over `windows`, generated in SQL.

    For sessions of 100k messages: building that many model instances in Python takes tens
    of seconds, one INSERT … SELECT over a generated series takes about one. Raw inserts of
    finished messages are allowed (the log refuses only updates and deletes).
    """
    start = Session.objects.get(pk=session.pk).next_message_index
    last = start + count - 1
    table = Message._meta.db_table
    names = list(windows)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"""INSERT INTO {table}
                    (id, session_id, "index", window_id, role, kind, content, created_at)
                SELECT gen_random_uuid(), %s, g, (%s::text[])[1 + (g - %s) %% %s],
                    'assistant', 'text', to_jsonb('note ' || g), %s
                FROM generate_series(%s::bigint, %s::bigint) AS g""",
                [session.pk, names, start, len(names), now, start, last],
            )
        else:
            choose = " ".join(f"WHEN {n} THEN '{w}'" for n, w in enumerate(names))
            cursor.execute(
                f"""WITH RECURSIVE seq(g) AS (
                    SELECT %s UNION ALL SELECT g + 1 FROM seq WHERE g < %s)
                INSERT INTO {table}
                    (id, session_id, "index", window_id, role, kind, content, created_at)
                SELECT lower(hex(randomblob(16))), %s, g,
                    CASE (g - %s) %% {len(names)} {choose} END,
                    'assistant', 'text', json_quote('note ' || g), %s
                FROM seq""",
                [start, last, session.pk.hex, start, now],
            )
    Session.objects.filter(pk=session.pk).update(next_message_index=last + 1)
    session.refresh_from_db()
