"""A built-in-runtime agent given a host tool through the API alone (contract §7, §11).

An operator registers the tool (`POST tools/`), binds it to a scripted version and
publishes; a host starts a session and sends input. The model sees the tool, calls it with
arguments its schema refuses (the runtime answers `invalid_arguments` and goes on), calls
it correctly, the run waits for the host, the host writes the result through
`POST sessions/{id}/messages/`, and the run finishes with the answer built on it. No code
creates a row: everything goes through HTTP.

Here Celery runs the turns in process (no broker); tests/e2e/test_host_tools_worker.py
plays the same scenario against a real worker.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from contextproto.celery import app as celery_app
from tests.conftest import KeyClient

WEATHER = {
    "name": "get_weather",
    "description": "Weather forecast for a city, for 1 to 7 days.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
}
STEPS = [
    {
        "comment": "The registered tool reached the model's request, schema and all.",
        "expect": {"contains": ["get_weather", "for 1 to 7 days", '"maximum": 7']},
        "toolCalls": [
            {"id": "w1", "name": "get_weather", "arguments": {"city": "Oslo", "days": 9}}
        ],
    },
    {
        "comment": "The runtime refused the arguments; the model reads why and corrects them.",
        "expect": {"contains": ["invalid_arguments", "$.days"]},
        "toolCalls": [
            {"id": "w2", "name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}
        ],
    },
    {
        "expect": {"contains": ["sunny, 21 degrees"]},
        "text": "Oslo: sunny, 21 degrees for the next two days.",
    },
    {"expect": {"contains": ["thanks"]}, "text": "You are welcome."},
]


def _ok(response, status: int) -> dict:
    assert response.status_code == status, response.content
    return response.json()


def host_tool_scenario(app: KeyClient, wait: Callable[[Callable[[], object], str], object]):
    """Play the scenario through the API; `wait(predicate, what)` waits for the runtime."""
    tool = _ok(app.post("tools/", WEATHER), 201)
    agent = _ok(app.post("agents/", {"name": "weather"}), 201)
    version = _ok(
        app.post(
            f"agents/{agent['id']}/versions/",
            {
                "systemPrompt": "You answer weather questions.\n{{context_protocol}}",
                "contextProtocolId": "unified",
                "contextProtocolVersion": 2,
                "model": {
                    "provider": "scripted",
                    "name": "script",
                    "maxInputTokens": 16000,
                    "config": {"steps": STEPS},
                },
                "tools": [tool["id"]],
            },
        ),
        201,
    )
    _ok(app.post(f"agent-versions/{version['id']}/publish/"), 200)
    session = _ok(app.post("sessions/", {"agentVersionId": version["id"]}), 201)
    host = KeyClient(session["sessionKey"])
    path = f"sessions/{session['id']}/"

    def log() -> list[dict]:
        return _ok(host.get(path + "messages/", limit=200), 200)["messages"]

    _ok(host.post(path + "inputs/", {"content": "Weather in Oslo?"}), 201)

    def waiting_call() -> dict | None:
        messages = log()
        last = messages[-1] if messages else {}
        return last if last.get("toolCallId") == "w2" else None

    call = wait(waiting_call, "the run to wait for the host's get_weather result")
    assert (call["kind"], call["toolName"], call["arguments"]) == (
        "tool_call",
        "get_weather",
        {"city": "Oslo", "days": 2},
    )
    refused = next(m for m in log() if m["kind"] == "tool_result" and m["toolCallId"] == "w1")
    assert refused["isError"] is True
    error = json.loads(refused["content"])["error"]
    assert (error["code"], error["path"], error["correctable"]) == (
        "invalid_arguments",
        "$.days",
        True,
    )
    # The run waits for the host: new input is refused meanwhile.
    busy = host.post(path + "inputs/", {"content": "hurry up"})
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy"

    _ok(
        host.post(
            path + "messages/",
            {
                "role": "tool",
                "kind": "tool_result",
                "content": "sunny, 21 degrees",
                "toolCallId": "w2",
            },
        ),
        201,
    )

    def answered() -> dict | None:
        last = log()[-1]
        return last if last["kind"] == "text" else None

    answer = wait(answered, "the run to finish after the host's result")
    assert answer["content"] == "Oslo: sunny, 21 degrees for the next two days."
    kinds = [(m["kind"], m.get("toolCallId")) for m in log()]
    assert kinds == [
        ("input", None),
        ("tool_call", "w1"),
        ("tool_result", "w1"),
        ("tool_call", "w2"),
        ("tool_result", "w2"),
        ("text", None),
    ]
    # The run is over: the session takes new input again, and the next run goes on.
    wait(
        lambda: host.post(path + "inputs/", {"content": "thanks"}).status_code == 201,
        "the session to take input again",
    )
    wait(lambda: log()[-1]["content"] == "You are welcome.", "the second run's answer")


def _at_once(predicate: Callable[[], object], what: str) -> object:
    # In-process Celery ran the turns when the request's transaction committed.
    value = predicate()
    assert value, f"expected {what} right after the request"
    return value


# transaction=True: the run is enqueued on commit, as in production.
@pytest.mark.django_db(transaction=True)
def test_a_host_tool_registered_through_the_api_runs_in_the_built_in_runtime(tenant, settings):
    settings.RUNTIME_AUTOSTART = True
    _, app = tenant("Weather Co")
    # Turns run in this process even where REDIS_URL names a broker (no worker here).
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        host_tool_scenario(app, _at_once)
    finally:
        celery_app.conf.task_always_eager = eager
