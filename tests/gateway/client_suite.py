"""What the real-client suites share: a fake model that plays a task from what it is shown,
and the few reads of the gateway's record the suites assert on.

The upstream is tests/clients/recorder.py's server (Chat Completions, Responses and Messages,
streamed or not, every request recorded): each version's base URL is one of its tags, and the
tag's brain is a `Task`. A Task reads the view the gateway sends (its own protocol messages
included) as a list of events, and answers from them alone, so requests that arrive in any
order (a sub-agent's beside its parent's, two conversations at once) each get the answer their
own conversation calls for:

* the first turn of a conversation calls the protocol tool `context_task_memory_set`, which the
  gateway runs itself and never shows the client;
* then, once after each user message that asks for it, a call of the client's own tool;
* then text, built from the tool's result.

Requests without the client's tool (a title, a summary) get a short title, unless the Task
says otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessions_app.models import GatewayExchange, Message, Session
from tests.clients.recorder import Call, Reply, Turn, content_text
from tests.providers.servers import SDK_ENV

MEMORY = "context_task_memory_set"
MEMORY_ARGUMENTS = {"purpose": "keep the task", "memory": "the user's task"}
TITLE = "A short title"
# The weather tool the tasks call, declared as each OpenAI API declares a function tool.
WEATHER_FUNCTION: dict[str, Any] = {
    "name": "weather",
    "description": "The weather in a city right now.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
WEATHER_CHAT_TOOL: dict[str, Any] = {"type": "function", "function": WEATHER_FUNCTION}
WEATHER_RESPONSES_TOOL: dict[str, Any] = {"type": "function", **WEATHER_FUNCTION}
# The protocol's derived-state messages (a user message in an Anthropic view): not the user's.
DERIVED = ("[context protocol:", "Derived context state", "Context state, derived")
REMINDER_END = "</system-reminder>"  # Claude Code's reminders come before the user's words


@dataclass(frozen=True)
class Event:
    kind: str  # user | call | result | text
    name: str = ""  # a call's tool
    text: str = ""  # the user's words, a result's text, or the assistant's text


def events_of(body: dict[str, Any], api: str) -> list[Event]:
    """The conversation a gateway's upstream request carries, whatever its API."""
    events: list[Event] = []
    if api == "chat":
        for message in body.get("messages") or []:
            role = message.get("role")
            if role == "user":
                events.append(Event("user", text=content_text(message.get("content"))))
            elif role == "tool":
                events.append(Event("result", text=content_text(message.get("content"))))
            elif role == "assistant":
                events.append(Event("text", text=content_text(message.get("content"))))
                for call in message.get("tool_calls") or []:
                    events.append(Event("call", name=call["function"]["name"]))
    elif api == "responses":
        items = body.get("input")
        for item in [{"role": "user", "content": items}] if isinstance(items, str) else items:
            kind = item.get("type", "message")
            if kind == "message" and item.get("role") == "user":
                events.append(Event("user", text=content_text(item.get("content"))))
            elif kind == "message":
                events.append(Event("text", text=content_text(item.get("content"))))
            elif kind in ("function_call", "custom_tool_call"):
                events.append(Event("call", name=item["name"]))
            elif kind.endswith("_call_output"):
                events.append(Event("result", text=content_text(item.get("output"))))
    elif api == "messages":
        for message in body.get("messages") or []:
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            # Text beside a tool result (Claude Code's reminders) is not the user's next turn.
            answering = any(block.get("type") == "tool_result" for block in blocks)
            for block in blocks:
                kind = block.get("type")
                if kind == "tool_use":
                    events.append(Event("call", name=block["name"]))
                elif kind == "tool_result":
                    events.append(Event("result", text=content_text(block.get("content"))))
                elif kind == "text" and message.get("role") == "user" and not answering:
                    events.append(Event("user", text=block.get("text") or ""))
                elif kind == "text":
                    events.append(Event("text", text=block.get("text") or ""))
    said = [
        Event("user", text=e.text.rpartition(REMINDER_END)[2].strip()) if e.kind == "user" else e
        for e in events
    ]
    return [
        e for e in said if not (e.kind == "user" and (not e.text or e.text.startswith(DERIVED)))
    ]


@dataclass
class Task:
    """A recorder Brain that plays the module docstring's task.

    `call(user_text)`: the client-tool call the latest user message asks for, or None for a
    turn answered in text at once. `answer(user_text, result)`: the text after the tool's
    result (`result` is "" when no tool ran). `call_tokens`: the input tokens an answer with
    a client-tool call reports (Codex compacts past its limit). `untooled(user_text)`: the
    answer to a request without the client's tool. `recall`: a message that asks for no
    call is answered from the latest result in the view (a model that read a file before a
    compaction answers from what it still sees). `seen` collects every upstream request's
    events.
    """

    tool: str
    call: Callable[[str], Call | None]
    answer: Callable[[str, str], str]
    protocol: bool = True
    call_tokens: Callable[[str], int] = lambda asked: 40
    untooled: Callable[[str], str] = lambda asked: TITLE
    recall: bool = False
    seen: list[list[Event]] = field(default_factory=list)

    def __call__(self, turn: Turn) -> Reply:
        if self.tool not in turn.tools:
            return Reply(text=self.untooled(turn.user_texts[-1] if turn.user_texts else ""))
        events = events_of(turn.seen.body, turn.seen.api)
        self.seen.append(events)
        users = [n for n, e in enumerate(events) if e.kind == "user"]
        asked = events[users[-1]].text if users else ""
        since = events[users[-1] + 1 :] if users else events
        calls = [e.name for e in since if e.kind == "call"]
        if self.protocol and MEMORY in turn.tools and not any(e.name == MEMORY for e in events):
            return Reply(calls=[Call(MEMORY, MEMORY_ARGUMENTS)])
        wanted = self.call(asked)
        if wanted is not None and wanted.name not in calls:
            return Reply(calls=[wanted], input_tokens=self.call_tokens(asked))
        # The result the answer is about: the call's after the user's message; with `recall`,
        # when that message asks for no call, the latest the view still holds.
        scope = since if wanted is not None else events if self.recall else []
        results = [e.text for e in scope if e.kind == "result"]
        return Reply(text=self.answer(asked, results[-1] if results else ""))


def api(base: str, key: str, method: str, path: str, body: Any = None) -> Any:
    """`method /api/v1/<path>` on the live server with `key`: the JSON answer (an error
    status raises urllib's HTTPError)."""
    request = urllib.request.Request(
        f"{base}/api/v1/{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that could steer a client, plus `extra`."""
    prefixes = ("ANTHROPIC", "OPENAI", "CLAUDE", "CODEX", "LITELLM", "AI_SDK", "CONTEXTPROTO")
    kept = {k: v for k, v in os.environ.items() if k not in SDK_ENV and not k.startswith(prefixes)}
    return {**kept, **extra}


def claude_code_env(home: Path, base_url: str, key: str, **extra: str) -> dict[str, str]:
    """What docs/clients.md says Claude Code needs, and no more: its base URL and key, a home
    of its own, and no update, telemetry or error report calls (offline); plus `extra`."""
    return clean_env(
        HOME=str(home),
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY=key,
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        **extra,
    )


def run(
    argv: list[str | Path],
    env: dict[str, str],
    cwd: Path,
    *,
    application: Any = None,
    timeout: float = 150,
) -> str:
    """Run a client to its end, stdin closed (Codex reads a prompt from an open stdin); its
    stdout. A client that fails fails the test with its output and, for `application`, the
    gateway's refusals. Prints how long it took (pytest -s shows it)."""
    started = time.monotonic()
    done = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    name = Path(str(argv[0])).name
    refused = "\n".join(failures(application)) if application is not None else ""
    assert done.returncode == 0, (
        f"{name} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}\n"
        f"the gateway's refusals:\n{refused}"
    )
    print(f"{name} {[str(a) for a in argv[1:3]]}: {time.monotonic() - started:.1f} s")
    return done.stdout


def last_json(stdout: str) -> Any:
    return json.loads(stdout.strip().splitlines()[-1])


def sessions_of(application: Any) -> list[Session]:
    return list(Session.objects.filter(application=application).order_by("created_at"))


def log_of(session: Session | str) -> list[tuple[str, str | None]]:
    return list(
        Message.objects.filter(session_id=getattr(session, "pk", session))
        .order_by("index")
        .values_list("kind", "tool_name")
    )


def exchanges_of(application: Any) -> list[GatewayExchange]:
    return list(GatewayExchange.objects.filter(application=application).order_by("created_at"))


def failures(application: Any) -> list[str]:
    """Each gateway request of `application` that was not answered 200: its path, status,
    code and the start of its reply (a test's message when a client was refused)."""
    return [
        f"{e.path} {e.http_status} {e.error_code}: {e.reply_body[:600]}"
        for e in exchanges_of(application)
        if e.http_status != 200
    ]
