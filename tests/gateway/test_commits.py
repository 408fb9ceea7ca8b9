"""What a gateway turn costs the database (issue 38 item 4): at most two commits that write, and
the session row read once.

A request that writes commits twice: before its model call (its input, the frozen frame, its
run, its record and its view's snapshot row) and after it (the answer, its usage, the run's
status, the reply in its record, the snapshot's body). Every commit of every connection is
counted, so work handed to another thread would show. The session row is read whole (with its
version) once, when the request opens; the answer's commit locks it again to read the three
counters a write needs (`session_relock`), and the key lookup reads its id.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

from sessions_app.models import Message, ProjectionSnapshot
from sessions_app.store.snapshot_bodies import TABLE

WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)
SESSION_TABLE = '"sessions_app_session"'


@dataclass
class Ledger:
    commits: int = 0  # explicit commits, and statements that wrote outside a transaction
    statements: list[str] = field(default_factory=list)
    pending_write: dict[int, bool] = field(default_factory=dict)  # connection id → wrote

    @property
    def session_reads(self) -> list[str]:
        """Statements that read the session row whole (with its version)."""
        return [
            s
            for s in self.statements
            if s.lstrip().upper().startswith("SELECT")
            and f"FROM {SESSION_TABLE}" in s
            and '"agents_agentversion"' in s
        ]

    @property
    def session_selects(self) -> list[str]:
        """Every statement that reads the session row, whole or in part."""
        return [
            s
            for s in self.statements
            if s.lstrip().upper().startswith("SELECT") and f"FROM {SESSION_TABLE}" in s
        ]


@contextmanager
def ledger(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    """Count, on every connection of the process, the commits that write."""
    found = Ledger()
    execute, commit = CursorWrapper._execute, BaseDatabaseWrapper.commit

    def counted_execute(self, sql, params, *ignored):
        found.statements.append(sql)
        if WRITE.match(sql):
            if self.db.in_atomic_block or not self.db.get_autocommit():
                found.pending_write[id(self.db)] = True
            else:
                found.commits += 1  # autocommit: the statement commits by itself
        return execute(self, sql, params, *ignored)

    def counted_commit(self):
        if found.pending_write.pop(id(self), False):
            found.commits += 1
        return commit(self)

    monkeypatch.setattr(CursorWrapper, "_execute", counted_execute)
    monkeypatch.setattr(BaseDatabaseWrapper, "commit", counted_commit)
    yield found


def _second_turn(gateway, scripted, monkeypatch) -> tuple[Any, Ledger, str]:
    """A conversation's second request, every statement of it counted: its reply, the
    ledger, the session's id."""
    scripted([{"text": "first"}, {"text": "second"}])
    first = gateway.openai({"model": "helper", "messages": [{"role": "user", "content": "hi"}]})
    session, key = first["X-Contextproto-Session"], first["X-Contextproto-Session-Key"]
    body = {
        "model": "helper",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "first"},
            {"role": "user", "content": "and again"},
        ],
    }
    with ledger(monkeypatch) as counted:
        reply = gateway.openai(body, key=key)
    assert reply.status_code == 200, reply.content
    return reply, counted, session


@pytest.mark.django_db(transaction=True)
def test_a_turn_commits_twice_and_reads_the_session_row_once(gateway, scripted, monkeypatch):
    reply, counted, session = _second_turn(gateway, scripted, monkeypatch)
    assert reply.json()["choices"][0]["message"]["content"] == "second"
    assert counted.commits == 2, counted.statements
    assert len(counted.session_reads) == 1, counted.session_reads
    # Besides: the key lookup (the session's id) and the answer's relock (three counters).
    assert len(counted.session_selects) == 3, counted.session_selects
    assert Message.objects.filter(session_id=session).count() == 4
    # The view's body went in with the answer (encoded while the model answered): the row was
    # inserted without it, then given it, and every body is stored.
    body_writes = [s for s in counted.statements if s.lstrip().upper().startswith("UPDATE")]
    assert any(TABLE in s and "body" in s for s in body_writes), counted.statements
    states = ProjectionSnapshot.objects.filter(session_id=session).values_list("body_state")
    assert {state for (state,) in states} == {"stored"}


@pytest.mark.django_db(transaction=True)
def test_a_turn_reads_the_client_state_once_and_takes_no_savepoint(gateway, scripted, monkeypatch):
    """The request's open reads the client's system text and tools once under the session's
    lock (for the side check and for the write), and builds its view without a savepoint: a
    refusal rolls the whole open back."""
    _reply, counted, _session = _second_turn(gateway, scripted, monkeypatch)
    kv_reads = [s for s in counted.statements if "FROM sessions_app_kventry" in s]
    # The client state, then the view's keys (which include it again, with the state).
    assert len(kv_reads) == 2, kv_reads
    assert not [s for s in counted.statements if "SAVEPOINT" in s.upper()]
