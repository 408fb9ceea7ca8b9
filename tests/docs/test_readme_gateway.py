"""The README's drop-in examples ("Drop-in: change the base URL"), run as a reader runs them.

uvicorn on the test's PostgreSQL, its OPENAI_BASE_URL a fake OpenAI endpoint: the setup
block's version is an `openai` model without a base URL of its own, so the server's setting
applies, as it would with OpenAI itself. Each test runs the setup block in bash as written
(only the port differs), then one client's block: a Python block with this venv's
interpreter (the Agents SDK's with the SDK's own venv), Claude Code's and Codex's in bash
with the pinned CLI on PATH. Every client block reads the application key alone: the
gateway finds each conversation's session by itself (issue 40). The fake model's answers
are queued per block; each test checks what the client printed, that its tool ran, and the
session the conversation left. The blocks are the ones marked `<!-- readme-test: NAME -->`
in README.md, so the README cannot rot.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.models import Application
from sessions_app.models import GatewayConversation, GatewayExchange, Message, Session
from tests.docs.test_readme import README_HOST, ROOT, readme_block, require_command
from tests.gateway.installs import (
    CLAUDE_CODE_VERSION,
    CODEX_VERSION,
    agents_sdk_python,
    claude_code,
    codex,
)
from tests.gateway.live import Upstream, gateway_server, server_env, upstream
from tests.providers.servers import SDK_ENV

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BLOCKS = (
    "gateway-openai",
    "gateway-anthropic",
    "gateway-agents-sdk",
    "gateway-langchain",
    "gateway-agents-sdk-responses",
)


@dataclass(frozen=True)
class Gateway:
    base: str
    model: Upstream
    tmp: Path

    @property
    def host(self) -> str:
        return self.base.removeprefix("http://")

    def block(self, name: str) -> str:
        text = readme_block(name)
        assert README_HOST in text, f"the {name} block names no server at {README_HOST}"
        return text.replace(README_HOST, self.host)


@dataclass(frozen=True)
class Setup:
    key: str  # the application key
    version_id: str

    def env(self) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items() if k not in SDK_ENV}
        return {**clean, "CONTEXTPROTO_KEY": self.key}


@pytest.fixture(scope="module")
def gateway(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("readme-gateway")
    with (
        upstream("openai") as model,
        gateway_server(
            tmp, OPENAI_BASE_URL=f"{model.url}/v1", OPENAI_API_KEY="sk-fake-upstream"
        ) as base,
    ):
        yield Gateway(base=base, model=model, tmp=tmp)


@pytest.fixture
def setup(gateway, transactional_db) -> Setup:
    """The setup block, as pasted into bash in the repository root (virtualenv active)."""
    for command in ("bash", "curl", "jq"):
        require_command(command)
    gateway.model.queue.clear()
    gateway.model.received.clear()
    script = gateway.block("gateway-setup")
    shown = script + '\necho "README-TEST KEY=$CONTEXTPROTO_KEY VERSION=$VERSION"\n'
    env = server_env(gateway.tmp)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        ["bash", "-xeuo", "pipefail", "-c", shown],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"the setup block failed:\n{done.stdout}\n{done.stderr}"
    assert '"status": "published"' in done.stdout
    found = re.search(r"README-TEST KEY=(\S+) VERSION=(\S+)", done.stdout)
    assert found is not None, done.stdout
    return Setup(key=found[1], version_id=found[2])


def run_python(code: str, setup: Setup, cwd: Path, python: Path | None = None) -> str:
    script = cwd / "example.py"
    script.write_text(code + "\n")
    done = subprocess.run(
        [str(python or sys.executable), "-I", str(script)],
        cwd=cwd,
        env=setup.env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"the example failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def exchanges() -> list[GatewayExchange]:
    """The gateway requests of this test (each test starts on an empty database)."""
    return list(GatewayExchange.objects.order_by("created_at"))


def log_of(session_id: object) -> list[tuple[str, str | None]]:
    return list(
        Message.objects.filter(session_id=session_id)
        .order_by("index")
        .values_list("kind", "tool_name")
    )


def test_every_drop_in_block_is_tested():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Drop-in: change the base URL", 1)[1].split("\n## ", 1)[0]
    marked = re.findall(r"<!-- readme-test: ([a-z-]+) -->", section)
    assert marked == ["gateway-setup", *BLOCKS, "gateway-claude-code", "gateway-codex"]
    assert f"npm install -g @anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}`" in section
    assert f"npm install -g @openai/codex@{CODEX_VERSION}`" in section


def test_the_setup_sets_aliases_and_every_client_reads_the_application_key_alone(gateway, setup):
    # No session is made beforehand (issue 40): the clients' own model names resolve through
    # the aliases the setup set, and no block reads a session key or sends a header.
    assert not Session.objects.exists()
    settings = Application.objects.get().gateway_settings
    patterns = {alias["pattern"]: alias["agentVersion"] for alias in settings.model_aliases}
    assert patterns == {"claude-*": "helper@1", "gpt-*": "helper@1"}
    for name in (*BLOCKS, "gateway-claude-code", "gateway-codex"):
        block = readme_block(name)
        assert "CONTEXTPROTO_KEY" in block, name
        if name != "gateway-openai":  # which shows continuing by the key a reply hands out
            assert "SESSION_KEY" not in block and "X-Contextproto" not in block, name
    claude = readme_block("gateway-claude-code").strip().splitlines()
    assert [line.split("=")[0] for line in claude if line.startswith("export")] == [
        "export ANTHROPIC_BASE_URL",
        "export ANTHROPIC_API_KEY",
    ]
    assert claude[-1] == 'claude -p "What does note.txt say?"'


def test_the_openai_sdk_starts_a_session_and_continues_it_with_its_key(gateway, setup, tmp_path):
    gateway.model.say("Noted: green tea.")
    gateway.model.say("You like green tea.")
    output = run_python(gateway.block("gateway-openai"), setup, tmp_path)
    assert output.splitlines() == ["Noted: green tea.", "You like green tea."]
    done = exchanges()
    assert [(e.http_status, e.replayed) for e in done] == [(200, False), (200, False)]
    assert done[0].session_id == done[1].session_id
    assert log_of(done[0].session_id) == [("input", None), ("text", None)] * 2
    # The second request sent only its new message: the session held the first exchange.
    assert "I like green tea" in json.dumps(gateway.model.requests[1])


def test_the_anthropic_sdk_streams_a_reply(gateway, setup, tmp_path):
    gateway.model.say("Water that is too hot pulls out its catechins.")
    output = run_python(gateway.block("gateway-anthropic"), setup, tmp_path)
    assert output == "Water that is too hot pulls out its catechins.\n"
    [done] = exchanges()
    assert (done.http_status, done.streamed, done.client_format) == (200, True, "anthropic")
    assert "Answer in one sentence." in json.dumps(gateway.model.requests[0])


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("gateway-agents-sdk", "chat/completions"),
        ("gateway-langchain", "chat/completions"),
        # The application key alone: the conversation is found by the call id it resends.
        ("gateway-agents-sdk-responses", "responses"),
    ],
    ids=["agents-sdk", "langchain", "agents-sdk-responses"],
)
def test_a_framework_runs_its_tool_through_the_gateway_in_one_session(
    gateway, setup, tmp_path, name, path
):
    python = agents_sdk_python() if name.startswith("gateway-agents-sdk") else None
    gateway.model.call("price_lookup", {"product": "A-100"})
    gateway.model.say("A-100 costs 12.40 EUR per unit.")
    output = run_python(gateway.block(name), setup, tmp_path, python)
    assert output == "A-100 costs 12.40 EUR per unit.\n"
    # The framework ran its tool and sent the result: the model's second request holds it.
    assert "A-100: 12.40 EUR per unit" in json.dumps(gateway.model.requests[1])
    done = exchanges()
    assert [(e.http_status, e.path.removeprefix("/gateway/openai/v1/")) for e in done] == [
        (200, path)
    ] * 2
    assert {e.session_id for e in done} == {done[0].session_id}
    assert log_of(done[0].session_id) == [
        ("input", None),
        ("tool_call", "price_lookup"),
        ("tool_result", "price_lookup"),
        ("text", None),
    ]


def test_claude_code_reads_a_file_on_the_application_key(gateway, setup, tmp_path):
    claude = claude_code()
    project = tmp_path / "project"
    project.mkdir()
    (project / "note.txt").write_text("Ship the A-100 order on Friday.\n")
    gateway.model.call("Read", {"file_path": str(project / "note.txt")})
    gateway.model.say("It says to ship the A-100 order on Friday.")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        # Nothing of this machine's Claude settings, and no update, telemetry or error report
        # calls (offline); the block sets the base URL and the key.
        **{k: v for k, v in setup.env().items() if not k.startswith(("CLAUDE", "ANTHROPIC"))},
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "HOME": str(home),
        "PATH": f"{claude.parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", gateway.block("gateway-claude-code")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"Claude Code failed:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.strip() == "It says to ship the A-100 order on Friday."
    assert "Ship the A-100 order on Friday." in json.dumps(gateway.model.requests[1])
    sent = [t["function"]["name"] for t in gateway.model.requests[0]["tools"]]
    assert {"Read", "Agent"} <= set(sent)  # sub-agents allowed: each gets a child session
    # Claude Code asks for 128000 output tokens; the version's maxOutputTokens lowers it.
    assert gateway.model.requests[0]["max_completion_tokens"] == 32768
    done_requests = exchanges()
    assert [(e.http_status, e.streamed) for e in done_requests] == [(200, True), (200, True)]
    # One conversation, one session, found by Claude Code's session header.
    [session] = Session.objects.all()
    assert {e.session_id for e in done_requests} == {session.pk}
    assert GatewayConversation.objects.get().session_id == session.pk
    assert log_of(session.pk) == [
        ("input", None),
        ("tool_call", "Read"),
        ("tool_result", "Read"),
        ("text", None),
    ]


def test_codex_reads_a_file_with_its_shell_on_the_application_key(gateway, setup, tmp_path):
    command = codex()
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    (project / "note.txt").write_text("Ship the A-100 order on Friday.\n")
    # A project under git, as Codex expects (else it asks for --skip-git-repo-check).
    subprocess.run(["git", "init", "-q"], cwd=project, check=True, timeout=30)
    gateway.model.call("exec_command", {"cmd": "cat note.txt"})
    gateway.model.say("It says to ship the A-100 order on Friday.")
    env = {
        **{k: v for k, v in setup.env().items() if not k.startswith("CODEX")},
        "HOME": str(home),
        "PATH": f"{command.parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", gateway.block("gateway-codex")],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"Codex failed:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.strip().endswith("It says to ship the A-100 order on Friday.")
    # Codex ran its shell on the file and sent the output back: the model's second request.
    assert "Ship the A-100 order on Friday." in json.dumps(gateway.model.requests[1])
    done_requests = exchanges()
    assert [(e.http_status, e.streamed, e.path) for e in done_requests] == [
        (200, True, "/gateway/openai/v1/responses")
    ] * 2
    assert {e.session_id for e in done_requests} == {done_requests[0].session_id}
    # Codex's first request holds two user messages: its environment context, the prompt.
    assert log_of(done_requests[0].session_id) == [
        ("input", None),
        ("input", None),
        ("tool_call", "exec_command"),
        ("tool_result", "exec_command"),
        ("text", None),
    ]
