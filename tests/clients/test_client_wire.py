"""What each real client sends, seen on the wire (docs/clients.md is written from these tests).

Every client runs unchanged, pinned and installed by tests/gateway/installs.py, against one
recording fake model endpoint (tests/clients/recorder.py) that answers well enough for it to
finish a multi-turn task with a tool round trip. The tests assert the facts the gateway relies
on: paths, the headers that name a conversation (or that none does), what each request resends,
side requests, compaction. Each client is invoked the fewest times that prove them.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contextproto.protocol.gateway.model_names import DEFAULT_SIDE_MODELS, matches_any
from tests.clients.recorder import Call, Recorder, Reply, Seen, Turn, recording, tool_loop
from tests.gateway.client_suite import claude_code_env, clean_env
from tests.gateway.installs import (
    agents_sdk_python,
    litellm_python,
    node_clients,
    pydantic_ai_python,
)

pytestmark = pytest.mark.slow

DRIVERS = Path(__file__).with_name("drivers")
KEY = "sk-client-wire-test"
WEATHER = tool_loop("weather", {"city": "Oslo"}, "Sunny in Oslo.")
# Headers any HTTP client or provider SDK sends; anything else a client adds is listed per
# client below (and is what could name a conversation).
GENERIC = {
    "accept",
    "accept-encoding",
    "accept-language",
    "anthropic-beta",
    "anthropic-version",
    "authorization",
    "connection",
    "content-length",
    "content-type",
    "host",
    "sec-fetch-mode",
    "user-agent",
    "x-api-key",
}


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    with recording() as server:
        yield server


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> str:
    """Run a client to its end (stdin closed: Codex reads a prompt from an open stdin)."""
    started = time.monotonic()
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{argv[0]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    print(f"{Path(argv[0]).name} {argv[1:3]}: {time.monotonic() - started:.1f} s")
    return done.stdout


def last_json(stdout: str) -> Any:
    return json.loads(stdout.strip().splitlines()[-1])


def extra_headers(requests: list[Seen]) -> set[str]:
    """Header names beyond GENERIC and the SDKs' `x-stainless-*` platform headers."""
    return {
        name
        for seen in requests
        for name in seen.headers
        if name not in GENERIC and not name.startswith("x-stainless-")
    }


def items_of(seen: Seen) -> list[dict[str, Any]]:
    """The conversation a request carries: `messages`, or the Responses `input` items."""
    body = seen.body
    return list(body.get("messages") or body.get("input") or [])


# ---------------------------------------------------------------------- Claude Code


def claude_brain(note: str) -> Any:
    """Read `note` (through a sub-agent when the prompt asks for one), then answer from it."""

    def brain(turn: Turn) -> Reply:
        if not turn.tools:
            return Reply(text="A short title")
        if any("SUBTASK" in text for text in turn.user_texts):  # the sub-agent's conversation
            if turn.last == "tool":
                return Reply(text="The sub-agent read: " + turn.tool_results[-1][:40])
            return Reply(calls=[Call("Read", {"file_path": note})])
        if turn.last == "tool":
            found = "PELICAN" in turn.tool_results[-1]
            return Reply(text="The word is PELICAN." if found else "The note did not say.")
        if "sub-agent" in turn.user_texts[-1]:
            task = {
                "description": "Read the note",
                "prompt": "SUBTASK: read note.txt and report the secret word",
                "subagent_type": "general-purpose",
                "run_in_background": False,
            }
            return Reply(calls=[Call("Agent", task)])
        return Reply(calls=[Call("Read", {"file_path": note})])

    return brain


def test_claude_code_names_its_session_on_every_request_and_its_sub_agents_by_agent_id(
    recorder, tmp_path
):
    claude = node_clients().claude
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    note = project / "note.txt"
    note.write_text("The secret word is PELICAN.\n")
    recorder.brains["claude"] = claude_brain(str(note))
    env = claude_code_env(home, recorder.base("claude"), KEY)
    first = run([str(claude), "-p", "Use a sub-agent to read note.txt"], env, project)
    assert "PELICAN" in first
    started = len(recorder.requests("claude"))
    # The continued conversation names its model: ANTHROPIC_MODEL is what the gateway gets.
    again = {**env, "ANTHROPIC_MODEL": "helper@1"}
    second = run([str(claude), "-p", "--continue", "How was the word written?"], again, project)
    assert "PELICAN" in second

    seen = recorder.requests("claude")
    posts = [s for s in seen if s.method == "POST"]
    first_posts = [s for s in seen[:started] if s.method == "POST"]
    # Per invocation, one HEAD on <base>/api/hello (a connectivity probe), then Messages only:
    # `/v1/messages?beta=true`, streamed; no count_tokens in -p mode.
    assert [(s.method, s.path) for s in seen if s.method != "POST"] == [("HEAD", "/api/hello")] * 2
    assert {(s.path, s.api, json.dumps(s.query)) for s in posts} == {
        ("/v1/messages", "messages", '{"beta": ["true"]}')
    }
    assert all(s.streamed for s in posts)

    # One session id on every request of both invocations (also in metadata.user_id).
    session_ids = {s.headers["x-claude-code-session-id"] for s in posts}
    assert len(session_ids) == 1
    (session_id,) = session_ids
    assert all(json.loads(s.body["metadata"]["user_id"])["session_id"] == session_id for s in posts)

    # The sub-agent's requests, and only they, carry its agent id (the same session id).
    sub = [s for s in posts if "SUBTASK" in json.dumps(s.body["messages"][:1])]
    main = [s for s in posts if s not in sub]
    assert len(sub) == 2 and len(main) == 4
    assert len({s.headers["x-claude-code-agent-id"] for s in sub}) == 1
    assert not any("x-claude-code-agent-id" in s.headers for s in main)
    assert all("cc_is_subagent=true" in s.body["system"][0]["text"] for s in sub)
    assert not any("cc_is_subagent" in s.body["system"][0]["text"] for s in main)
    assert extra_headers(posts) == {
        "anthropic-dangerous-direct-browser-access",
        "x-app",
        "x-claude-code-agent-id",
        "x-claude-code-session-id",
    }

    # The Agent tool, as the model sees it (what a sub-agent call looks like).
    agent_tool = next(t for t in first_posts[0].body["tools"] if t["name"] == "Agent")
    assert agent_tool["input_schema"]["required"] == ["description", "prompt"]
    assert "subagent_type" in agent_tool["input_schema"]["properties"]

    # No side request in -p mode: every request carries the conversation's tools.
    assert all(s.body.get("tools") for s in posts)
    # The model: Claude Code's own default unless ANTHROPIC_MODEL names one; the sub-agent
    # inherits the parent's.
    assert {s.body["model"] for s in first_posts} == {"claude-opus-5-5"}
    assert {s.body["model"] for s in posts[len(first_posts) :]} == {"helper@1"}
    # max_tokens: its own model's limit, 32000 for a model name it does not know.
    assert {s.body["max_tokens"] for s in first_posts} == {128000}
    assert {s.body["max_tokens"] for s in posts[len(first_posts) :]} == {32000}
    for s in posts:
        assert s.body["thinking"]["type"] == "adaptive"
        assert {"metadata", "context_management", "output_config"} <= set(s.body)
        # The client's own system messages sit between turns, beside user and assistant.
        assert "system" in {m["role"] for m in s.body["messages"]}

    # --continue resends the whole first conversation (the main thread, not the sub-agent's).
    continued = main[2]
    assert "Use a sub-agent to read note.txt" in json.dumps(continued.body["messages"])
    assert "SUBTASK" in json.dumps(continued.body["messages"])  # as the Agent call's input


class Terminal:
    """A program on a pseudo-terminal (Claude Code's interactive UI needs one), typed into."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env={**env, "TERM": "xterm-256color"},
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.master, self.screen = master, b""
        # Drain the screen, or the program blocks writing to it.
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.screen += chunk

    def type(self, text: str) -> None:
        for key in text:  # one key at a time, as a person types
            os.write(self.master, key.encode())
            time.sleep(0.01)
        time.sleep(0.3)
        os.write(self.master, b"\r")

    def wait(self, condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.process.poll() is None, f"exited while waiting for {what}"
            assert time.monotonic() < deadline, f"no {what}: {self.screen[-2000:]!r}"
            time.sleep(0.2)

    def close(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        os.close(self.master)


PROMPT = "\N{HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT}".encode()  # its input line


def test_claude_code_interactive_asks_a_title_first_and_counts_tokens_for_context(
    recorder, tmp_path
):
    claude = node_clients().claude
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    note = project / "note.txt"
    note.write_text("The secret word is PELICAN.\n")
    key = KEY + "-0123456789abcdef"
    # What a person's first run would have answered: onboarding done, the folder trusted,
    # the key approved (Claude Code remembers a key by its last 20 characters).
    settings = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
        "projects": {str(project): {"hasTrustDialogAccepted": True}},
    }
    (home / ".claude.json").write_text(json.dumps(settings))
    conversation = claude_brain(str(note))

    def brain(turn: Turn) -> Reply:
        if not turn.tools:
            return Reply(text='{"title": "Note reading"}')
        return conversation(turn)

    recorder.brains["claude-tty"] = brain
    env = claude_code_env(home, recorder.base("claude-tty"), key)
    terminal = Terminal([str(claude)], env, project)
    try:
        terminal.wait(lambda: PROMPT in terminal.screen, "prompt")
        terminal.type("What does note.txt say?")
        terminal.wait(lambda: b"PELICAN" in terminal.screen, "answer")
        terminal.type("/context")

        def counted() -> bool:
            # What this test is about: /context asks count_tokens part by part (the table's
            # text on the screen depends on how the UI draws under load).
            counts = [s for s in recorder.requests("claude-tty") if s.api == "count_tokens"]
            alone = any(len(s.body.get("tools") or []) == 1 for s in counts)
            return len(counts) >= 5 and alone

        terminal.wait(counted, "/context's count_tokens requests")
    finally:
        terminal.close()

    posts = [s for s in recorder.requests("claude-tty") if s.method == "POST"]
    assert len({s.headers["x-claude-code-session-id"] for s in posts}) == 1
    messages = [s for s in posts if s.api == "messages"]
    # The title request comes first, before the conversation's, under its model name: no
    # tools, a system text of its own, a JSON-schema answer format with a `title`.
    title, *turns = messages
    assert title.body["tools"] == []
    assert title.body["model"] == turns[0].body["model"] == "claude-opus-5-5"
    # So the default side models cannot tell it from the conversation by its name.
    assert not matches_any(DEFAULT_SIDE_MODELS, title.body["model"])
    assert "naming a coding session" in json.dumps(title.body["system"])
    assert title.body["output_config"]["format"]["schema"]["required"] == ["title"]
    assert "thinking" not in title.body
    assert all(t.body["tools"] for t in turns)
    # /context asks count_tokens for each part of the context (tools one by one among them).
    counts = [s for s in posts if s.api == "count_tokens"]
    assert len(counts) >= 5
    assert {(s.path, json.dumps(s.query)) for s in counts} == {
        ("/v1/messages/count_tokens", '{"beta": ["true"]}')
    }
    assert any(len(s.body.get("tools") or []) == 1 for s in counts)


def test_claude_code_sends_its_helper_requests_under_the_small_fast_model_it_is_given(
    recorder, tmp_path
):
    """The default side models (contract §14) hold Claude Code's small/fast model: named by
    ANTHROPIC_DEFAULT_HAIKU_MODEL, its helper requests (the title first) carry it, and the
    conversation keeps its own model."""
    claude = node_clients().claude
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    key = KEY + "-fedcba9876543210"
    settings = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
        "projects": {str(project): {"hasTrustDialogAccepted": True}},
    }
    (home / ".claude.json").write_text(json.dumps(settings))

    def brain(turn: Turn) -> Reply:
        if not turn.tools:
            return Reply(text='{"title": "Greeting"}')
        return Reply(text="HELLO-THERE")

    recorder.brains["claude-haiku"] = brain
    env = claude_code_env(
        home, recorder.base("claude-haiku"), key, ANTHROPIC_DEFAULT_HAIKU_MODEL="claude-haiku-4-5"
    )
    terminal = Terminal([str(claude)], env, project)
    try:
        terminal.wait(lambda: PROMPT in terminal.screen, "prompt")
        terminal.type("Say hello.")
        terminal.wait(lambda: b"HELLO-THERE" in terminal.screen, "answer")
    finally:
        terminal.close()

    messages = [s for s in recorder.requests("claude-haiku") if s.api == "messages"]
    helpers = [s for s in messages if not s.body.get("tools")]
    turns = [s for s in messages if s.body.get("tools")]
    assert helpers and turns
    assert "naming a coding session" in json.dumps(helpers[0].body["system"])
    assert {s.body["model"] for s in helpers} == {"claude-haiku-4-5"}
    assert {s.body["model"] for s in turns} == {"claude-opus-5-5"}
    assert all(matches_any(DEFAULT_SIDE_MODELS, s.body["model"]) for s in helpers)
    assert not any(matches_any(DEFAULT_SIDE_MODELS, s.body["model"]) for s in turns)


# ---------------------------------------------------------------------- Codex CLI

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello from the patch\n*** End Patch\n"


def codex_brain() -> Any:
    """Run a shell command, then apply a patch, once each; report usage past the limit on each
    call, so Codex compacts mid-turn; answer a compaction trigger with one compaction item."""
    served: set[str] = set()

    def brain(turn: Turn) -> Reply:
        if turn.last == "compaction_trigger":
            return Reply(compaction=True)
        if not turn.tools:  # Codex's own summary request (local compaction)
            return Reply(text="Handoff: the shell step is finished.")
        if turn.last == "tool":
            return Reply(text="Done: " + turn.tool_results[-1][:40])
        asked = turn.user_texts[-1]
        if "Write out.txt" in asked and "shell" not in served:
            served.add("shell")
            command = {"cmd": "echo codex-was-here > out.txt && cat out.txt"}
            return Reply(calls=[Call("exec_command", command)], input_tokens=5000)
        if "apply a patch" in asked and "patch" not in served:
            served.add("patch")
            return Reply(calls=[Call("apply_patch", PATCH)], input_tokens=5000)
        return Reply(text="Nothing more to do.")

    return brain


def codex_env(tmp_path: Path, base: str) -> dict[str, str]:
    home = tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f"""model_provider = "gateway"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
model_auto_compact_token_limit = 2000

[model_providers.gateway]
name = "contextproto"
base_url = "{base}/v1"
env_key = "GATEWAY_KEY"
wire_api = "responses"

[analytics]
enabled = false

[otel]
exporter = "none"
"""
    )
    return clean_env(HOME=str(home), CODEX_HOME=str(home), GATEWAY_KEY=KEY)


def metadata(seen: Seen) -> dict[str, Any]:
    return json.loads(seen.headers["x-codex-turn-metadata"])


def test_codex_names_its_session_falls_back_from_websocket_and_compacts_both_ways(
    recorder, tmp_path
):
    codex = node_clients().codex
    work = tmp_path / "work"
    work.mkdir()
    env = codex_env(tmp_path, recorder.base("codex"))
    recorder.brains["codex"] = codex_brain()
    exec_ = [str(codex), "exec", "--skip-git-repo-check", "-m", "gpt-5.5"]
    # 1. A provider that offers WebSockets: the 404 on the upgrade falls back to SSE POSTs.
    #    The tool call's usage passes the limit: Codex compacts locally, mid-turn.
    websocket = ["-c", "model_providers.gateway.supports_websockets=true"]
    run([*exec_, *websocket, "Write out.txt"], env, work)
    assert (work / "out.txt").read_text() == "codex-was-here\n"
    first_count = len(recorder.requests("codex"))
    # 2. The same session resumed under a provider named "OpenAI": remote compaction (v2).
    openai = ["-c", 'model_providers.gateway.name="OpenAI"']
    run([*exec_, *openai, "resume", "--last", "Now apply a patch"], env, work)
    assert (work / "hello.txt").read_text() == "hello from the patch\n"

    seen = recorder.requests("codex")
    first, second = seen[:first_count], seen[first_count:]
    upgrades = [s for s in first if s.method == "GET"]
    posts = [s for s in seen if s.method == "POST"]
    # The WebSocket attempt: GET <base>/v1/responses with an upgrade, tried again after each
    # 404 (several seconds of backoff), then the same turn over SSE.
    assert len(upgrades) >= 2
    assert all(s.path == "/v1/responses" and s.headers["upgrade"] == "websocket" for s in upgrades)
    assert upgrades[0].headers["openai-beta"].startswith("responses_websockets=")
    assert metadata(upgrades[0])["request_kind"] == "prewarm"
    assert not any(s.method == "GET" for s in second)  # no WebSocket unless the provider says so
    assert {(s.path, s.api) for s in posts} == {("/v1/responses", "responses")}  # no …/compact

    # One session id for both invocations, in four headers and two body fields.
    session = posts[0].headers["session-id"]
    for s in posts:
        assert s.headers["session-id"] == s.headers["thread-id"] == session
        assert s.headers["x-client-request-id"] == session
        assert s.body["prompt_cache_key"] == session
        assert s.body["client_metadata"]["session_id"] == session
        assert s.headers["originator"] == "codex_exec"
        assert s.body["store"] is False and s.streamed
        assert s.body["include"] == ["reasoning.encrypted_content"]
        assert "reasoning" in s.body and "instructions" not in s.body
    assert extra_headers(posts) == {
        "originator",
        "session-id",
        "thread-id",
        "x-client-request-id",
        "x-codex-beta-features",
        "x-codex-turn-metadata",
        "x-codex-window-id",
    }
    # Its tools: the shell as a function, apply_patch as a free-form custom tool with a Lark
    # grammar, hosted tools beside them.
    tools = {t.get("name", t["type"]): t for t in posts[0].body["tools"]}
    assert tools["exec_command"]["type"] == "function"
    assert tools["apply_patch"]["type"] == "custom"
    assert tools["apply_patch"]["format"]["type"] == "grammar"
    assert tools["apply_patch"]["format"]["syntax"] == "lark"
    assert {"web_search", "tool_search"} <= set(tools)

    kinds = [metadata(s)["request_kind"] for s in posts]
    windows = [s.headers["x-codex-window-id"] for s in posts]
    compactions = [s for s in posts if metadata(s)["request_kind"] == "compaction"]
    assert len(compactions) == 2, kinds
    # The turn metadata header says which kind of compaction a request is.
    assert [metadata(c)["compaction"]["implementation"] for c in compactions] == [
        "responses",
        "responses_compaction_v2",
    ]
    assert {metadata(c)["compaction"]["phase"] for c in compactions} == {"mid_turn"}
    local, remote = compactions
    # Local compaction (any provider not named OpenAI): a tool-less request whose last user
    # message asks for a handoff summary; the next window opens with that summary.
    assert not local.body["tools"]
    asked = items_of(local)[-1]["content"][0]["text"]
    assert asked.startswith("You are performing a CONTEXT CHECKPOINT COMPACTION")
    after_local = posts[posts.index(local) + 1]
    assert "Another language model started to solve this problem" in json.dumps(
        items_of(after_local)
    )
    assert "Handoff: the shell step is finished." in json.dumps(items_of(after_local))
    # Remote compaction: the conversation's own request (tools and all) ending with a
    # `compaction_trigger` item; the one `compaction` item answered stands, unchanged, for
    # everything before it in the next request.
    assert items_of(remote)[-1] == {"type": "compaction_trigger"}
    assert remote.body["tools"]
    after_remote = items_of(posts[posts.index(remote) + 1])
    compaction = next(i for i in after_remote if i["type"] == "compaction")
    assert set(compaction) == {"type", "id", "encrypted_content"}
    assert compaction["encrypted_content"].startswith("opaque-")
    assert not any(i.get("type") == "function_call" for i in after_remote)
    # The window id counts compactions: <session>:<n>.
    assert windows[0] == f"{session}:0"
    assert windows[-1] == f"{session}:2"
    # Items Codex sends back carry a field of its own beside the API's.
    assert any("internal_chat_message_metadata_passthrough" in i for i in after_remote)
    # The patch went round as a custom tool call and its custom_tool_call_output, both in the
    # history that the compaction request then covered.
    assert {"custom_tool_call", "custom_tool_call_output"} <= {
        i.get("type") for i in items_of(remote)
    }


def test_codex_default_model_sends_its_tools_as_an_input_item_in_code_mode(recorder, tmp_path):
    codex = node_clients().codex
    work = tmp_path / "work"
    work.mkdir()
    env = codex_env(tmp_path, recorder.base("codex-default"))
    run([str(codex), "exec", "--skip-git-repo-check", "Say hello"], env, work)
    (seen,) = recorder.requests("codex-default")
    # No `tools`: one `additional_tools` input item holds namespaces of tools, the shell and
    # apply_patch reachable only from a JavaScript `exec` custom tool.
    assert "tools" not in seen.body
    first = items_of(seen)[0]
    assert first["type"] == "additional_tools" and first["role"] == "developer"
    namespaces = {n["name"]: n for n in first["tools"]}
    assert namespaces["functions"]["type"] == "namespace"
    exec_tool = next(t for t in namespaces["functions"]["tools"] if t["name"] == "exec")
    assert exec_tool["type"] == "custom" and exec_tool["format"]["syntax"] == "lark"
    assert "apply_patch" in exec_tool["description"]
    assert seen.body["model"].startswith("gpt-")
    assert seen.headers["session-id"] not in {
        s.headers.get("session-id") for s in recorder.requests("codex")
    }


# ---------------------------------------------------------------------- Vercel AI SDK


@pytest.mark.parametrize(
    ("provider", "path"),
    [
        ("responses", "/v1/responses"),
        ("chat", "/v1/chat/completions"),
        ("anthropic", "/v1/messages"),
    ],
)
def test_vercel_ai_sdk_resends_its_conversation_and_names_none(recorder, tmp_path, provider, path):
    clients = node_clients()
    tag = f"ai-sdk-{provider}"
    recorder.brains[tag] = WEATHER
    env = clean_env(
        # The Anthropic provider's base URL holds /v1 too (the Python SDK's does not).
        CLIENT_BASE_URL=recorder.base(tag) + "/v1",
        CLIENT_API_KEY=KEY,
        CLIENT_MODEL="helper@1",
    )
    out = last_json(run(["node", str(clients.driver("ai_sdk.mjs")), provider], env, tmp_path))
    assert out["generate"]["toolCalls"] == ["weather"] and out["calls"] == ["Oslo", "Oslo"]
    assert "".join(out["stream"]["chunks"]) == out["stream"]["text"]

    seen = recorder.requests(tag)
    # generateText: two requests (the tool loop); streamText: two more, streamed.
    assert [(s.path, s.streamed) for s in seen] == [(path, False)] * 2 + [(path, True)] * 2
    auth = "x-api-key" if provider == "anthropic" else "authorization"
    assert all(auth in s.headers for s in seen)
    assert extra_headers(seen) == set()  # nothing names the conversation
    # Each request of the loop resends everything before it.
    lengths = [len(items_of(s)) for s in seen]
    assert lengths == sorted(lengths) and lengths[1] > lengths[0]
    assert "What is the weather in Oslo?" in json.dumps(seen[-1].body)
    if provider == "responses":
        # `store` left to its default: an earlier answer comes back as an `item_reference` to
        # the id the server gave its output item, not as its text.
        references = [i for i in items_of(seen[2]) if i.get("type") == "item_reference"]
        assert len(references) == 1 and references[0]["id"].startswith("msg_")
        assert "store" not in seen[0].body
        assert items_of(seen[0])[0] == {
            "role": "system",
            "content": "Answer weather questions in one sentence.",
        }
    if provider == "anthropic":
        assert seen[0].body["max_tokens"] == 4096  # its default for a model name it does not know


# ---------------------------------------------------------------------- Python frameworks


@pytest.mark.parametrize(
    ("provider", "path"), [("openai", "/v1/chat/completions"), ("anthropic", "/v1/messages")]
)
def test_pydantic_ai_resends_its_conversation_and_names_none(recorder, tmp_path, provider, path):
    python = pydantic_ai_python()
    tag = f"pydantic-ai-{provider}"
    recorder.brains[tag] = WEATHER
    base = recorder.base(tag) + ("/v1" if provider == "openai" else "")
    env = clean_env(CLIENT_BASE_URL=base, CLIENT_API_KEY=KEY, CLIENT_MODEL="helper@1")
    driver = str(DRIVERS / "pydantic_ai_client.py")
    out = last_json(run([str(python), "-I", driver, provider], env, tmp_path))
    assert out["calls"] == ["Oslo", "Oslo"]

    seen = recorder.requests(tag)
    assert [(s.path, s.streamed) for s in seen] == [(path, False)] * 2 + [(path, True)] * 2
    # Both of its providers authenticate with a bearer token (the Anthropic SDK 2.16 does).
    assert all(s.headers["authorization"] == f"Bearer {KEY}" for s in seen)
    assert extra_headers(seen) == set()
    assert seen[0].headers["user-agent"].startswith("pydantic-ai/")
    lengths = [len(items_of(s)) for s in seen]
    assert lengths == sorted(lengths) and lengths[1] > lengths[0]
    assert "What is the weather in Oslo?" in json.dumps(seen[-1].body)


def test_litellm_completion_resends_its_conversation_and_names_none(recorder, tmp_path):
    python = litellm_python()
    recorder.brains["litellm"] = WEATHER
    env = clean_env(
        CLIENT_BASE_URL=recorder.base("litellm") + "/v1",
        CLIENT_API_KEY=KEY,
        CLIENT_MODEL="helper@1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",  # else it fetches its price list on import
    )
    out = last_json(run([str(python), "-I", str(DRIVERS / "litellm_client.py")], env, tmp_path))
    seen = recorder.requests("litellm")
    assert [s.path for s in seen] == ["/v1/chat/completions"] * 4
    assert extra_headers(seen) == set()
    # The tool-call id the server minted comes back as the tool result's tool_call_id.
    (call_id, _), _ = out["turns"]
    assert {"role": "tool", "tool_call_id": call_id}.items() <= items_of(seen[1])[-1].items()
    assert [len(items_of(s)) for s in seen] == [2, 4, 6, 8]


def test_agents_sdk_default_model_uses_responses_and_compacts_by_previous_response_id(
    recorder, tmp_path
):
    python = agents_sdk_python()
    recorder.brains["agents-sdk"] = WEATHER
    env = clean_env(
        CLIENT_BASE_URL=recorder.base("agents-sdk") + "/v1",
        CLIENT_API_KEY=KEY,
        CLIENT_MODEL="gpt-5.5",  # the compaction session accepts gpt-* / o* names only
    )
    driver = str(DRIVERS / "agents_sdk_responses.py")
    out = last_json(run([str(python), "-I", driver], env, tmp_path))
    assert out["calls"] == ["Oslo"] * 4 and out["session_items"] == ["compaction"]
    assert "".join(out["streamed"]["deltas"]) == out["streamed"]["final"]

    seen = recorder.requests("agents-sdk")
    assert [(s.api, s.streamed) for s in seen] == [
        ("responses", False),
        ("responses", False),
        ("responses", True),  # run_streamed
        ("responses", True),
        ("responses", False),  # the compaction session's first turn
        ("responses", False),
        ("compact", False),
        ("responses", False),
        ("responses", False),
        ("compact", False),
    ]
    assert extra_headers(seen) == set()
    assert all(s.body["instructions"] for s in seen if s.api == "responses")
    # Without a session: the whole conversation every time (to_input_list()).
    assert "What is the weather in Oslo?" in json.dumps(items_of(seen[3]))
    # The compaction session compacts by previous_response_id (store left to its default),
    # then sends the compaction item and the new message only.
    compact = seen[6]
    assert set(compact.body) == {"model", "previous_response_id"}
    assert compact.path == "/v1/responses/compact"
    assert compact.body["previous_response_id"].startswith("resp_")
    after = items_of(seen[7])
    assert [i.get("type", "message") for i in after] == ["compaction", "message"]
    assert after[1] == {"role": "user", "content": "Thanks, and Narvik?"}
