"""`manage.py demo`: the story's numbers, the worker's checkpoints, and the admin links.

One test, so the demo runs once. On a transactional database, as `make demo` runs it: the
dispatcher queues maintenance in on-commit callbacks, which a test transaction never fires.
"""

from __future__ import annotations

import io
import re

from django.core.management import call_command

from sessions_app.models import FoldRecord, MaintenanceJob, Session


def figures(output: str, label: str) -> tuple[int, ...]:
    """(unified@2, prefix@2, full history) of the summary row `label` ("total", "/turn")."""
    line = next(line for line in output.splitlines() if line.strip().startswith(label))
    numbers = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", line.split(label, 1)[1])]
    return tuple(numbers[-3:])  # the total row names its turn count first


def test_demo_tells_the_story_in_estimated_tokens_and_links_the_admin(transactional_db, client):
    from django.contrib.auth import get_user_model

    out = io.StringIO()
    call_command("demo", stdout=out)
    output = out.getvalue()

    # unified@2 costs less per turn than prefix@2 and than full history, labelled estimates.
    assert "Input tokens per turn (estimates: characters / 4" in output
    unified, prefix, full = figures(output, "/turn")
    assert unified < prefix < full, (unified, prefix, full)
    totals = figures(output, "total")
    assert totals[0] < totals[1] < totals[2], totals
    assert re.search(r"unified@2 sent \d+% fewer input tokens than prefix@2 and \d+% fewer", output)

    # The story: five tasks, one window resumed, folds, and checkpoints by the worker, one
    # because a view crossed maintenanceTriggerRatio x maxInputTokens, one asked for.
    session = Session.objects.get(agent_version__agent__name="quote-assistant (unified@2)")
    assert len(re.findall(r"window main +tool context_window_open", output)) == 5
    assert FoldRecord.objects.filter(session=session).count() >= 5
    print(
        list(
            MaintenanceJob.objects.filter(session=session).values_list(
                "trigger", "status", "reason", "attempts"
            )
        )
    )
    jobs = MaintenanceJob.objects.filter(session=session, status="committed")
    assert {"input_tokens", "tool"} <= set(jobs.values_list("trigger", flat=True))
    assert all(job.attempts == 1 and job.attempt_log for job in jobs)
    assert "worker: checkpoint of delivery-acme committed" in output

    # The links it prints open, and the login stays the last thing it says.
    for label in (
        "input tokens chart",
        "a turn with a fold and a checkpoint",
        "the turn its fold was made (diff)",
        "the turn after a checkpoint (diff)",
    ):
        assert label in output
    client.force_login(get_user_model().objects.get(username="admin"))
    links = re.findall(r"http://127\.0\.0\.1:8000(/admin/\S+)", output)
    assert len(links) >= 6
    for link in links:
        assert client.get(link.split("#")[0]).status_code == 200, link
    assert output.rstrip().splitlines()[-1] == "Login: admin / contextproto-demo"
