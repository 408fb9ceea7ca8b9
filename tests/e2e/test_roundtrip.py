"""End to end on PostgreSQL + Redis with a real Celery worker (docs/architecture.md: Labs, §14).

One unified@2 session with a scripted model and a bound maintainer runs three runs:
(1) a quote in window alpha, (2) scheduling in beta, (3) "the budget is now 9000" and back
to alpha — with a refused wrong-window write and its correction, a fold and its read-back,
a maintenance commit by the worker, and archive + restore around a host call whose result
arrives after the call was archived.
"""

from __future__ import annotations

import json
import time

import pytest

from agents.models import Tool
from agents.services import (
    agent_create,
    agent_version_create,
    agent_version_publish,
    application_create,
)
from contextproto.celery import app
from labs import scenario
from sessions_app.models import (
    ArchiveChunk,
    KVEntry,
    MaintenanceJob,
    Message,
    ProjectionSnapshot,
    Run,
    ToolReceipt,
)
from sessions_app.reads.raw_log import log_page
from sessions_app.services.archive import archive_session, restore_session
from sessions_app.store.codec import raw_from_row
from tests.conftest import KeyClient
from tests.maintenance.test_worker_process import start_worker
from tests.servers import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def publish(application, name, fields, **binding):
    agent = agent_create(application=application, name=name)
    return agent_version_publish(
        version=agent_version_create(agent=agent, fields=fields, **binding)
    )


@pytest.fixture
def unified_session(db):
    application, app_key = application_create(name="e2e")
    tools = [
        Tool.objects.create(application=application, name=n, input_schema={"type": "object"})
        for n in scenario.HOST_TOOLS
    ]
    maintainer = publish(
        application,
        "context-maintainer",
        {
            "system_prompt": "Write checkpoints.",
            "context_protocol_id": "prefix",
            "context_protocol_version": 2,
            "model_provider": "scripted",
            "model_name": "m",
            "max_input_tokens": 8000,
            "model_config": scenario.maintainer_script(),
        },
    )
    version = publish(
        application,
        "quote-assistant",
        {
            "system_prompt": "You are ACME's assistant.\n{{context_protocol}}",
            "context_protocol_id": "unified",
            "context_protocol_version": 2,
            "model_provider": "scripted",
            "model_name": "scripted",
            "max_input_tokens": 8000,
            "maintenance_trigger_ratio": 0.99,
            "model_config": scenario.unified_script(),
        },
        tool_ids=[t.id for t in tools],
        maintainer_agent_id=maintainer.agent_id,
    )
    client = KeyClient(app_key)
    created = client.post("sessions/", {"agentVersionId": str(version.id)}).json()
    return created["id"], KeyClient(created["sessionKey"])


def wait_run(session_id, run_id, *, on_wait=None, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run_id)
        if run.status in ("completed", "failed", "max_turns_reached"):
            return run
        if run.status == "waiting_for_host_tool":
            (on_wait or scenario.answer_pending_host_calls)(session_id)
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not finish: {Run.objects.get(pk=run_id).status}")


def results(session_id) -> dict[str, dict]:
    return {r.tool_call_id: r.result for r in ToolReceipt.objects.filter(session_id=session_id)}


@pytest.mark.django_db(transaction=True)
def test_three_runs_roundtrip_with_a_real_worker(unified_session, tmp_path):
    app.control.purge()
    session_id, client = unified_session
    worker = start_worker(tmp_path / "worker.log")
    try:
        runs = []
        archived = {}

        def archive_then_answer(sid):
            # The first host call is pending: archive everything, then its result arrives.
            if not archived:
                before = [
                    m.to_wire() for m in log_page(sid, window_id=None, after_index=0, limit=10_000)
                ]
                chunks = archive_session(session_id=sid, keep_last=0, chunk_size=2)
                archived.update(
                    before=before,
                    chunks=len(chunks),
                    hot=Message.objects.filter(session_id=sid).count(),
                )
            scenario.answer_pending_host_calls(sid)

        for number, content in enumerate(scenario.RUN_INPUTS):
            started = client.post(f"sessions/{session_id}/inputs/", {"content": content})
            assert started.status_code == 201, started.content
            run = wait_run(
                session_id,
                started.json()["runId"],
                on_wait=archive_then_answer if number == 0 else None,
            )
            assert run.status == "completed", (
                run.error,
                (tmp_path / "worker.log").read_text()[-4000:],
            )
            runs.append(run)
        job = wait_for(
            lambda: MaintenanceJob.objects.filter(
                session_id=session_id, status__in=["committed", "failed", "rejected"]
            ).first(),
            60,
            "the maintenance job to finish",
        )
    finally:
        worker.terminate()
        worker.wait(30)

    # The pending call went cold; its result, written later, joined the call's window.
    assert archived["chunks"] >= 2 and archived["hot"] == 0
    everything = log_page(session_id, window_id=None, after_index=0, limit=10_000)
    assert [m.to_wire() for m in everything][: len(archived["before"])] == archived["before"]
    first_host_call = next(m for m in everything if m.tool_name in scenario.HOST_TOOLS)
    its_result = next(
        m
        for m in everything
        if m.kind == "tool_result" and m.tool_call_id == first_host_call.tool_call_id
    )
    assert its_result.window_id == first_host_call.window_id == "alpha"
    assert ArchiveChunk.objects.filter(session_id=session_id).exists()
    # Restore: ids, indices, windows and pairing as before.
    restore_session(session_id=session_id)
    assert not ArchiveChunk.objects.filter(session_id=session_id).exists()
    hot = list(Message.objects.filter(session_id=session_id).order_by("index"))
    assert [raw_from_row(m).to_wire() for m in hot] == [m.to_wire() for m in everything]
    assert [m.index for m in hot] == list(range(1, len(hot) + 1))
    calls = {m.tool_call_id for m in hot if m.kind == "tool_call"}
    answered = {m.tool_call_id for m in hot if m.kind == "tool_result"}
    assert calls == answered

    receipts = results(session_id)
    # The wrong-window write was refused with the guard's data, then corrected.
    refused = [
        r
        for r in receipts.values()
        if not r["success"] and r["error"]["code"] == "context_window_mismatch"
    ]
    assert len(refused) == 1
    assert refused[0]["error"]["currentWindowId"] == "beta"
    kv = dict(KVEntry.objects.filter(session_id=session_id).values_list("key", "value"))
    assert kv["window/beta"]["memory"] == "Delivery: Tuesday, 9:00-12:00"
    # The quote memory survived the switch to beta and the "budget 9000" run.
    assert kv["window/alpha"]["memory"] == scenario.QUOTE_MEMORY
    assert kv["activeWindow"] == "alpha"
    # Fold created, then read back in run 3.
    fold_reads = [r for r in receipts.values() if r.get("success") and "totalLength" in r]
    assert fold_reads and '"index":' in fold_reads[0]["text"]
    # The maintainer committed a checkpoint for alpha.
    assert job.status == "committed", job.reason
    assert job.window_id == "alpha"
    assert kv["checkpoint/alpha"].startswith("Checkpoint")
    assert kv["coveredThrough/alpha"] == job.through_index

    snapshots = list(
        ProjectionSnapshot.objects.filter(session_id=session_id).order_by("created_at")
    )
    assert len(snapshots) == sum(r.turns for r in runs)
    for snapshot in snapshots:
        # The state message reached the provider request, as the last message.
        last = snapshot.request["messages"][-1]
        assert last["kind"] == "context_state"
        state = json.loads(last["content"].split("\n", 1)[1])
        assert state["windowId"] == snapshot.window_id
        assert snapshot.usage["inputTokens"] > 0
        assert len(snapshot.sources) == len(snapshot.messages)
    # A fold is one derived message standing for its raw messages.
    with_fold = next(
        s for s in snapshots if any(src["derivedType"] == "context_fold" for src in s.sources)
    )
    fold_source = next(src for src in with_fold.sources if src["derivedType"] == "context_fold")
    folded = Message.objects.filter(id__in=fold_source["messageIds"]).order_by("index")
    assert [m.index for m in folded] == list(
        range(fold_source["firstIndex"], fold_source["lastIndex"] + 1)
    )
    assert all(m.window_id == "alpha" for m in folded)
    # Raw sources point at real messages of the snapshot's window or current-run inputs.
    for snapshot in snapshots:
        for src in snapshot.sources:
            if src["derivedType"] == "raw":
                (message_id,) = src["messageIds"]
                row = Message.objects.get(id=message_id)
                assert row.window_id == snapshot.window_id or row.kind == "input"
