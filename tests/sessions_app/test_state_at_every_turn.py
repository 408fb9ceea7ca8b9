"""The state at a turn's revision is the state the turn was built from, for every turn of
the demo story (contract §10): windows, folds, a resumed window and worker checkpoints.

The story (labs.scenario.STORY, unified@2, scripted model) runs as `manage.py demo`
runs it, the maintenance worker played one turn late. Each snapshot froze revision R; the
KV the engine read for that view (active window, task memory, window record, checkpoint,
coverage, window entry, the folds shown) must be `kv_at(R)`, and the KV a turn left behind
(read when it reported) must be the state at the revision then.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from contextproto.protocol.state import (
    FOLD_PREFIX,
    KEY_ACTIVE_WINDOW,
    KEY_CURRENT_WINDOW_ENTRY,
    KEY_TASK_MEMORY,
    checkpoint_key,
    covered_key,
    window_key,
)
from labs import scenario
from labs.demo.worker import Worker, worker_queue
from labs.management.commands.demo import Command
from sessions_app.models import KVEntry, MaintenanceJob, ProjectionSnapshot, Session
from sessions_app.reads.history import kv_at
from sessions_app.services.runs import runs_driven_here
from sessions_app.services.runtime import TurnReport
from sessions_app.services.sessions import session_create

pytestmark = [pytest.mark.slow]


def body_of(message: dict[str, Any]) -> dict[str, Any]:
    """The JSON under the lead line of a header or state message."""
    _lead, _, text = message["content"].partition("\n")
    return json.loads(text)


def the_one(messages: list[dict], kind: str) -> dict[str, Any]:
    [found] = [m for m in messages if m["kind"] == kind]
    return body_of(found)


@pytest.fixture
def story(transactional_db):
    """The demo's unified@2 session after the whole story, and the KV seen after each turn."""
    command = Command(stdout=io.StringIO())
    application = command._application()
    version = dict(command._agents(application))["unified@2"]
    session, _key = session_create(agent_version=version, inputs={"customer": "ACME"})
    worker = Worker(write=lambda line: None)
    seen: dict[int, dict[str, Any]] = {}
    turns = [0]

    def after_turn(_report: TurnReport) -> None:
        turns[0] += 1
        revision = Session.objects.get(pk=session.pk).state_revision
        seen[revision] = dict(KVEntry.objects.filter(session=session).values_list("key", "value"))
        worker.tick(session.pk, turns[0])

    with runs_driven_here(), worker_queue():
        for content in scenario.story_inputs():
            assert scenario.drive_run(session.pk, content, on_turn=after_turn) == "completed"
        worker.drain(session.pk, turns[0])
    return session, seen, worker


def test_the_state_at_each_turns_revision_is_what_its_view_was_built_from(story):
    session, seen, worker = story
    snapshots = list(ProjectionSnapshot.objects.filter(session=session).order_by("created_at"))
    # The story exercised what the state holds: windows resumed, folds, checkpoints.
    assert len(snapshots) > 90
    assert worker.committed, "no checkpoint was committed during the story"
    assert MaintenanceJob.objects.filter(session=session, status="committed").count() >= 2
    windows_seen = {s.window_id for s in snapshots}
    assert {"main", "quote-acme", "delivery-acme"} <= windows_seen
    checked = {"checkpoint": 0, "entry": 0, "folds": 0}

    for snapshot in snapshots:
        state = kv_at(session.pk, snapshot.revision)
        w = snapshot.window_id
        assert state[KEY_ACTIVE_WINDOW] == w
        header = the_one(snapshot.messages, "context_header")
        view_state = the_one(snapshot.messages, "context_state")
        where = f"turn at revision {snapshot.revision}, window {w}"
        assert header["task_memory"] == state.get(KEY_TASK_MEMORY), where
        record = state[window_key(w)]
        assert header["current_window"] == {"id": w, **record}, where
        assert header["current_window_checkpoint"] == state.get(checkpoint_key(w)), where
        covered = int(state.get(covered_key(w), 0))
        assert view_state["checkpointPosition"] == covered, where
        assert view_state["revision"] == snapshot.revision
        assert view_state["windowId"] == w and view_state["status"] == record["status"]
        entry = state.get(KEY_CURRENT_WINDOW_ENTRY) or {}
        if entry.get("windowId") == w:
            assert view_state["enteredFrom"] == entry["fromWindowId"], where
            assert view_state["upperBoundBeforeEntry"] == entry["upperBoundBeforeEntry"], where
            checked["entry"] += 1
        # The folds shown: W's folds at R that lie above the checkpoint.
        shown = {s["foldId"] for s in snapshot.sources if s["derivedType"] == "context_fold"}
        expected = {
            key.removeprefix(FOLD_PREFIX)
            for key, fold in state.items()
            if key.startswith(FOLD_PREFIX)
            and fold["windowId"] == w
            and fold["firstIndex"] > covered
        }
        assert shown == expected, where
        checked["checkpoint"] += covered > 0
        checked["folds"] += bool(shown)
    assert all(checked.values()), checked

    # After each turn: the KV then is the state at the revision then.
    assert len(seen) > 20  # distinct revisions: host lookups change no state
    for revision, state in seen.items():
        assert kv_at(session.pk, revision) == state, revision
