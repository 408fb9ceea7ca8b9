"""A web process SIGKILLed under load, then the whole server, then a restart (issue 15).

Host loops keep running against uvicorn with two workers. One worker is SIGKILLed (the
supervisor starts another), later the supervisor and every worker at once, and a new
server takes the port. Requests in flight die with their process; the loops send them
again unchanged (clientMessageId on writes, the same toolCallId on dispatch). Afterwards
nothing is lost, nothing is written twice, and every retry got the original outcome.
"""

from __future__ import annotations

import threading

import pytest
from django.conf import settings

from agents.services import application_create
from bench import hostloops
from tests.reliability.conftest import database_url
from tests.servers import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

LOOPS = 4
MAX_TURNS = 200  # the loops run until the test stops them; this only bounds a runaway


def turns_done(runs: list[hostloops.SessionRun]) -> int:
    return sum(run.turns_done for run in runs)


@pytest.mark.django_db(transaction=True)
def test_web_processes_killed_mid_load_lose_nothing_and_duplicate_nothing(tmp_path):
    server = hostloops.Server(
        env=hostloops.server_env(
            database_url=database_url(), redis_url=settings.REDIS_URL, var_dir=tmp_path
        ),
        log_path=tmp_path / "server.log",
        workers=2,
    ).start()
    stats = hostloops.Stats()
    stop = threading.Event()
    try:
        _app, key = application_create(name="web-kill")
        setup = hostloops.HttpClient(server.base_url, key, hostloops.Stats())
        version_id = hostloops.setup_agent_version(setup)
        runs = [hostloops.create_session(setup, version_id) for _ in range(LOOPS)]
        setup.close()
        loops = threading.Thread(
            target=hostloops.run_loops,
            args=(server.base_url, runs, stats),
            kwargs={"turns": MAX_TURNS, "seconds": 120, "stop": stop},
        )
        loops.start()

        # One worker dies mid-request; the supervisor replaces it.
        wait_for(lambda: turns_done(runs) >= LOOPS, 60, "the first turns")
        before = server.worker_pids()
        killed = server.kill_worker()
        wait_for(
            lambda: len(pids := server.worker_pids()) == 2 and killed not in pids,
            30,
            "the supervisor to replace the killed worker",
        )
        assert set(server.worker_pids()) != set(before)

        # Then the whole server at once; a new one takes the port while the loops retry.
        mark = turns_done(runs)
        wait_for(lambda: turns_done(runs) >= mark + LOOPS, 60, "more turns")
        server.kill()
        server.start()
        mark = turns_done(runs)
        wait_for(lambda: turns_done(runs) >= mark + LOOPS, 60, "turns after the restart")
        stop.set()
        loops.join(60)
        assert not loops.is_alive(), "the host loops did not stop"

        problems = [f"{run.session_id}: {run.error}" for run in runs if run.error]
        assert not problems, (problems, (tmp_path / "server.log").read_text()[-3000:])
        # The kills reached the clients (requests without an answer, then retried) ...
        assert stats.statuses()["no answer"] > 0, stats.statuses()
        assert len(stats.attempts) > stats.requests
        # ... and never turned into a server error.
        assert stats.server_errors() == 0, stats.statuses()

        audit = hostloops.audit_sessions(runs)
        hostloops.verify_replays(server.base_url, runs, hostloops.Stats(), audit)
        assert audit.clean, audit.problems
        assert audit.replays_checked == turns_done(runs)

        # Every input sent again with its clientMessageId is a replay of the first write.
        for run in runs:
            client = hostloops.HttpClient(server.base_url, run.key, hostloops.Stats())
            for turn in range(run.turns_done):
                status, body, headers = client.request(
                    "POST",
                    f"sessions/{run.session_id}/inputs/",
                    {
                        "content": f"turn {turn}: next step please",
                        "clientMessageId": f"input-{turn}",
                    },
                    endpoint="inputs (replay)",
                )
                assert status == 200 and headers.get("Idempotent-Replayed") == "true", body
                assert run.acknowledged[body["index"]] == body["message"]["id"]
            client.close()
        assert hostloops.audit_sessions(runs).clean
    finally:
        stop.set()  # a failed assertion must not leave the loops retrying
        server.stop()
