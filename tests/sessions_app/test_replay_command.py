"""`manage.py replay_sessions` on short sessions: per-turn rows, totals, JSON, refusals."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import CommandError, call_command

from sessions_app.models import ProjectionSnapshot
from tests.conftest import KeyClient

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}


def short_session(api_session, **fields):
    """unified@2: an input and two host lookups, one view per turn in each wire format; the
    first turn reports usage."""
    s = api_session(version=2, prices=PRICES, **fields)
    s.input("prepare the quote")
    first = s.project("anthropic-messages")
    s.host_tool_work("lookup", "price 1300 " * 200)
    s.project("openai-chat")
    usage = s.client.post(
        s.path(f"snapshots/{first['snapshotId']}/usage/"),
        {"inputTokens": 1200, "cacheReadInputTokens": 1000, "outputTokens": 40},
    )
    assert usage.status_code in (200, 201), usage.content
    return s


def replay(*args: str) -> str:
    out = io.StringIO()
    call_command("replay_sessions", *args, stdout=out)
    return out.getvalue()


TURN_ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+([\d,]+)\s+([\d,]+)\s+(yes|no)")


def rows(text: str) -> list[tuple[str, ...]]:
    return [m.groups() for line in text.splitlines() if (m := TURN_ROW.match(line))]


def test_the_command_prints_every_turn_and_the_totals_under_another_version(api_session):
    s = short_session(api_session)
    snapshots = list(ProjectionSnapshot.objects.filter(session_id=s.id).order_by("created_at"))

    text = replay("--session", s.id, "--protocol", "unified@4", "--options", '{"maskStep": 2}')

    assert text.startswith("Estimates: tokens counted with cl100k_base")
    assert "No model was called and nothing was written." in text
    assert (
        f"== session {s.id} (unified@2): {len(snapshots)} turn(s) replayed under unified@4 {{"
        in text
    )
    assert '"maskStep":2' in text and '"maskKeepRecent":6' in text  # defaults filled in
    found = rows(text)
    assert [r[0] for r in found] == [str(n) for n in range(1, len(snapshots) + 1)]
    assert [(int(r[1]), int(r[2]), r[3], r[4]) for r in found] == [
        (snap.revision, snap.upper_bound, snap.window_id, snap.provider) for snap in snapshots
    ]
    assert {r[7] for r in found} == {"no"}  # another version sends other requests
    # The first turn shows the usage it reported.
    first = next(line for line in text.splitlines() if TURN_ROW.match(line))
    assert "1,200 (1,000)" in first and first.endswith("[1]")
    assert "[1] 3 turn(s): maintenancePending estimated" in text
    for label in (
        "request tokens, as sent / rebuilt",
        "OpenAI: input tokens",
        "OpenAI: cache hit ratio",
        "OpenAI: effective cost",
        "Anthropic: input tokens",
        "Anthropic: cache hit ratio",
        "Anthropic: effective cost",
    ):
        assert re.search(
            rf"^  {re.escape(label)}\s+[\d,.]+%?\s+[\d,.]+%?\s+[-+][\d.]+", text, re.M
        ), label
    assert "Totals: 3 turn(s) replayed, 0 skipped" in text
    assert "provider usage reported for 1 turn(s): input 1,200 (cache read 1,000, write 0)" in text
    assert "cost 0.0015\n" in text  # (200 x 3 + 1000 x 0.3 + 40 x 15) / 1e6 at PRICES
    assert "identical requests: 0 of 3" in text


def test_without_a_target_every_request_comes_out_as_sent(api_session):
    s = short_session(api_session)
    text = replay("--session", s.id)
    assert "turn(s) replayed as recorded" in text
    assert {r[7] for r in rows(text)} == {"yes"}
    assert "identical requests: 3 of 3" in text
    assert re.search(r"OpenAI: effective cost\s+([\d,]+)\s+\1\s+\+0\.0%", text)


def test_json_output_has_the_turns_and_totals(api_session):
    s = short_session(api_session)
    body = json.loads(replay("--session", s.id, "--format", "json", "--recorded-times"))
    [session] = body["sessions"]
    assert session["sessionId"] == s.id and session["thinkSeconds"] is None
    assert session["target"] == {"protocol": None, "options": None, "label": "as recorded"}
    assert len(session["turns"]) == 3
    turn = session["turns"][0]
    assert turn["usage"] == {
        "inputTokens": 1200,
        "cacheReadInputTokens": 1000,
        "cacheWriteInputTokens": 0,
        "outputTokens": 40,
        "cost": 0.0015,
    }
    assert set(turn["providers"]) == {"openai-chat", "anthropic-messages"}
    assert set(turn["providers"]["openai-chat"]) == {"recorded", "replayed"}
    assert body["totals"]["identicalRequests"] == 3 and body["totals"]["turns"] == 3
    assert body["totals"] == session["totals"]


def test_the_newest_sessions_of_an_agent_version(api_session):
    s = short_session(api_session)
    # A second session of the same version, newer.
    created = s.app_client.post(
        "sessions/", {"agentVersionId": str(s.agent_version.id), "inputs": {}}
    )
    assert created.status_code == 201
    second = created.json()["id"]
    other = KeyClient(created.json()["sessionKey"])
    assert other.post(f"sessions/{second}/inputs/", {"content": "hi"}).status_code == 201
    assert other.post(f"sessions/{second}/projection/", {"provider": "neutral"}).status_code == 201

    text = replay(
        "--agent-version", str(s.agent_version.id), "--last", "2", "--protocol", "unified@3"
    )
    assert text.index(f"== session {second}") < text.index(f"== session {s.id}")  # newest first
    assert "All 2 sessions: 4 turn(s) replayed, 0 skipped" in text
    one = replay("--agent-version", str(s.agent_version.id), "--last", "1")
    assert f"== session {second}" in one and f"== session {s.id}" not in one


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--protocol", "prefix@2"], "replay_protocol_incompatible: unified@2 sessions cannot"),
        (["--protocol", "unified@7"], "protocol_unknown:"),
        (
            ["--protocol", "unified@4", "--options", '{"maskStep": 0, "colour": 1}'],
            "replay_options_invalid: The options are not valid for unified@4: 2 problem(s)",
        ),
        (["--options", "{nope"], "--options is not JSON"),
        (["--think-seconds", "-5"], "invalid_request: thinkSeconds must be"),
        (["--last-turns", "0"], "invalid_request: The number of turns"),
    ],
)
def test_refusals_are_command_errors_that_say_what_to_fix(api_session, args, expected):
    s = short_session(api_session)
    with pytest.raises(CommandError) as caught:
        replay("--session", s.id, *args)
    assert str(caught.value).startswith(expected), str(caught.value)
    if "replay_options_invalid" in expected:
        assert "\n  options.maskStep: maskStep " in str(caught.value)
        assert "(option_out_of_range)" in str(caught.value)
        assert "\n  options.colour: colour is not an option of unified@4" in str(caught.value)


def test_unknown_sessions_and_versions_are_refused(db):
    with pytest.raises(CommandError, match=r"^not_found: Session not found"):
        replay("--session", "00000000-0000-0000-0000-000000000000")
    with pytest.raises(CommandError, match=r"^not_found: AgentVersion not found"):
        replay("--agent-version", "not-an-id")
    with pytest.raises(CommandError):
        replay()  # one of --session and --agent-version is required
