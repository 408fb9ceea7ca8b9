"""The built-in runtime with the scripted model (contract §7)."""

from __future__ import annotations

import json

import pytest

from agents.models import Tool
from contextproto.errors import ApplicationError
from sessions_app import providers
from sessions_app.models import MaintenanceJob, Message, ProjectionSnapshot, Run
from sessions_app.providers import ProviderError
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.runs import autostart, run_start, runs_driven_here
from sessions_app.services.runtime import run_advance
from sessions_app.services.sessions import session_create


@pytest.fixture
def scripted(application, make_version):
    def build(steps, *, tools=(), **fields):
        version = make_version(
            application, provider="scripted", model_config={"steps": steps}, **fields
        )
        for name in tools:
            version.tools.add(Tool.objects.create(application=application, name=name))
        session, _ = session_create(agent_version=version)
        return session

    return build


def log(session):
    return list(Message.objects.filter(session=session).order_by("index"))


def test_a_run_executes_protocol_tools_and_ends_with_the_answer(scripted):
    session = scripted(
        [
            {
                "toolCalls": [
                    {
                        "name": "context_window_open",
                        "arguments": {
                            "purpose": "quote task",
                            "windowId": "alpha",
                            "goal": "quote",
                            "input": "prepare a quote",
                            "expectedWindowId": "main",
                        },
                    }
                ]
            },
            {"expect": {"contains": ["context_state", "alpha"]}, "text": "Quote: 5000."},
        ]
    )
    run, _ = run_start(session_id=session.id, content="please quote")
    assert run_advance(run_id=run.id) == "completed"
    run.refresh_from_db()
    assert run.turns == 2
    kinds = [(m.kind, m.window_id) for m in log(session)]
    assert kinds == [
        ("input", "main"),
        ("tool_call", "main"),
        ("tool_result", "main"),
        ("text", "alpha"),
    ]
    snapshots = ProjectionSnapshot.objects.filter(session=session).order_by("created_at")
    assert all(s.usage and s.usage["inputTokens"] > 0 for s in snapshots)
    call = log(session)[1]
    assert str(call.snapshot_id) == str(snapshots[0].id)


def test_a_host_tool_pauses_the_run_until_its_result_arrives(scripted):
    session = scripted(
        [
            {"toolCalls": [{"id": "h1", "name": "lookup", "arguments": {"q": "price"}}]},
            {"expect": {"contains": ["4200"]}, "text": "The price is 4200."},
        ],
        tools=["lookup"],
    )
    run, _ = run_start(session_id=session.id, content="price?")
    assert run_advance(run_id=run.id) == "waiting_for_host_tool"
    with pytest.raises(ApplicationError) as busy:
        run_start(session_id=session.id, content="hurry")
    assert busy.value.code == "session_busy"
    message_write(
        session_id=session.id,
        message=NewMessage(role="tool", kind="tool_result", content="4200", tool_call_id="h1"),
        host=True,
    )
    run.refresh_from_db()
    assert run.status == "queued"
    assert run_advance(run_id=run.id) == "completed"
    assert log(session)[-1].content == "The price is 4200."


def test_several_calls_in_one_answer_execute_only_the_first(scripted):
    session = scripted(
        [
            {
                "toolCalls": [
                    {
                        "id": "a",
                        "name": "context_task_memory_set",
                        "arguments": {"purpose": "p", "memory": "budget 5000"},
                    },
                    {"id": "b", "name": "context_task_memory_get", "arguments": {"purpose": "p"}},
                    {"id": "c", "name": "lookup", "arguments": {}},
                ]
            },
            {"text": "done"},
        ],
        tools=["lookup"],
        version=1,
    )
    run, _ = run_start(session_id=session.id, content="go")
    assert run_advance(run_id=run.id) == "completed"
    results = {
        m.tool_call_id: json.loads(m.content) for m in log(session) if m.kind == "tool_result"
    }
    assert results["a"]["success"] is True
    assert results["b"]["error"]["code"] == "single_tool_call_per_turn"
    assert results["c"]["error"]["code"] == "single_tool_call_per_turn"


def test_an_exhausted_script_fails_the_run_loudly(scripted):
    session = scripted(
        [{"toolCalls": [{"name": "context_task_memory_get", "arguments": {"purpose": "p"}}]}]
    )
    run, _ = run_start(session_id=session.id, content="go")
    assert run_advance(run_id=run.id) == "failed"
    run.refresh_from_db()
    assert run.error["code"] == "script_exhausted"


def test_max_turns_stops_the_run(scripted):
    step = {"toolCalls": [{"name": "context_task_memory_get", "arguments": {"purpose": "p"}}]}
    session = scripted([step] * 5, max_turns_per_run=3)
    run, _ = run_start(session_id=session.id, content="go")
    assert run_advance(run_id=run.id) == "max_turns_reached"
    run.refresh_from_db()
    assert run.turns == 3


def test_a_duplicate_delivery_of_a_finished_run_does_nothing(scripted):
    session = scripted([{"text": "hi"}])
    run, _ = run_start(session_id=session.id, content="go")
    run_advance(run_id=run.id)
    count = Message.objects.filter(session=session).count()
    assert run_advance(run_id=run.id) == "skipped"
    assert Message.objects.filter(session=session).count() == count


def test_a_turn_over_the_token_threshold_queues_exactly_one_maintenance_job(
    application, make_version
):
    maintainer = make_version(
        application,
        name="maintainer",
        provider="scripted",
        model_config={"steps": [{"text": "x"}]},
        protocol="prefix",
    )
    version = make_version(
        application,
        provider="scripted",
        # Above unified@2's protected part (~3400 estimated tokens); threshold 3000.
        max_input_tokens=4000,
        maintainer_agent=maintainer.agent,
        model_config={
            "steps": [
                {
                    "toolCalls": [
                        {"name": "context_task_memory_get", "arguments": {"purpose": "p"}}
                    ],
                    "usage": {"inputTokens": 3200, "outputTokens": 5},
                },
                {"text": "done", "usage": {"inputTokens": 3600, "outputTokens": 5}},
            ]
        },
    )
    session, _ = session_create(agent_version=version)
    run, _ = run_start(session_id=session.id, content="go")
    assert run_advance(run_id=run.id) == "completed"
    jobs = MaintenanceJob.objects.filter(session=session)
    assert jobs.count() == 1
    assert jobs.get().trigger == "input_tokens" and jobs.get().window_id == "main"
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_a_transient_provider_error_requeues_the_run_then_it_fails_after_the_retries(
    scripted, monkeypatch, settings
):
    settings.RUN_PROVIDER_RETRIES = 2
    settings.RUNTIME_AUTOSTART = False  # advance by hand; eager Celery ignores countdowns
    session = scripted([{"text": "hello"}])
    real = providers.provider_for
    failures = {"left": 2}

    def flaky(name, config):
        provider = real(name, config)
        original = provider.complete

        def complete(request, **kwargs):
            if failures["left"]:
                failures["left"] -= 1
                raise ProviderError("provider_unavailable", "503 from upstream", retryable=True)
            return original(request, **kwargs)

        provider.complete = complete
        return provider

    monkeypatch.setattr(providers, "provider_for", flaky)
    run, _ = run_start(session_id=session.id, content="go")
    assert run_advance(run_id=run.id) == "queued"
    run.refresh_from_db()
    assert run.error["retries"] == 1 and run.error["code"] == "provider_unavailable"
    assert run_advance(run_id=run.id) == "queued"
    assert run_advance(run_id=run.id) == "completed"
    assert [m.kind for m in log(session)] == ["input", "text"]

    failures["left"] = 5
    session2 = scripted([{"text": "x"}], name="other")
    run2, _ = run_start(session_id=session2.id, content="go")
    for _ in range(2):
        assert run_advance(run_id=run2.id) == "queued"
    assert run_advance(run_id=run2.id) == "failed"
    run2.refresh_from_db()
    assert run2.error["code"] == "provider_unavailable"


def test_a_caller_driving_its_runs_keeps_them_from_the_worker_without_touching_settings(
    scripted, settings, django_capture_on_commit_callbacks
):
    """The demo and the experiment harness advance runs in their own process
    (runs_driven_here); elsewhere a new run still goes to a worker after commit."""
    settings.RUNTIME_AUTOSTART = True
    driven, served = scripted([{"text": "hello"}]), scripted([{"text": "hello"}])
    with django_capture_on_commit_callbacks() as queued_inside, runs_driven_here():
        assert not autostart()
        run, _ = run_start(session_id=driven.id, content="go")
    assert queued_inside == [] and settings.RUNTIME_AUTOSTART is True and autostart()
    assert run_advance(run_id=run.id) == "completed"
    with django_capture_on_commit_callbacks() as queued_outside:
        run_start(session_id=served.id, content="go")
    assert len(queued_outside) == 1
