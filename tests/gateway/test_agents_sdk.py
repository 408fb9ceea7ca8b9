"""The OpenAI Agents SDK, unchanged, against the gateway (contract §14).

`Agent` + `Runner.run_sync` on an `OpenAIChatCompletionsModel` built on an `AsyncOpenAI`
client whose base URL is the gateway, with a `function_tool` whose schema the SDK generates
(pydantic: `$defs`, `anyOf`), then `Runner.run_streamed` continuing the conversation. The
program (tests/gateway/agents_sdk_client.py) runs in a subprocess with the SDK's own
virtualenv: the SDK's top-level package `agents` is also the name of this project's Django
app. The upstream is a fake Anthropic endpoint: an OpenAI client on an Anthropic model.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from sessions_app.models import GatewayExchange, Message, Session
from tests.gateway.installs import agents_sdk_python
from tests.gateway.live import make_app, make_version, start_session, upstream
from tests.providers.servers import SDK_ENV

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CLIENT = Path(__file__).with_name("agents_sdk_client.py")
MEMORY = ("context_task_memory_set", {"purpose": "keep the task", "memory": "weather questions"})


def run_client(python: Path, cwd: Path, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in SDK_ENV}
    # -I: neither this project (the working directory, PYTHONPATH) nor the user's site.
    done = subprocess.run(
        [str(python), "-I", str(CLIENT)],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"the Agents SDK program failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_agents_sdk_run_calls_its_function_tool_through_the_gateway_then_streams(
    live, transactional_db, tmp_path
):
    python = agents_sdk_python()
    application, key = make_app("agents-sdk")
    with upstream("anthropic") as model:
        version = make_version(application, provider="anthropic", upstream_url=model.url)
        session = start_session(live.base, key, str(version.id))
        # Runner.run_sync: a protocol call the gateway runs itself, then the SDK's tool.
        model.answer_with("Let me note the task.", [("toolu_1", *MEMORY)])
        model.call("weather", {"place": {"city": "Oslo", "country": None}, "unit": "celsius"})
        model.say("Sunny in Oslo, 21 degrees.")
        # Runner.run_streamed, from the SDK's own history of the first run.
        model.call("weather", {"place": {"city": "Bergen", "country": "Norway"}, "unit": "celsius"})
        model.say("Sunny in Bergen too.")
        out = run_client(
            python,
            tmp_path,
            GATEWAY_URL=f"{live.base}/gateway/openai/v1",
            GATEWAY_KEY=session["sessionKey"],
            GATEWAY_MODEL="helper@1",
        )

    assert out["final"] == "Sunny in Oslo, 21 degrees."
    assert out["streamed"]["final"] == "Sunny in Bergen too."
    assert "".join(out["streamed"]["deltas"]) == "Sunny in Bergen too."
    # The SDK ran its tool with the model's arguments, parsed into its pydantic model.
    assert out["calls"] == [
        {"place": {"city": "Oslo", "country": None}, "unit": "celsius"},
        {"place": {"city": "Bergen", "country": "Norway"}, "unit": "celsius"},
    ]
    # The SDK's generated schema reached the model as it was sent, after the protocol tools.
    tools = model.requests[0]["tools"]
    assert tools[-1]["name"] == "weather"
    schema = tools[-1]["input_schema"]
    assert "$defs" in schema and "anyOf" in json.dumps(schema["$defs"])
    assert "sunny, 21 degrees celsius in Oslo" in json.dumps(model.requests[2])
    assert len(model.requests) == 5

    log = list(
        Message.objects.filter(session_id=session["id"])
        .order_by("index")
        .values_list("kind", "tool_name")
    )
    assert log == [
        ("input", None),
        ("tool_call", "context_task_memory_set"),
        ("tool_result", "context_task_memory_set"),
        ("tool_call", "weather"),
        ("tool_result", "weather"),
        ("text", None),
        ("input", None),
        ("tool_call", "weather"),
        ("tool_result", "weather"),
        ("text", None),
    ]
    assert Session.objects.filter(application=application).count() == 1
    exchanges = GatewayExchange.objects.filter(application=application).order_by("created_at")
    assert [(e.http_status, e.streamed, e.replayed) for e in exchanges] == [
        (200, False, False),
        (200, False, False),
        (200, True, False),
        (200, True, False),
    ]
