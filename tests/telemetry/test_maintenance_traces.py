"""A built-in maintenance job as a trace of its own (contract §22): the job's root span with
its range and tokens, the maintainer's `invoke_agent` and one `chat` per model call."""

from __future__ import annotations

import pytest
from opentelemetry.trace import StatusCode

from sessions_app import maintenance
from sessions_app.models import MaintenanceJob
from tests.maintenance.conftest import _small_tail, with_maintainer  # noqa: F401 (fixtures)
from tests.maintenance.test_builtin_jobs import queue

pytestmark = pytest.mark.django_db


def test_a_job_is_one_trace_with_the_maintainers_model_calls(with_maintainer, traces):  # noqa: F811
    s = with_maintainer([{"text": "x" * 3500}, {"text": "Quote under way; budget 5000."}])
    job = queue(s)
    traces.clear()

    assert maintenance.maintenance_execute(job_id=job.id).status == "committed"

    job.refresh_from_db()
    root = traces.one("maintenance main")
    assert root.parent is None
    assert root.attributes["gen_ai.conversation.id"] == s.id
    assert root.attributes["contextproto.maintenance.job.id"] == str(job.id)
    assert root.attributes["contextproto.maintenance.outcome"] == "committed"
    assert root.attributes["contextproto.maintenance.through_index"] == job.through_index
    assert root.attributes["contextproto.maintenance.tokens_before"] == job.tokens_before
    assert root.attributes["contextproto.maintenance.tokens_after"] == job.tokens_after
    agent = traces.one("invoke_agent ")
    assert agent.name == "invoke_agent context-maintainer"
    assert traces.children(root) == [agent.name]
    # The overlong first answer and its shorter retry: two model calls, their usage summed
    # on the job as on the spans.
    chats = traces.named("chat ")
    assert traces.children(agent) == ["chat test-model", "chat test-model"]
    assert (
        sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats)
        == (job.summarizer_usage["inputTokens"])
    )
    assert (
        sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats)
        == (job.summarizer_usage["outputTokens"])
    )
    for span in traces.spans():
        assert span.attributes["gen_ai.conversation.id"] == s.id
        assert span.attributes["contextproto.window.id"] == "main"
    assert "gen_ai.input.messages" not in chats[0].attributes


def test_a_failed_job_is_a_failed_trace(with_maintainer, traces):  # noqa: F811
    s = with_maintainer([{"text": "x" * 3500}, {"text": "y" * 3500}])
    job = queue(s)
    traces.clear()

    assert maintenance.maintenance_execute(job_id=job.id).status == "failed"

    root = traces.one("maintenance main")
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["contextproto.maintenance.outcome"] == MaintenanceJob.Status.FAILED
