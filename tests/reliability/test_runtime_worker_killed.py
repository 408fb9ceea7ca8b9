"""A runtime worker SIGKILLed while the model is answering (issue 15).

The built-in runtime advances a scripted run in a real Celery worker process; the second
model call is slow, and the worker is killed during it. The turn wrote nothing yet (the
answer, the turn count and the usage are written after the model call), so a new worker
replays that turn: the run completes, each model answer is written once, and the turn
count is the number of answers, not of attempts.

Recovery rests on what docs/decisions.md asks of Celery: late acks (the broker redelivers the
killed worker's task once its visibility timeout has passed) and the run's lease (a
delivery finds a live worker's run leased and does nothing). The test shortens both
(CELERY_VISIBILITY_TIMEOUT, RUN_LEASE_SECONDS); with the defaults, 3600 s and 300 s,
a killed worker's run resumes after about an hour (docs/decisions.md).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from django.utils import timezone

from agents.models import AgentVersion
from sessions_app.models import KVEntry, Message, ProjectionSnapshot, Run, ToolReceipt
from sessions_app.services.runs import run_start
from sessions_app.services.sessions import session_create
from tests.servers import purged_celery_queue, start_celery_worker, wait_for, worker_env

VISIBILITY_TIMEOUT = 4
LEASE_SECONDS = 3

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def start_worker(log: Path) -> subprocess.Popen:
    return start_celery_worker(
        log,
        env=worker_env(
            CELERY_VISIBILITY_TIMEOUT=str(VISIBILITY_TIMEOUT), RUN_LEASE_SECONDS=str(LEASE_SECONDS)
        ),
    )


@pytest.fixture
def purged_queue():
    with purged_celery_queue():
        yield


@pytest.mark.django_db(transaction=True)
def test_worker_killed_during_a_model_call_the_run_resumes_and_counts_each_turn_once(
    application, make_version, purged_queue, tmp_path
):
    memory_call = {
        "id": "call-memory",
        "name": "context_task_memory_set",
        "arguments": {"purpose": "remember", "memory": "quote first, budget 9000"},
    }
    version = make_version(
        application,
        provider="scripted",
        model_config={
            "steps": [
                {"toolCalls": [memory_call]},
                {"delaySeconds": 60, "text": "too slow: the worker dies before this"},
            ]
        },
    )
    session, _key = session_create(agent_version=version)
    log = tmp_path / "worker.log"
    first = start_worker(log)
    try:
        run, _input = run_start(session_id=session.id, content="please quote")  # enqueued
        # Turn 1 is done and turn 2 has frozen its view: the worker waits for the model.
        wait_for(
            lambda: (
                Run.objects.get(pk=run.pk).turns == 1
                and ProjectionSnapshot.objects.filter(session=session).count() == 2
            ),
            60,
            "the worker to be inside the second model call",
        )
        delivered_at = time.monotonic()
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    killed = Run.objects.get(pk=run.pk)
    assert (killed.status, killed.turns) == ("running", 1)
    assert Message.objects.filter(session=session).count() == 3  # input, call, result

    # The replayed turn answers at once (the same step: no answer was recorded for it).
    AgentVersion.objects.filter(pk=version.pk).update(
        model_config={
            "steps": [{"toolCalls": [memory_call]}, {"text": "Quote ready: 8800 within 9000."}]
        }
    )
    # A new worker restores the unacked task once the visibility timeout has passed and
    # claims the run once the dead worker's lease has expired.
    lease_left = (killed.lease_until - timezone.now()).total_seconds()
    time.sleep(max(VISIBILITY_TIMEOUT - (time.monotonic() - delivered_at), lease_left, 0) + 1)
    second = start_worker(log)
    try:
        done = wait_for(
            lambda: (r := Run.objects.get(pk=run.pk)).status not in ("running", "queued") and r,
            90,
            "the new worker to finish the run",
            every=0.3,
        )
    finally:
        second.terminate()
        second.wait(20)
    assert done.status == "completed", (done.error, log.read_text()[-3000:])
    assert done.turns == 2  # two model answers, not three attempts
    messages = list(
        Message.objects.filter(session=session)
        .order_by("index")
        .values_list("index", "kind", "tool_call_id")
    )
    assert messages == [
        (1, "input", None),
        (2, "tool_call", "call-memory"),
        (3, "tool_result", "call-memory"),
        (4, "text", None),
    ]
    assert ToolReceipt.objects.filter(session=session).count() == 1
    memory = KVEntry.objects.get(session=session, key="taskMemory").value
    assert memory == "quote first, budget 9000"
    # The killed attempt froze a view but recorded no model answer or usage for it.
    snapshots = list(ProjectionSnapshot.objects.filter(session=session).order_by("created_at"))
    assert len(snapshots) == 3
    assert [s.usage is not None for s in snapshots] == [True, False, True]
