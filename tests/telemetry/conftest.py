"""Fixtures of the trace tests: spans captured in memory, read as a tree."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agents.models import Tool
from contextproto import telemetry
from tests.api.turn_bodies import LOOKUP_SCHEMA
from tests.telemetry.gateway_conversation import gateway_on_helper


class Traces:
    """The spans this process finished since the fixture started (in memory, synchronous)."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()

    def capture(self, *, content: bool = False) -> None:
        """Record spans here from now on (a fresh exporter: the one replaced is shut down);
        with `content`, message contents too (the opt-in)."""
        self.exporter = InMemorySpanExporter()
        telemetry.configure(SimpleSpanProcessor(self.exporter), capture_content=content)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def one(self, prefix: str) -> ReadableSpan:
        found = self.named(prefix)
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def children(self, parent: ReadableSpan) -> list[str]:
        """Names of `parent`'s children, in start order."""
        return [
            s.name
            for s in sorted(self.spans(), key=lambda s: s.start_time or 0)
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]

    def clear(self) -> None:
        self.exporter.clear()


@pytest.fixture
def traces() -> Iterator[Traces]:
    """Tracing on, into memory, contents off; off again afterwards."""
    found = Traces()
    found.capture()
    yield found
    telemetry.configure(None)


@pytest.fixture
def host(api_session):
    """An external unified@2 session with the host tool `lookup`, and its first input."""

    def build(version: int = 2, **fields):
        s = api_session(version=version, **fields)
        tool = Tool.objects.create(application=s.app, name="lookup", input_schema=LOOKUP_SCHEMA)
        s.agent_version.tools.add(tool)
        s.input("What do 5000 units of A-100 cost?")
        return s

    return build


@pytest.fixture
def gateway(db, make_version):
    """The gateway conversation of the trace tests (gateway_conversation.py): (client, key)."""
    return gateway_on_helper(make_version)
