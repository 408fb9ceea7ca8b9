"""The span export queue: bounded, exported by a background thread, every loss counted.

It replaces the SDK's BatchSpanProcessor, which drops silently when its queue is full, and
whose exporter may spend its whole timeout retrying an unreachable collector. Here a
request's thread only appends to a bounded deque (never waits, never does I/O); one daemon
thread takes batches and hands them to the exporter. A full queue drops the new span, a
batch the collector did not accept is dropped after the exporter's own retries, and both
are counted in /metrics (`contextproto_trace_spans_dropped_total{reason}`), so a down or
slow collector costs spans, never a request's time.

After a fork (Celery's prefork pool, a server's workers) the child starts its own thread and
exporter (`os.register_at_fork`): threads do not survive a fork, and a pooled HTTP connection
of the parent's must not be shared.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from contextproto import metrics

logger = logging.getLogger(__name__)

QUEUE_FULL = "queue_full"
EXPORT_FAILED = "export_failed"
SHUTDOWN = "shutdown"


class ExportQueue(SpanProcessor):
    """A bounded queue of ended spans, exported in batches by one background thread.

    `exporter_factory` builds the exporter (again in a forked child). `max_queue_size`,
    `max_batch` and `schedule_delay` are the OTEL_BSP_* settings' meanings.
    """

    def __init__(
        self,
        exporter_factory: Callable[[], SpanExporter],
        *,
        max_queue_size: int = 2048,
        max_batch: int = 512,
        schedule_delay: float = 5.0,
    ) -> None:
        if max_queue_size < 1 or max_batch < 1 or schedule_delay <= 0:
            raise ValueError("queue size, batch size and delay must be positive")
        self._factory = exporter_factory
        self._max_queue_size = max_queue_size
        self._max_batch = min(max_batch, max_queue_size)
        self._delay = schedule_delay
        self._stopped = False
        self._start()
        if hasattr(os, "register_at_fork"):
            # Weak: a processor that was replaced and collected is not revived by a fork.
            ref = weakref.WeakMethod(self._after_fork)
            os.register_at_fork(after_in_child=lambda: (restart := ref()) and restart())

    def _after_fork(self) -> None:
        if not self._stopped:
            self._start()

    def _start(self) -> None:
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._lock = threading.Lock()  # guards the length check and the append together
        self._export_lock = threading.Lock()  # one export at a time (worker or flush)
        self._wake = threading.Event()
        self._exporter = self._factory()
        self._thread = threading.Thread(target=self._work, name="contextproto-otlp", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ a request's thread

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        """Queue an ended span, or count it dropped; never blocks."""
        if not span.context.trace_flags.sampled:
            return
        if self._stopped:
            metrics.TRACE_SPANS_DROPPED.labels(reason=SHUTDOWN).inc()
            return
        with self._lock:
            full = len(self._queue) >= self._max_queue_size
            if not full:
                self._queue.append(span)
            wake = len(self._queue) >= self._max_batch
        if full:
            metrics.TRACE_SPANS_DROPPED.labels(reason=QUEUE_FULL).inc()
        elif wake:
            self._wake.set()

    # ------------------------------------------------------------ the export thread

    def _work(self) -> None:
        while True:
            self._wake.wait(self._delay)
            self._wake.clear()
            self._export_all()
            if self._stopped:
                return

    def _take(self) -> list[ReadableSpan]:
        with self._lock:
            count = min(self._max_batch, len(self._queue))
            return [self._queue.popleft() for _ in range(count)]

    def _export_all(self) -> bool:
        """Export what is queued now, batch by batch; False if a batch was not accepted."""
        accepted = True
        with self._export_lock:
            while batch := self._take():
                accepted = self._export(batch) and accepted
        return accepted

    def _export(self, batch: Sequence[ReadableSpan]) -> bool:
        try:
            result = self._exporter.export(batch)
        except Exception:
            logger.exception("Exporting %d trace spans failed", len(batch))
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            metrics.TRACE_SPANS_EXPORTED.inc(len(batch))
            return True
        metrics.TRACE_EXPORTS_FAILED.inc()
        metrics.TRACE_SPANS_DROPPED.labels(reason=EXPORT_FAILED).inc(len(batch))
        return False

    # ------------------------------------------------------------ flush and stop

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export everything queued, in the caller's thread (tests, a job's end)."""
        if self._stopped:
            return False
        return self._export_all()

    def shutdown(self, timeout: float = 2.0) -> None:
        """Send what is queued for at most `timeout` seconds, then stop.

        A process that exits waits that long at most, whatever the collector does: the
        exporter's shutdown aborts its retries, the thread is a daemon, and spans still
        queued are counted dropped.
        """
        if self._stopped:
            return
        self._stopped = True
        self._wake.set()
        self._thread.join(timeout)
        with self._lock:
            left = len(self._queue)
            self._queue.clear()
        if left:
            metrics.TRACE_SPANS_DROPPED.labels(reason=SHUTDOWN).inc(left)
        self._exporter.shutdown()

    @property
    def queued(self) -> int:
        return len(self._queue)
