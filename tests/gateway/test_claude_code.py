"""Claude Code, unchanged, against the gateway (contract §14): `claude -p` with ANTHROPIC_BASE_URL.

The pinned CLI (tests/gateway/installs.py) runs non-interactively in a scratch project with
a file to read. The upstream is a fake model behind the version (tests/gateway/live.py):
its first answer makes a protocol call, which the gateway dispatches itself, then calls
Claude Code's own `Read` tool; Claude Code reads the file and sends the result; the model
answers from it. A second `claude -p --continue` resends the whole conversation, which the
gateway reconciles with the session's log.

What Claude Code 2.1 sends (and these tests take): streamed Messages requests to
`/v1/messages?beta=true` with `anthropic-beta` and `x-api-key`; `system` as text blocks with
`cache_control` (a billing header line first); a mid-conversation `role: "system"` message
after the user's (the environment: working directory, platform, …); a dozen tools with
`$schema` draft 2020-12 input schemas, one `defer_loading`; `metadata`, `thinking`,
`context_management`, `output_config` and `max_tokens` 128000.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from sessions_app.models import GatewayExchange, Message, Session
from tests.gateway.installs import claude_code
from tests.gateway.live import make_app, make_version, start_session, upstream
from tests.providers.servers import SDK_ENV

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

NOTE = "The secret word is PELICAN.\n"
MEMORY = ("context_task_memory_set", {"purpose": "keep the task", "memory": "read note.txt"})


@pytest.fixture(scope="module")
def claude() -> Path:
    return claude_code()


def run_claude(
    claude: Path, project: Path, prompt: str, env: dict[str, str], *flags: str
) -> subprocess.CompletedProcess[str]:
    home = project.parent / "home"
    home.mkdir(exist_ok=True)
    clean = {k: v for k, v in os.environ.items() if k not in SDK_ENV and not k.startswith("CLAUDE")}
    done = subprocess.run(
        [str(claude), "-p", prompt, *flags],
        cwd=project,
        env={**clean, "HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"claude failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.parametrize(
    ("setup", "wire"),
    [("session-key", "anthropic"), ("application-key", "openai")],
    ids=["session-key-anthropic-upstream", "application-key-header-openai-upstream"],
)
def test_claude_code_reads_a_file_through_the_gateway_and_continues_the_session(
    live, transactional_db, tmp_path, claude, setup, wire
):
    application, key = make_app("claude-code")
    project = tmp_path / "project"
    project.mkdir()
    (project / "note.txt").write_text(NOTE)
    with upstream(wire) as model:
        version = make_version(application, provider=wire, upstream_url=model.url)
        session = start_session(live.base, key, str(version.id))
        # As the README sets it up: no side requests (session titles) into the session.
        env = {
            "ANTHROPIC_BASE_URL": f"{live.base}/gateway/anthropic",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        if setup == "session-key":
            env["ANTHROPIC_API_KEY"] = session["sessionKey"]
        else:
            env["ANTHROPIC_API_KEY"] = key
            env["ANTHROPIC_CUSTOM_HEADERS"] = f"X-Contextproto-Session: {session['id']}"

        model.answer_with("I will note the task first.", [("call_0", *MEMORY)])
        model.call("Read", {"file_path": str(project / "note.txt")}, call_id="call_0")
        model.say("The note says the secret word is PELICAN.")
        first = run_claude(claude, project, "What does note.txt say?", env)
        assert first.stdout.strip().endswith("The note says the secret word is PELICAN.")

        model.say("It was PELICAN, in capitals.")
        again = run_claude(claude, project, "How was the word written?", env, "--continue")
        assert again.stdout.strip() == "It was PELICAN, in capitals."

    # Claude Code ran its own Read tool on the file and sent the result: the model saw it.
    assert len(model.requests) == 4
    assert NOTE.strip() in json.dumps(model.requests[2])
    first_request = json.dumps(model.requests[0])
    # The client's system text reached the model through {{client_system}}: its system
    # blocks and its mid-conversation environment message.
    assert "Primary working directory" in first_request
    tools = [t.get("name") or t["function"]["name"] for t in model.requests[0]["tools"]]
    assert "context_task_memory_set" in tools and {"Read", "Bash"} <= set(tools)
    # The continued conversation's last request holds the first one's answer, once.
    assert json.dumps(model.requests[3]).count("The note says the secret word is PELICAN.") == 1

    # One session holds the whole conversation, both invocations, in order.
    log = list(
        Message.objects.filter(session_id=session["id"])
        .order_by("index")
        .values_list("kind", "tool_name")
    )
    assert log == [
        ("input", None),
        ("tool_call", "context_task_memory_set"),
        ("tool_result", "context_task_memory_set"),
        ("tool_call", "Read"),
        ("tool_result", "Read"),
        ("text", None),
        ("input", None),
        ("text", None),
    ]
    assert Session.objects.filter(application=application).count() == 1
    exchanges = GatewayExchange.objects.filter(application=application)
    assert [(e.http_status, e.streamed) for e in exchanges.order_by("created_at")] == [
        (200, True)
    ] * 3
