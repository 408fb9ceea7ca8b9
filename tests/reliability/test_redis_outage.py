"""Redis stopped under a running server and worker (issue 15).

The test starts its own redis-server on a free port (never the shared one), a production
server and a Celery worker (with beat) pointed at it, then stops Redis. Reads and
projections keep working or answer 503 `dependency_unavailable`, never a 500. A maintenance
request made meanwhile is recorded as a queued job even though its task cannot be published
(the on-commit enqueue is robust); once Redis is back, the sweeper re-enqueues it and the
worker, still running, commits it once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import hostloops
from sessions_app.models import KVEntry, MaintenanceJob, Session
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.projection import projection_build
from sessions_app.services.runs import run_start
from sessions_app.services.sessions import session_create
from tests.reliability.conftest import call, database_url
from tests.servers import start_celery_worker, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


class OwnRedis:
    """A throwaway redis-server on its own port: stopping it harms nobody else."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = hostloops.free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = tmp_path
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
            ],
            stdout=(self.dir / "redis.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        wait_for(self.ping, 10, "redis-server to answer")

    def ping(self) -> bool:
        done = subprocess.run(
            ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True
        )
        return done.stdout.strip() == "PONG"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def start_worker(env: dict[str, str], tmp_path: Path) -> subprocess.Popen:
    return start_celery_worker(
        tmp_path / "worker.log",
        env={**env, "NODE_ROLE": "worker"},
        extra=("-B", "-s", str(tmp_path / "beat-schedule")),
    )


@pytest.fixture
def own_redis(tmp_path):
    redis = OwnRedis(tmp_path)
    redis.start()
    yield redis
    redis.stop()


def dependency_failure_or_success(status: int, answer: dict) -> bool:
    """The contract while Redis is down: a success, or 503 `dependency_unavailable`."""
    if status == 503:
        return answer.get("error", {}).get("code") == "dependency_unavailable"
    return 200 <= status < 300


def long_session(application, make_version) -> tuple[str, str]:
    """A unified@2 session with a scripted maintainer bound and enough history to compress."""
    maintainer = make_version(
        application,
        name="context-maintainer",
        provider="scripted",
        model_config={"steps": [{"text": "Checkpoint: lookups 0-13 done, budget 5000."}]},
        protocol="prefix",
    )
    version = make_version(
        application,
        options={"pageSize": 10},
        max_input_tokens=8000,
        maintainer_agent=maintainer.agent,
    )
    session, key = session_create(agent_version=version)
    run_start(session_id=session.id, content="prepare the quote; budget 5000")
    for n in range(20):
        snapshot = projection_build(session_id=session.id)
        message_write(
            session_id=session.id,
            message=NewMessage(
                role="assistant",
                kind="tool_call",
                content="",
                tool_call_id=f"lookup-{n}",
                tool_name="lookup",
                arguments={"q": n},
                snapshot_id=str(snapshot.id),
            ),
            host=True,
        )
        message_write(
            session_id=session.id,
            message=NewMessage(
                role="tool",
                kind="tool_result",
                content=f"figures {n}: " + "x" * 1600,
                tool_call_id=f"lookup-{n}",
            ),
            host=True,
        )
    return str(session.id), key


@pytest.mark.django_db(transaction=True)
def test_redis_down_reads_keep_working_and_queued_maintenance_runs_once_it_is_back(
    own_redis, tmp_path, application, make_version
):
    session_id, key = long_session(application, make_version)
    revision = Session.objects.get(pk=session_id).state_revision
    env = hostloops.server_env(
        database_url=database_url(),
        redis_url=own_redis.url,
        var_dir=tmp_path,
        MAINTENANCE_SWEEP_SECONDS="1",
        MAINTENANCE_RETRY_BASE_SECONDS="1",
    )
    server = hostloops.Server(env=env, log_path=tmp_path / "server.log", workers=1).start()
    worker = start_worker(env, tmp_path)
    base = f"sessions/{session_id}/"
    try:
        assert call(server.base_url, key, "GET", base)[0] == 200
        own_redis.stop()

        answers = {}
        for method, path, body in [
            ("GET", base, None),
            ("GET", base + "messages/?limit=5", None),
            ("GET", base + "kv/", None),
            ("GET", base + "windows/", None),
            ("GET", base + "folds/", None),
            ("GET", base + "snapshots/?limit=1", None),
            ("GET", base + "tools/", None),
            ("POST", base + "projection/", {"provider": "openai-chat"}),
            ("POST", base + "projection/", {"provider": "anthropic-messages"}),
            ("POST", base + "windows/main/maintenance/", None),
            ("GET", base + "maintenance/", None),
        ]:
            answers[(method, path)] = call(server.base_url, key, method, path, body)
        failures = {
            where: answer
            for where, answer in answers.items()
            if not dependency_failure_or_success(*answer)
        }
        assert not failures, failures
        # The maintenance request is recorded although its task could not be published.
        status, queued = answers[("POST", base + "windows/main/maintenance/")]
        assert status == 202 and queued["status"] == "queued", queued
        job = MaintenanceJob.objects.get(pk=queued["jobId"])
        assert job.status == "queued" and job.attempts == 0

        # Redis comes back (empty: the lost publish is not in it); the sweeper re-enqueues.
        own_redis.start()
        state = wait_for(
            lambda: (
                (j := MaintenanceJob.objects.get(pk=job.pk)).status in ("committed", "failed") and j
            ),
            90,
            "the queued job to run once Redis is back",
            every=0.5,
        )
    finally:
        worker.terminate()
        worker.wait(20)
        server.stop()
    logs = (tmp_path / "worker.log").read_text()[-3000:]
    assert state.status == "committed", (state.reason, logs)
    assert state.attempts == 1
    assert [e["event"] for e in state.history].count("committed") == 1
    kv = dict(KVEntry.objects.filter(session_id=session_id).values_list("key", "value"))
    assert kv["checkpoint/main"].startswith("Checkpoint: lookups")
    assert kv["coveredThrough/main"] == state.through_index
    assert Session.objects.get(pk=session_id).state_revision == revision + 1
