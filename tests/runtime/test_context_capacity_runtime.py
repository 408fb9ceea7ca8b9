"""The built-in runtime fails a run whose protected view is above maxInputTokens (contract §6)."""

from __future__ import annotations

from sessions_app.models import Message, ProjectionSnapshot, Run
from sessions_app.services.runs import run_start
from sessions_app.services.runtime import run_advance
from sessions_app.services.sessions import session_create


def test_a_huge_input_fails_the_run_with_the_capacity_error_and_the_next_run_works(
    application, make_version
):
    version = make_version(
        application,
        provider="scripted",
        max_input_tokens=8000,
        model_config={"steps": [{"text": "Answer to the short question."}]},
    )
    session, _ = session_create(agent_version=version)
    run, _ = run_start(session_id=session.id, content="y" * 40_000)

    assert run_advance(run_id=run.id) == "failed"
    run.refresh_from_db()
    assert run.error["code"] == "context_capacity_exceeded"
    assert run.error["limit"] == 8000 and run.error["total"] > 8000
    assert run.error["runInputs"] >= 10_000
    assert run.turns == 0
    # Nothing was written for the refused turn: no snapshot, no answer; the model was not
    # called (its only step is still there for the next run).
    assert not ProjectionSnapshot.objects.filter(session=session).exists()
    assert list(Message.objects.filter(session=session).values_list("kind", flat=True)) == ["input"]

    second, _ = run_start(session_id=session.id, content="a short question")
    assert run_advance(run_id=second.id) == "completed"
    assert Run.objects.get(pk=second.pk).error is None
    assert Message.objects.filter(session=session).order_by("index").last().content == (
        "Answer to the short question."
    )
