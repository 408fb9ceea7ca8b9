"""A collector that is down or answers slowly never slows a turn (contract §22): the spans
are dropped and counted in /metrics, the turns go on at the speed they have untraced."""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from contextproto import telemetry
from contextproto.telemetry.export import ExportQueue
from contextproto.telemetry.setup import otlp_queue
from tests.api.test_observability import sample, scrape
from tests.api.turn_bodies import MEMORY, openai_completion, turn

TURNS = 6
DROPPED = "contextproto_trace_spans_dropped_total"
FAILED = "contextproto_trace_exports_failed_total"


@pytest.fixture(autouse=True)
def small_queue(monkeypatch, settings):
    """A queue of 8 spans flushed every 50 ms, and an exporter that gives up after 1 s."""
    settings.METRICS_TOKEN = "scrape-secret"
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SlowCollector(BaseHTTPRequestHandler):
    """Reads the export, then sleeps past the exporter's timeout before answering."""

    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(3)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_collector() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowCollector)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    server.shutdown()
    server.server_close()


def timed_turns(s, count: int) -> list[float]:
    """Seconds of each of `count` turns (a protocol call each) through the turns endpoint."""
    took = []
    for _ in range(count):
        s.calls += 1
        view = s.project("openai-chat")
        answer = openai_completion("Noted.", (f"call_{s.calls}", "context_task_memory_set", MEMORY))
        started = time.perf_counter()
        turn(s, {"snapshotId": view["snapshotId"], "answer": answer})
        took.append(time.perf_counter() - started)
    return took


def dropped(reason: str) -> float:
    return sample(scrape(), DROPPED, reason=reason)


def eventually(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.mark.parametrize("collector", ["down", "slow"])
def test_a_down_or_slow_collector_costs_spans_never_a_turns_time(host, traces, collector, request):
    s = host()
    telemetry.configure(None)
    timed_turns(s, 2)  # warm: the first requests of a process pay for imports
    untraced = timed_turns(s, TURNS)
    endpoint = (
        request.getfixturevalue("slow_collector")
        if collector == "slow"
        else f"http://127.0.0.1:{free_port()}/v1/traces"
    )
    queue = otlp_queue(endpoint)
    telemetry.configure(queue)
    before = {reason: dropped(reason) for reason in ("queue_full", "export_failed")}
    failed_before = sample(scrape(), FAILED)

    traced = timed_turns(s, TURNS)

    # Each turn is 5 spans and the queue holds 8: the turns did not wait for room.
    assert dropped("queue_full") > before["queue_full"]
    # The batches sent went nowhere: each is counted once the exporter gave up on it.
    assert eventually(lambda: dropped("export_failed") > before["export_failed"])
    assert sample(scrape(), FAILED) > failed_before
    # Never a turn that waited on the collector (its timeout is 1 s, the slow one takes 3),
    # and the same speed as untraced turns within the noise of a shared machine.
    assert max(traced) < 0.8, traced
    assert statistics.median(traced) < 2 * statistics.median(untraced) + 0.05, (traced, untraced)
    assert isinstance(queue, ExportQueue) and queue.queued <= 8


def test_every_span_is_exported_or_counted_dropped(db, traces):
    class Stuck:
        """An exporter that holds the export thread until released, then refuses."""

        def __init__(self) -> None:
            self.release = threading.Event()

        def export(self, batch):
            self.release.wait(5)
            return SpanExportResult.FAILURE

        def shutdown(self) -> None:
            self.release.set()

    stuck = Stuck()
    queue = ExportQueue(lambda: stuck, max_queue_size=2, max_batch=1, schedule_delay=0.01)
    telemetry.configure(queue)
    reasons = ("queue_full", "export_failed", "shutdown")
    before = {reason: dropped(reason) for reason in reasons}
    for n in range(6):
        with telemetry.job_span(f"job {n}"):
            pass
        time.sleep(0.02)  # the thread takes the first span into its stuck export
    # At most one span in the stuck export and two queued: the others were dropped at once.
    assert dropped("queue_full") - before["queue_full"] >= 3
    assert queue.queued <= 2
    stuck.release.set()
    telemetry.configure(None)  # stops the queue: what it holds is sent (and refused) first
    assert sum(dropped(reason) - before[reason] for reason in reasons) == 6
