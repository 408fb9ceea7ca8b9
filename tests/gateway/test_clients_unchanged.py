"""Every client unchanged: one conversation, one session, found by the gateway (issue 40, §19.1).

Each client gets its base URL, an application key and a model name, and nothing else: no
session made beforehand, no header, no environment setting beyond what it needs to run
offline. The model names clients send on their own resolve through the Application's model
aliases, set through `gateway-settings/` first. Against uvicorn on the test database, with a
fake model (tests/gateway/client_suite.py's `Task` on tests/clients/recorder.py) that calls a
protocol tool first (run inside the gateway), then the client's own tool, then answers from
its result; every conversation has two user turns, and the sessions the gateway created are
counted against the conversations the clients held.

* Claude Code `claude -p` with a task that uses a sub-agent (its Agent tool), then
  `claude -p --continue`: one session, the sub-agent's as its child; and the interactive
  `claude` (on a pseudo-terminal), whose first request asks the model for a title: a side
  exchange of the conversation's one session, never in its log.
* The Agents SDK's chat-completions model, LangChain's `create_agent`, Pydantic AI (OpenAI and
  Anthropic models), the Vercel AI SDK's `openai.chat()` and `anthropic()`, LiteLLM's
  `completion`: one session each.
* Two conversations that begin with the same words, on one application key: two sessions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from tests.clients.recorder import Call, Recorder, recording
from tests.clients.test_client_wire import PROMPT, Terminal
from tests.gateway.client_suite import (
    MEMORY,
    WEATHER_CHAT_TOOL,
    Task,
    api,
    claude_code_env,
    clean_env,
    exchanges_of,
    failures,
    last_json,
    log_of,
    run,
    sessions_of,
)
from tests.gateway.installs import (
    agents_sdk_python,
    litellm_python,
    node_clients,
    pydantic_ai_python,
)
from tests.gateway.live import make_app, make_version

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

NOTE = "The secret word is PELICAN.\n"
MEMORY_TURN = [("tool_call", MEMORY), ("tool_result", MEMORY)]


@pytest.fixture(scope="module")
def model() -> Iterator[Recorder]:
    with recording() as recorder:
        yield recorder


# ---------------------------------------------------------------------- Claude Code


def claude_call(note: str) -> Any:
    def call(asked: str) -> Call | None:
        if "SUBTASK" in asked:  # the sub-agent's conversation
            return Call("Read", {"file_path": note})
        if "sub-agent" in asked:
            task = {
                "description": "Read the note",
                "prompt": "SUBTASK: read note.txt and report the secret word",
                "subagent_type": "general-purpose",
                "run_in_background": False,
            }
            return Call("Agent", task)
        if "note.txt" in asked:
            return Call("Read", {"file_path": note})
        return None

    return call


def claude_answer(asked: str, result: str) -> str:
    if "SUBTASK" in asked:
        return "The sub-agent read: PELICAN." if "PELICAN" in result else "Nothing there."
    if result:
        return "The word is PELICAN." if "PELICAN" in result else "The note did not say."
    return "It was PELICAN, in capitals."


def claude_code_ids(home: Path) -> tuple[str, list[str]]:
    """Claude Code's own record of its run (~/.claude/projects/<project>/<session>.jsonl, a
    `subagents/agent-<id>.jsonl` per sub-agent): its session id and its sub-agents' ids."""
    [record] = (home / ".claude" / "projects").glob("*/*.jsonl")
    agents = sorted(
        p.stem.removeprefix("agent-") for p in record.parent.glob("*/subagents/*.jsonl")
    )
    return record.stem, agents


@dataclass(frozen=True)
class ClaudeCodeRun:
    """What a Claude Code test starts from: the CLI, its project (note.txt in it) and home,
    the fake model's task, the Application and key, and the environment it runs with."""

    claude: Path
    project: Path
    home: Path
    task: Task
    application: Any
    key: str
    env: dict[str, str]


def claude_code_run(
    live: Any,
    tmp_path: Path,
    model: Recorder,
    tag: str,
    *,
    untooled: Callable[[str], str] | None = None,
    **settings: Any,
) -> ClaudeCodeRun:
    """A project holding note.txt, the fake model's task under `tag`, an Application whose
    `claude-*` names run its helper version (`settings` added to its gateway settings), and
    Claude Code's environment (`claude_code_env`)."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    note = project / "note.txt"
    note.write_text(NOTE)
    task = Task("Read", claude_call(str(note)), claude_answer)
    if untooled is not None:
        task.untooled = untooled
    model.brains[tag] = task
    application, key = make_app(f"claude-code-{tag}")
    version = make_version(
        application, name="helper", provider="anthropic", upstream_url=model.base(tag)
    )
    # Claude Code sends its own model names (claude-opus-5-5, its sub-agents' too).
    aliases = [{"pattern": "claude-*", "agentVersion": f"helper@{version.number}"}]
    api(live.base, key, "PUT", "gateway-settings/", {"modelAliases": aliases, **settings})
    env = claude_code_env(home, f"{live.base}/gateway/anthropic", key)
    return ClaudeCodeRun(node_clients().claude, project, home, task, application, key, env)


def test_claude_code_with_a_sub_agent_is_one_session_and_its_child(
    live, transactional_db, tmp_path, model
):
    cc = claude_code_run(live, tmp_path, model, "claude")
    claude, project, home, task = cc.claude, cc.project, cc.home, cc.task
    application, key, env = cc.application, cc.key, cc.env
    asked = [claude, "-p", "Use a sub-agent to read note.txt"]
    first = run(asked, env, project, application=application)
    assert first.strip().endswith("The word is PELICAN.")
    continued = [claude, "-p", "--continue", "How was the word written?"]
    again = run(continued, env, project, application=application)
    assert again.strip() == "It was PELICAN, in capitals."
    assert failures(application) == []

    # The sub-agent ran Claude Code's Read tool on the note; its report reached the parent.
    results = [e.text for events in task.seen for e in events if e.kind == "result"]
    assert any("PELICAN" in text for text in results)
    conversation, [agent_id] = claude_code_ids(home)
    found = api(live.base, key, "GET", f"gateway-conversations/{conversation}/")
    main, child = found["sessionId"], found["childSessions"][0]["sessionId"]
    assert found == {
        "conversationId": conversation,
        "sessionId": main,
        "childSessions": [{"agentId": agent_id, "sessionId": child}],
    }
    # One conversation: its session and the sub-agent's child, nothing else.
    assert {str(s.pk) for s in sessions_of(application)} == {main, child}
    assert log_of(main) == [
        ("input", None),
        *MEMORY_TURN,
        ("tool_call", "Agent"),
        ("tool_result", "Agent"),
        ("text", None),
        ("input", None),
        ("text", None),
    ]
    assert log_of(child) == [
        ("input", None),
        *MEMORY_TURN,
        ("tool_call", "Read"),
        ("tool_result", "Read"),
        ("text", None),
    ]
    exchanges = exchanges_of(application)
    assert {(e.http_status, e.streamed) for e in exchanges} == {(200, True)}
    assert [str(e.session_id) for e in exchanges] == [main, child, child, main, main]
    assert not any(e.warning for e in exchanges)


def title(asked: str) -> str:
    """The answer to Claude Code's title request (its only request without tools)."""
    assert "<session>" in asked
    return '{"title": "Note reading"}'


def test_claude_code_interactive_asks_its_title_as_a_side_exchange_of_its_session(
    live, transactional_db, tmp_path, model
):
    # The interactive CLI asks for its title under its main model, with no tools: an
    # application that serves Claude Code names every claude-* model a side model (a tool-less
    # request of a conversation in progress or at its start is then answered apart).
    cc = claude_code_run(
        live, tmp_path, model, "claude-tty", untooled=title, sideModels=["claude-*"]
    )
    claude, project, home, task = cc.claude, cc.project, cc.home, cc.task
    application, key, env = cc.application, cc.key, cc.env
    # What a person's first run would have answered: onboarding done, the folder trusted, the
    # key approved (Claude Code remembers a key by its last 20 characters).
    settings = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
        "projects": {str(project): {"hasTrustDialogAccepted": True}},
    }
    (home / ".claude.json").write_text(json.dumps(settings))
    terminal = Terminal([str(claude)], env, project)
    try:
        terminal.wait(lambda: PROMPT in terminal.screen, "prompt")
        terminal.type("What does note.txt say?")
        # The screen draws words apart (cursor moves between them): look for one.
        terminal.wait(lambda: b"PELICAN" in terminal.screen, "answer", timeout=30)
    finally:
        terminal.close()
    assert failures(application) == []

    # One conversation, one session; the title, asked beside the conversation's first request
    # (either may reach the gateway first), is a side exchange of it.
    [session] = sessions_of(application)
    exchanges = exchanges_of(application)
    assert sorted(e.side for e in exchanges) == [False, False, True]
    assert {e.session_id for e in exchanges} == {session.pk}
    assert log_of(session) == [
        ("input", None),
        *MEMORY_TURN,
        ("tool_call", "Read"),
        ("tool_result", "Read"),
        ("text", None),
    ]
    # The title's request and answer are nowhere in the conversation the model sees.
    assert not any("<session>" in e.text or "Note reading" in e.text for e in task.seen[-1])


# ---------------------------------------------------------------------- frameworks

DRIVERS = Path(__file__).parents[1] / "clients" / "drivers"
AGENTS_SDK_CHAT = Path(__file__).with_name("agents_sdk_client.py")
WEATHER_TURN = [("tool_call", "weather"), ("tool_result", "weather"), ("text", None)]


def weather_call(asked: str) -> Call:
    """The weather tool's call for "… in Oslo?" (the question's last word)."""
    return Call("weather", {"city": asked.rstrip("?").split()[-1]})


def place_call(asked: str) -> Call:
    """The Agents SDK driver's weather tool takes a place (a pydantic model) and a unit; its
    strict schema requires the optional country too (as null)."""
    place = {"city": asked.rstrip("?").split()[-1], "country": None}
    return Call("weather", {"place": place, "unit": "celsius"})


def forecast(asked: str, result: str) -> str:
    return f"Forecast: {result}."


def langchain_create_agent(base: str, key: str) -> list[str]:
    """LangChain's `create_agent` with a tool, a conversation kept by its checkpointer (the
    thread id), the second turn streamed token by token. The tool's calls."""
    calls: list[str] = []

    @tool
    def weather(city: str) -> str:
        """The weather in a city right now."""
        calls.append(city)
        return f"sunny, 21 degrees in {city}"

    llm = ChatOpenAI(base_url=f"{base}/gateway/openai/v1", api_key=key, model="helper")
    agent = create_agent(
        llm,
        tools=[weather],
        system_prompt="Answer weather questions in one sentence.",
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "weather-chat"}}
    first = agent.invoke({"messages": [HumanMessage("What is the weather in Oslo?")]}, thread)
    assert first["messages"][-1].content == "Forecast: sunny, 21 degrees in Oslo."
    streamed = [
        chunk.content
        for chunk, _ in agent.stream(
            {"messages": [HumanMessage("And in Bergen?")]}, thread, stream_mode="messages"
        )
        if isinstance(chunk, AIMessageChunk) and chunk.content
    ]
    assert "".join(streamed) == "Forecast: sunny, 21 degrees in Bergen."
    return calls


# (client, its tool's call, the upstream's wire): each runs a two-turn conversation.
FRAMEWORKS = [
    ("agents-sdk-chat", place_call, "anthropic"),
    ("langchain-create-agent", weather_call, "openai"),
    ("pydantic-ai-openai", weather_call, "anthropic"),
    ("pydantic-ai-anthropic", weather_call, "openai"),
    ("ai-sdk-openai-chat", weather_call, "openai"),
    ("ai-sdk-anthropic", weather_call, "anthropic"),
    ("litellm", weather_call, "openai"),
]


def drive(client: str, base: str, key: str, tmp_path: Path) -> list[str]:
    """Run `client` through its two-turn conversation; the cities its tool was called for."""
    openai_base, anthropic_base = f"{base}/gateway/openai/v1", f"{base}/gateway/anthropic"
    if client == "langchain-create-agent":
        return langchain_create_agent(base, key)
    if client == "agents-sdk-chat":
        env = clean_env(GATEWAY_URL=openai_base, GATEWAY_KEY=key, GATEWAY_MODEL="helper")
        out = last_json(run([agents_sdk_python(), "-I", AGENTS_SDK_CHAT], env, tmp_path))
        assert out["streamed"]["final"] == "".join(out["streamed"]["deltas"])
        return [call["place"]["city"] for call in out["calls"]]
    if client.startswith("pydantic-ai"):
        provider = client.rsplit("-", 1)[1]
        env = clean_env(
            CLIENT_BASE_URL=anthropic_base if provider == "anthropic" else openai_base,
            CLIENT_API_KEY=key,
            CLIENT_MODEL="helper",
        )
        driver = [pydantic_ai_python(), "-I", DRIVERS / "pydantic_ai_client.py", provider]
        out = last_json(run(driver, env, tmp_path))
        assert out["second"] == "Forecast: sunny, 21 degrees in Bergen."
        return out["calls"]
    if client.startswith("ai-sdk"):
        provider = "anthropic" if client == "ai-sdk-anthropic" else "chat"
        # The AI SDK's Anthropic provider puts /v1 in its base URL.
        url = f"{anthropic_base}/v1" if provider == "anthropic" else openai_base
        env = clean_env(CLIENT_BASE_URL=url, CLIENT_API_KEY=key, CLIENT_MODEL="helper")
        out = last_json(run(["node", node_clients().driver("ai_sdk.mjs"), provider], env, tmp_path))
        assert out["stream"]["text"] == "Forecast: sunny, 21 degrees in Bergen."
        return out["calls"]
    assert client == "litellm"
    env = clean_env(
        CLIENT_BASE_URL=openai_base,
        CLIENT_API_KEY=key,
        CLIENT_MODEL="helper",
        LITELLM_LOCAL_MODEL_COST_MAP="True",  # else it fetches its price list on import
    )
    out = last_json(run([litellm_python(), "-I", DRIVERS / "litellm_client.py"], env, tmp_path))
    return [answer.rsplit(" ", 1)[-1].rstrip(".") for _, answer in out["turns"]]


@pytest.mark.parametrize(("client", "call", "wire"), FRAMEWORKS, ids=[f[0] for f in FRAMEWORKS])
def test_a_framework_conversation_on_the_application_key_is_one_session(
    live, transactional_db, tmp_path, model, client, call, wire
):
    task = Task("weather", call, forecast)
    model.brains[client] = task
    application, key = make_app(client)
    make_version(application, name="helper", provider=wire, upstream_url=model.base(client))
    try:
        cities = drive(client, live.base, key, tmp_path)
    finally:
        refused = failures(application)
    assert refused == []
    assert cities == ["Oslo", "Bergen"]
    # Two user turns, each a client-tool round trip, the first with a protocol call: one
    # conversation, one session.
    [session] = sessions_of(application)
    assert log_of(session) == [
        ("input", None),
        *MEMORY_TURN,
        *WEATHER_TURN,
        ("input", None),
        *WEATHER_TURN,
    ]
    exchanges = exchanges_of(application)
    assert len(exchanges) == 4 and not any(e.warning for e in exchanges)
    assert exchanges[-1].streamed or client == "litellm"  # LiteLLM's driver does not stream


# ---------------------------------------------------------------------- no merging by content


def test_two_conversations_that_begin_with_the_same_words_stay_two_sessions(
    live, transactional_db, model
):
    """The official SDK, two conversations at once on one application key, their first
    requests byte for byte the same: each goes on in its own session."""
    task = Task("weather", weather_call, forecast)
    model.brains["twins"] = task
    application, key = make_app("twins")
    make_version(application, name="helper", provider="openai", upstream_url=model.base("twins"))
    client = openai.OpenAI(base_url=f"{live.base}/gateway/openai/v1", api_key=key, max_retries=0)
    tools: Any = [WEATHER_CHAT_TOOL]
    opening = [{"role": "user", "content": "What is the weather in Oslo?"}]
    conversations = {"sunny": list(opening), "rainy": list(opening)}

    def ask(weather: str) -> Any:
        messages = conversations[weather]
        reply = client.chat.completions.create(model="helper", messages=messages, tools=tools)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        return message

    calls = {weather: ask(weather).tool_calls[0] for weather in conversations}
    for weather, call in calls.items():
        city = json.loads(call.function.arguments)["city"]
        result = {"role": "tool", "tool_call_id": call.id, "content": f"{weather} in {city}"}
        conversations[weather].append(result)
    answers = {weather: ask(weather).content for weather in conversations}
    assert answers == {"sunny": "Forecast: sunny in Oslo.", "rainy": "Forecast: rainy in Oslo."}
    assert failures(application) == []

    sessions = sessions_of(application)
    assert len(sessions) == 2
    exchanges = exchanges_of(application)
    by_session = {
        weather: {e.session_id for e in exchanges[n::2]} for n, weather in enumerate(calls)
    }
    assert {len(ids) for ids in by_session.values()} == {1}
    assert by_session["sunny"] != by_session["rainy"]
    for session in sessions:
        assert log_of(session) == [("input", None), *MEMORY_TURN, *WEATHER_TURN]
