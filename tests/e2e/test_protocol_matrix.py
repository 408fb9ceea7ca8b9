"""Every protocol mapping through both provider shapes, end to end (issue 14).

unified@1, unified@2, unified@3 with each state placement (groups A, B, C) and prefix@2,
each driven by the built-in runtime in a real Celery worker (PostgreSQL + Redis) through
the official `openai` and `anthropic` SDKs, pointed at local fake endpoints that record
every request and answer from a script. One session per case, two runs:

run 1  open window `quote` → host lookup (the session is archived while the call is
       pending; its result arrives afterwards) → a write naming the wrong window (error
       receipt) → the corrected write → a fold of the lookup → final text;
       then receipt replays over HTTP, and archive + restore of the whole log with the view
       compared before, while cold and after;
run 2  host lookup whose provider-reported usage crosses the maintenance trigger → the
       worker runs the bound maintainer and commits a checkpoint covering the fold → the
       fold is read back after compression → final text.

prefix@2 has no windows, folds or context tools: its case runs the same shape of session
and asserts what that mapping does instead (see the comments in `test_prefix_roundtrip`).
unified@4 masks older tool results and keeps volatile state out of the header; its case
(`test_unified4_roundtrip`) reads a masked result back from the archive and checks that the
view only grows between masking steps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from agents.models import Tool
from agents.services import (
    agent_create,
    agent_version_create,
    agent_version_publish,
    application_create,
)
from contextproto.celery import app
from contextproto.protocol import catalog
from contextproto.protocol.adapter_anthropic import DERIVED_EDGE_MARKER
from contextproto.protocol.derived_texts import HEADER_LEAD, STATE_LEAD
from contextproto.protocol.folds import fold_id_for
from contextproto.protocol.prompt_cache import session_cache_key
from labs import scenario
from sessions_app.models import (
    ArchiveChunk,
    KVEntry,
    MaintenanceJob,
    Message,
    ProjectionSnapshot,
    Run,
    ToolReceipt,
)
from sessions_app.reads.raw_log import log_page
from sessions_app.services.archive import archive_session, restore_session
from sessions_app.services.projection import projection_build
from tests.conftest import KeyClient
from tests.e2e.conftest import FAKE_KEY, FAKE_KEY_ENV, Worker
from tests.providers.servers import Answer, FakeAPI, serve_api

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

OPENAI = "openai-chat"
ANTHROPIC = "anthropic-messages"
PROVIDERS = (OPENAI, ANTHROPIC)

# mapping id → (protocol, version, options); the v3 placements are the experiment's groups
# A, B and C (experiments/unified-mapping-ab.json, catalog option stateMessagePlacement).
UNIFIED_MAPPINGS = {
    "unified@1": ("unified", 1, {}),
    "unified@2": ("unified", 2, {}),
    "unified@3-A": ("unified", 3, {"stateMessagePlacement": catalog.PLACEMENT_TRAILING_ASSISTANT}),
    "unified@3-B": (
        "unified",
        3,
        {"stateMessagePlacement": catalog.PLACEMENT_BEFORE_HISTORY_ASSISTANT},
    ),
    "unified@3-C": ("unified", 3, {"stateMessagePlacement": catalog.PLACEMENT_TRAILING_USER}),
}

HOST_TOOL = "lookup"
MAX_INPUT_TOKENS = 32_000
TRIGGER_RATIO = 0.75
QUIET_TOKENS = 200  # provider-reported usage of an ordinary turn: far below the trigger
TRIGGER_TOKENS = 30_000  # at least 0.75 * 32000: this turn queues maintenance (contract §6)
SESSION_INPUTS = {"customer": "Zoë Café"}  # non-ASCII: v1 escapes it, v2+ keep it
RUN_1 = "Prepare a quote for 3 laptops for Zoë; the budget is 5000."
RUN_2 = "The budget is now 9000. Confirm the quote; do not change it."
HANDOFF = "Prepare the quote; budget 5000; then report back."
PRICE_RESULT = json.dumps({"item": "laptop", "price": 1300, "currency": "EUR"})
STOCK_RESULT = json.dumps({"item": "laptop", "stock": 40})
MEMORY = "Price 1300 EUR each; 3 laptops = 3900 EUR."
FOLD_SUMMARY = "Price lookup: 1300 EUR per laptop."
CHECKPOINT = scenario.maintainer_script()["steps"][0]["text"]


# --------------------------------------------------------------------------- fake provider


class ScriptedAPI(FakeAPI):
    """A FakeAPI (recording) whose answers are a script in one provider's response shape.

    Past the script it answers 400, so an unexpected extra model call fails the run
    (provider_request_rejected) instead of inventing a turn.
    """

    def __init__(self, provider: str) -> None:
        exhausted = {"error": {"type": "invalid_request_error", "message": "script exhausted"}}
        super().__init__(Answer(status=400, body=exhausted))
        self.provider = provider
        self.calls = 0

    def call(self, name: str, arguments: dict[str, Any], tokens: int = QUIET_TOKENS) -> str:
        """Queue a one-tool-call answer; return its toolCallId."""
        self.calls += 1
        if self.provider == OPENAI:
            call_id = f"call_e2e_{self.calls}"
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
            self.answer(body=_openai_reply(message, "tool_calls", tokens))
        else:
            call_id = f"toolu_e2e_{self.calls}"
            block = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
            self.answer(body=_anthropic_reply([block], "tool_use", tokens))
        return call_id

    def text(self, text: str, tokens: int = QUIET_TOKENS) -> None:
        if self.provider == OPENAI:
            message = {"role": "assistant", "content": text}
            self.answer(body=_openai_reply(message, "stop", tokens))
        else:
            self.answer(body=_anthropic_reply([{"type": "text", "text": text}], "end_turn", tokens))

    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.received]


def _openai_reply(message: dict, finish: str, tokens: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-e2e",
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": "gpt-e2e",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": tokens, "completion_tokens": 9, "total_tokens": tokens + 9},
    }


def _anthropic_reply(content: list, stop: str, tokens: int) -> dict[str, Any]:
    return {
        "id": "msg_e2e",
        "type": "message",
        "role": "assistant",
        "model": "claude-e2e",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": tokens, "output_tokens": 9},
    }


@pytest.fixture
def fake_model(request) -> Iterator[ScriptedAPI]:
    """A recording fake of the case's provider on 127.0.0.1 (a free port)."""
    with serve_api(ScriptedAPI(provider=request.node.callspec.params["provider"])) as api:
        yield api


# --------------------------------------------------------------------------- session set-up


def publish(application, name, fields, **binding):
    agent = agent_create(application=application, name=name)
    return agent_version_publish(
        version=agent_version_create(agent=agent, fields=fields, **binding)
    )


@dataclass
class Case:
    provider: str
    protocol: str
    version: int
    options: dict[str, Any]
    session_id: str
    client: KeyClient
    api: ScriptedAPI
    worker: Worker
    extra_snapshots: set = field(default_factory=set)
    restored_view: ProjectionSnapshot | None = None

    @property
    def placement(self) -> str | None:
        """Where the state message goes: None (no state message), or a v3+ placement."""
        if self.protocol == "prefix" or self.version == 1:
            return None
        default = catalog.get_version(self.protocol, self.version).defaults.get(
            "stateMessagePlacement", "trailing_assistant"
        )
        return self.options.get("stateMessagePlacement", default)

    def path(self, tail: str = "") -> str:
        return f"sessions/{self.session_id}/{tail}"

    def start_run(self, content: str) -> str:
        response = self.client.post(self.path("inputs/"), {"content": content})
        assert response.status_code == 201, response.content
        return response.json()["runId"]

    def host_result(self, call_id: str, content: str) -> dict:
        response = self.client.post(
            self.path("messages/"),
            {"role": "tool", "kind": "tool_result", "content": content, "toolCallId": call_id},
        )
        assert response.status_code == 201, response.content
        return response.json()

    def wait_run(self, run_id: str, statuses: tuple[str, ...], timeout: float = 90) -> Run:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.worker.require()
            run = Run.objects.get(pk=run_id)
            if run.status in statuses:
                return run
            if run.status in ("completed", "failed", "max_turns_reached"):
                break
            time.sleep(0.1)
        run = Run.objects.get(pk=run_id)
        raise AssertionError(
            f"run {run_id} is {run.status} (wanted {statuses}); error {run.error}; "
            f"{len(self.api.received)} model calls\nworker log:\n{self.worker.tail()}"
        )

    def view(self):
        """A fresh view in this case's provider shape (not one a model was sent)."""
        snapshot = projection_build(
            session_id=self.session_id, provider=self.provider, use_cache=False
        )
        self.extra_snapshots.add(snapshot.id)
        return snapshot

    def runtime_snapshots(self) -> list[ProjectionSnapshot]:
        return [
            s
            for s in ProjectionSnapshot.objects.filter(session_id=self.session_id).order_by(
                "created_at"
            )
            if s.id not in self.extra_snapshots
        ]

    def kv(self) -> dict[str, Any]:
        return dict(KVEntry.objects.filter(session_id=self.session_id).values_list("key", "value"))

    def dispatch_again(self, call_id: str) -> dict:
        response = self.client.post(self.path(f"tool-calls/{call_id}/dispatch/"))
        assert response.status_code == 200, response.content
        return response.json()

    def session(self) -> dict:
        return self.client.get(self.path()).json()


@pytest.fixture
def make_case(db, e2e_worker: Worker, fake_model: ScriptedAPI, monkeypatch):
    def build(protocol: str, version: int, options: dict[str, Any]) -> Case:
        e2e_worker.require()

        app.control.purge()  # nothing a previous case left behind runs against this one
        monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)
        provider = fake_model.provider
        application, app_key = application_create(name=f"e2e-{protocol}{version}-{provider}")
        lookup = Tool.objects.create(
            application=application,
            name=HOST_TOOL,
            description="Look up a price or a stock level.",
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        )
        maintainer = publish(
            application,
            "context-maintainer",
            {
                "system_prompt": "Write checkpoints.",
                "context_protocol_id": "prefix",
                "context_protocol_version": 2,
                "model_provider": "scripted",
                "model_name": "maintainer",
                "max_input_tokens": 8000,
                "model_config": scenario.maintainer_script(),
            },
        )
        if provider == OPENAI:
            model = {"model_provider": "openai", "model_name": "gpt-e2e"}
            config = {"baseUrl": fake_model.url + "/v1", "apiKeyEnv": FAKE_KEY_ENV}
        else:
            model = {"model_provider": "anthropic", "model_name": "claude-e2e"}
            config = {"baseUrl": fake_model.url, "apiKeyEnv": FAKE_KEY_ENV}
        version_row = publish(
            application,
            "quote-assistant",
            {
                "system_prompt": "You are ACME's quote assistant.\n{{context_protocol}}",
                "context_protocol_id": protocol,
                "context_protocol_version": version,
                "options": options,
                **model,
                "max_input_tokens": MAX_INPUT_TOKENS,
                "maintenance_trigger_ratio": TRIGGER_RATIO,
                "model_config": config,
                "max_turns_per_run": 12,
            },
            tool_ids=[lookup.id],
            maintainer_agent_id=maintainer.agent_id,
        )
        created = KeyClient(app_key).post(
            "sessions/", {"agentVersionId": str(version_row.id), "inputs": SESSION_INPUTS}
        )
        assert created.status_code == 201, created.content
        body = created.json()
        return Case(
            provider=provider,
            protocol=protocol,
            version=version,
            options=options,
            session_id=body["id"],
            client=KeyClient(body["sessionKey"]),
            api=fake_model,
            worker=e2e_worker,
        )

    return build


# --------------------------------------------------------------------------- request shapes


def _split_marker(text: str) -> tuple[bool, str]:
    if text.startswith(DERIVED_EDGE_MARKER):
        return True, text[len(DERIVED_EDGE_MARKER) :]
    return False, text


# A text block that may carry a breakpoint (shape's vocabulary): history, not a header or
# state, and not edge text (a marked fold at the start of a view is user text by the edge
# rule, and the adapter keeps markers off edge text).
HISTORY_TEXT = {"input", "text", "fold"}


def _what(text: str, role: str) -> str:
    """What a text is: header / state / fold / input / text (marked: sent as user text)."""
    marked, text = _split_marker(text)
    if text.startswith(HEADER_LEAD):
        what = "header"
    elif text.startswith(STATE_LEAD):
        what = "state"
    elif text.startswith("[context_fold "):
        what = "fold"
    else:
        what = "input" if role == "user" else "text"
    return f"marked {what}" if marked else what


def _result_what(name: str, content: str, is_error: bool | None) -> str:
    """`name->ok`, `name->error_code` for protocol tools, `name->result` for host tools,
    `name->masked` for a unified@4 stub standing in for either."""
    if content.startswith("[tool result #") and " masked: " in content:
        return f"{name}->masked"
    if name not in catalog.PROTOCOL_TOOL_NAMES:
        assert not is_error
        return f"{name}->result"
    result = json.loads(content)
    if is_error is not None:  # anthropic says it in the block; it must agree with the result
        assert is_error is (not result["success"]), (is_error, result)
    return f"{name}->ok" if result["success"] else f"{name}->{result['error']['code']}"


def shape(body: dict[str, Any], provider: str) -> list:
    """The request as (role, what) per message (openai) or (role, [what per block])."""
    names: dict[str, str] = {}
    out: list = []
    for message in body["messages"]:
        role = message["role"]
        if provider == OPENAI:
            if message.get("tool_calls"):
                assert message["content"] is None
                for call in message["tool_calls"]:
                    names[call["id"]] = call["function"]["name"]
                called = ",".join(c["function"]["name"] for c in message["tool_calls"])
                out.append((role, f"call:{called}"))
            elif role == "tool":
                name = names[message["tool_call_id"]]
                out.append((role, _result_what(name, message["content"], None)))
            else:
                assert isinstance(message["content"], str), message
                out.append(
                    (role, "system" if role == "system" else _what(message["content"], role))
                )
        else:
            blocks = []
            for block in message["content"]:
                if block["type"] == "tool_use":
                    names[block["id"]] = block["name"]
                    blocks.append(f"call:{block['name']}")
                elif block["type"] == "tool_result":
                    name = names[block["tool_use_id"]]
                    blocks.append(_result_what(name, block["content"], block["is_error"]))
                else:
                    assert block["type"] == "text", block
                    blocks.append(_what(block["text"], role))
            out.append((role, blocks))
    return out


def assert_pairing(body: dict[str, Any], provider: str) -> None:
    """Every call answered right after it, in the provider's own way; no result without one."""
    messages = body["messages"]
    if provider == OPENAI:
        # Chat Completions: an assistant message with tool_calls, then one tool message per
        # call, immediately, before anything else.
        answered: set[str] = set()
        for i, message in enumerate(messages):
            if message.get("tool_calls"):
                ids = [c["id"] for c in message["tool_calls"]]
                following = messages[i + 1 : i + 1 + len(ids)]
                assert [m["role"] for m in following] == ["tool"] * len(ids), (i, following)
                assert sorted(m["tool_call_id"] for m in following) == sorted(ids)
                answered.update(ids)
            elif message["role"] == "tool":
                assert message["tool_call_id"] in answered, f"result without a call at {i}"
        return
    # Messages: roles alternate; an assistant turn's tool_use blocks are answered by
    # tool_result blocks at the start of the very next (user) message.
    assert messages[0]["role"] == "user"
    for i, message in enumerate(messages):
        if i:
            assert message["role"] != messages[i - 1]["role"], f"two {message['role']} turns"
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        if message["role"] == "assistant" and uses:
            answer = messages[i + 1]["content"]
            head = [b["tool_use_id"] for b in answer[: len(uses)] if b["type"] == "tool_result"]
            assert head == uses, (i, answer)
        if message["role"] == "user":
            results = [b for b in message["content"] if b["type"] == "tool_result"]
            if results:
                before = messages[i - 1]["content"]
                issued = {b["id"] for b in before if b["type"] == "tool_use"}
                assert {b["tool_use_id"] for b in results} <= issued


def assert_breakpoints(body: dict[str, Any]) -> None:
    """Anthropic prompt caching (contract §8): at most four markers, one on the last tool and
    one on the system prompt; in the messages one on the last history block (never on a
    header, a state or a prefill) and at most one earlier."""
    tools = [i for i, t in enumerate(body["tools"]) if "cache_control" in t]
    assert tools == [len(body["tools"]) - 1]
    system = [b for b in body["system"] if "cache_control" in b]
    messages = body["messages"]
    blocks = [
        (m, block)
        for m, message in enumerate(messages)
        for block in message["content"]
        if not (m == len(messages) - 1 and message["role"] == "assistant")  # a prefill
    ]
    history = [
        (m, block)
        for m, block in blocks
        if block["type"] != "text" or _what(block["text"], messages[m]["role"]) in HISTORY_TEXT
    ]
    marked = [block for _m, block in history if "cache_control" in block]
    all_marked = [b for m in messages for b in m["content"] if "cache_control" in b]
    assert marked == all_marked  # nothing derived and no prefill carries one
    assert 1 <= len(marked) <= 2 and len(tools) + len(system) + len(marked) <= 4
    assert marked[-1] is history[-1][1]


def derived_json(text: str) -> dict[str, Any]:
    """The JSON body of a header or state text (after its lead line and any edge marker)."""
    _, text = _split_marker(text)
    return json.loads(text.split("\n", 1)[1])


def texts_of(body: dict[str, Any], what: str) -> list[str]:
    """Every text block / message content whose kind is `what` (header, state, fold)."""
    found = []
    for message in body["messages"]:
        content = message.get("content")
        parts = (
            [b.get("text", "") for b in content if b.get("type") == "text"]
            if isinstance(content, list)
            else [content or ""]
        )
        found += [p for p in parts if _what(p, message["role"]).split(" ")[-1] == what]
    return found


def history_core(body: dict[str, Any], provider: str) -> list:
    """The history of a request without system, header, state and user inputs."""
    skip = {"system", "header", "state", "input", "marked header", "marked state"}
    described = shape(body, provider)
    if provider == OPENAI:
        core = [
            (d, m) for d, m in zip(described, body["messages"], strict=True) if d[1] not in skip
        ]
        return [m for _, m in core]
    # Blocks, without the roles: a fold that became the first message of the view (the
    # earlier run's input before it is no longer shown) travels as marked user text (the
    # edge rule of the adapter), the same note as in the middle of the history.
    # Cache breakpoints sit on the last history blocks of each request, so they move as
    # the history grows; assert_breakpoints checks them per request.
    flat = []
    for whats, message in zip((w for _, w in described), body["messages"], strict=True):
        for what, block in zip(whats, message["content"], strict=True):
            if what not in skip:
                block = {k: v for k, v in block.items() if k != "cache_control"}
                if block["type"] == "text":
                    block = {**block, "text": _split_marker(block["text"])[1]}
                flat.append(block)
    return flat


# --------------------------------------------------------------------------- expected shapes


def expected_openai(placement: str | None, history: list[tuple[str, str]]) -> list:
    """system → header → (B: state) → history → (A: assistant state | C: user state)."""
    out = [("system", "system"), ("assistant", "header")]
    if placement == "before_history_assistant":
        out.append(("assistant", "state"))
    out += history
    if placement == "trailing_assistant":
        out.append(("assistant", "state"))
    elif placement == "trailing_user":
        out.append(("user", "state"))
    return out


def expected_anthropic(placement: str | None, first_user: list[str], turns: list) -> list:
    """The header (and a leading state) become marked user text merged with the first user
    turn; a trailing assistant state becomes marked user text (no prefill), a trailing user
    state stays plain user text; either merges into the last user turn."""
    head = ["marked header"]
    if placement == "before_history_assistant":
        head.append("marked state")
    out = [("user", head + first_user), *[(role, list(blocks)) for role, blocks in turns]]
    trailing = {"trailing_assistant": "marked state", "trailing_user": "state"}.get(placement)
    if trailing:
        assert out[-1][0] == "user"
        out[-1] = ("user", [*out[-1][1], trailing])
    return out


# --------------------------------------------------------------------------- unified@1/2/3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("mapping", list(UNIFIED_MAPPINGS))
def test_unified_roundtrip(e2e_worker, make_case, fake_model, mapping, provider):
    e2e_worker.require()
    protocol, version, options = UNIFIED_MAPPINGS[mapping]
    case = make_case(protocol, version, options)
    api = fake_model
    guarded = version >= 2  # v2+: expectedWindowId is a required guard (contract §5)

    def guard(window: str) -> dict[str, str]:
        return {"expectedWindowId": window} if guarded else {}

    # ---- run 1: the script of the model's answers, one per model call.
    open_call = api.call(
        "context_window_open",
        {
            "purpose": "separate the quote task",
            "windowId": "quote",
            "goal": "Quote for 3 laptops",
            "input": HANDOFF,
            **guard("main"),
        },
    )
    lookup_call = api.call(HOST_TOOL, {"q": "laptop price"})
    # The model names the window it left. v2+: the guard refuses it (context_window_mismatch).
    # unified@1 has no guard: expectedWindowId is not one of its arguments, so the same call
    # is refused as invalid_arguments naming it; without it, v1 would write to whatever
    # window is active (the hazard the v2 guard exists for).
    wrong_call = api.call(
        "context_window_memory_set",
        {"purpose": "note the price", "memory": MEMORY, "expectedWindowId": "main"},
    )
    memory_call = api.call(
        "context_window_memory_set",
        {"purpose": "note the price", "memory": MEMORY, **guard("quote")},
    )
    fold_call = api.call(
        "context_fold_create",
        {
            "purpose": "fold the finished lookup",
            "fromIndex": 4,
            "throughIndex": 5,
            "summary": FOLD_SUMMARY,
            **guard("quote"),
        },
    )
    api.text("Quote: 3 laptops at 1300 EUR = 3900 EUR, within the budget.")
    fold_id = fold_id_for(fold_call)

    run_1 = case.start_run(RUN_1)  # #1
    case.wait_run(run_1, ("waiting_for_host_tool",))
    # The host call #4 is pending: archive the whole log (the pending call goes cold), then
    # its result arrives, joins the call's window and resumes the run from cold storage.
    before_archive = [
        m.to_wire() for m in log_page(case.session_id, window_id=None, after_index=0, limit=100)
    ]
    assert [m["index"] for m in before_archive] == [1, 2, 3, 4]
    assert len(archive_session(session_id=case.session_id, keep_last=0, chunk_size=2)) == 2
    assert not Message.objects.filter(session_id=case.session_id).exists()
    result = case.host_result(lookup_call, PRICE_RESULT)  # #5
    assert (result["index"], result["windowId"]) == (5, "quote")
    case.wait_run(run_1, ("completed",))

    bodies = api.bodies()
    assert len(bodies) == 6
    receipts = {
        r.tool_call_id: r.result for r in ToolReceipt.objects.filter(session_id=case.session_id)
    }
    assert receipts[open_call]["success"] is True
    wrong = receipts[wrong_call]["error"]
    if guarded:
        assert wrong["code"] == "context_window_mismatch"
        assert wrong["currentWindowId"] == "quote" and wrong["stateRevision"] >= 1
    else:
        assert wrong["code"] == "invalid_arguments" and "expectedWindowId" in wrong["message"]
    assert receipts[memory_call]["success"] is True
    # The refused write changed nothing (its receipt keeps the revision the open left); the
    # correction and the fold each committed one revision.
    revisions = dict(
        ToolReceipt.objects.filter(session_id=case.session_id).values_list(
            "tool_call_id", "state_revision"
        )
    )
    opened = revisions[open_call]
    assert [revisions[c] for c in (wrong_call, memory_call, fold_call)] == [
        opened,
        opened + 1,
        opened + 2,
    ]
    if guarded:
        assert wrong["stateRevision"] == opened
    created = receipts[fold_call]
    assert (created["success"], created["foldId"]) == (True, fold_id), created
    assert (created["firstIndex"], created["lastIndex"]) == (4, 5)

    # Turn 3 ran after the archive: the cold call and the hot result are one pair.
    error_code = "context_window_mismatch" if guarded else "invalid_arguments"
    placement = case.placement
    if provider == OPENAI:
        assert shape(bodies[2], provider) == expected_openai(
            placement,
            [
                ("user", "input"),
                ("assistant", f"call:{HOST_TOOL}"),
                ("tool", f"{HOST_TOOL}->result"),
            ],
        )
        # The last request of run 1: the fold stands where the lookup was; the refused
        # write and its correction stay paired and visible.
        assert shape(bodies[5], provider) == expected_openai(
            placement,
            [
                ("user", "input"),
                ("assistant", "fold"),
                ("assistant", "call:context_window_memory_set"),
                ("tool", f"context_window_memory_set->{error_code}"),
                ("assistant", "call:context_window_memory_set"),
                ("tool", "context_window_memory_set->ok"),
                ("assistant", "call:context_fold_create"),
                ("tool", "context_fold_create->ok"),
            ],
        )
    else:
        assert shape(bodies[2], provider) == expected_anthropic(
            placement,
            ["input"],
            [("assistant", [f"call:{HOST_TOOL}"]), ("user", [f"{HOST_TOOL}->result"])],
        )
        assert shape(bodies[5], provider) == expected_anthropic(
            placement,
            ["input"],
            [
                ("assistant", ["fold", "call:context_window_memory_set"]),
                ("user", [f"context_window_memory_set->{error_code}"]),
                ("assistant", ["call:context_window_memory_set"]),
                ("user", ["context_window_memory_set->ok"]),
                ("assistant", ["call:context_fold_create"]),
                ("user", ["context_fold_create->ok"]),
            ],
        )
    # Turn 1 (main window, nothing but the input yet) and the window switch it made.
    first_history = [("user", "input")]
    if provider == OPENAI:
        assert shape(bodies[0], provider) == expected_openai(placement, first_history)
    else:
        assert shape(bodies[0], provider) == expected_anthropic(placement, ["input"], [])
    for body in bodies:
        assert_pairing(body, provider)
    _assert_request_basics(case, bodies)

    # Header and state content, as each mapping renders them.
    header_0, header_5 = (derived_json(texts_of(b, "header")[0]) for b in (bodies[0], bodies[5]))
    raw_header_5 = texts_of(bodies[5], "header")[0]
    if version == 1:
        assert list(header_5) == [
            "agent_inputs",
            "task_memory",
            "active_window",
            "working_checkpoint",
        ]
        assert "Zo\\u00eb Caf\\u00e9" in raw_header_5  # v1 escapes non-ASCII
        window_key, checkpoint_key = "active_window", "working_checkpoint"
    else:
        assert list(header_5) == [
            "inputs",
            "task_memory",
            "current_window",
            "current_window_checkpoint",
        ]
        assert "Zoë Café" in raw_header_5
        window_key, checkpoint_key = "current_window", "current_window_checkpoint"
    assert header_0[window_key]["id"] == "main"
    assert header_5[window_key]["id"] == "quote"
    assert header_5[window_key]["goal"] == "Quote for 3 laptops"
    assert header_5[window_key]["memory"] == MEMORY
    assert header_5[checkpoint_key] is None
    snapshots = case.runtime_snapshots()
    if placement is None:
        assert all(not texts_of(b, "state") for b in bodies)  # v1: no state message
    else:
        (state_text,) = texts_of(bodies[5], "state")
        state = derived_json(state_text)
        assert state["windowId"] == "quote" and state["enteredFrom"] == "main"
        assert state["revision"] == snapshots[5].revision
        assert state["handoffInput"] == HANDOFF
        assert state["checkpointPosition"] == 0
        assert state["lastToolName"] == "context_fold_create"
    (fold_text,) = texts_of(bodies[5], "fold")
    assert f"[context_fold {fold_id}] Window 'quote', messages #4-#5" in fold_text
    assert FOLD_SUMMARY in fold_text and PRICE_RESULT not in json.dumps(bodies[5])

    # ---- receipt replay over HTTP: same receipt, nothing written (errors are receipts too).
    before = case.session()
    for call_id in (fold_call, wrong_call, open_call):
        again = case.dispatch_again(call_id)
        assert again["replayed"] is True and again["toolCallId"] == call_id
        assert again["result"] == receipts[call_id]
        assert again["resultMessage"]["toolCallId"] == call_id
    after = case.session()
    assert (after["lastIndex"], after["stateRevision"]) == (
        before["lastIndex"],
        before["stateRevision"],
    )
    assert after["lastIndex"] == 12
    # A host call is not the dispatcher's: its id is refused, not executed.
    refused = case.client.post(case.path(f"tool-calls/{lookup_call}/dispatch/"))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "not_a_protocol_tool"

    # #1-#4 are cold since the pending call; #5-#12 are hot: two chunks of four.
    _archive_restore_same_view(case, before_archive, chunk_size=4)

    # ---- run 2: provider-reported tokens cross the trigger → independent maintenance.
    stock_call = api.call(HOST_TOOL, {"q": "laptop stock"}, tokens=TRIGGER_TOKENS)
    read_call = api.call("context_fold_read", {"purpose": "re-check the price", "foldId": fold_id})
    api.text("Confirmed: 3900 EUR, within the new budget of 9000.")
    run_2 = case.start_run(RUN_2)  # #13, in window quote
    case.wait_run(run_2, ("waiting_for_host_tool",))
    job = _wait_job(case)
    # No recent tail kept: everything of quote up to the input #13 (the last group below
    # the pending call #14) is compressed; the fold #4-#5 lies inside.
    assert (job.window_id, job.from_index, job.through_index) == ("quote", 1, 13)
    kv = case.kv()
    assert kv["checkpoint/quote"] == CHECKPOINT and kv["coveredThrough/quote"] == 13
    folds = case.client.get(case.path("folds/")).json()["folds"]
    assert [(f["foldId"], f["compressed"]) for f in folds] == [(fold_id, True)]
    case.host_result(stock_call, STOCK_RESULT)  # #15
    case.wait_run(run_2, ("completed",))

    bodies = api.bodies()
    assert len(bodies) == 9
    # The view after the commit: the checkpoint in the header, the fold and the compressed
    # history gone, the run's input still shown (input protection), then the new pair.
    if provider == OPENAI:
        assert shape(bodies[7], provider) == expected_openai(
            placement,
            [
                ("user", "input"),
                ("assistant", f"call:{HOST_TOOL}"),
                ("tool", f"{HOST_TOOL}->result"),
            ],
        )
    else:
        assert shape(bodies[7], provider) == expected_anthropic(
            placement,
            ["input"],
            [("assistant", [f"call:{HOST_TOOL}"]), ("user", [f"{HOST_TOOL}->result"])],
        )
    assert derived_json(texts_of(bodies[7], "header")[0])[checkpoint_key] == CHECKPOINT
    assert not texts_of(bodies[7], "fold")
    assert RUN_2 in json.dumps(bodies[7], ensure_ascii=False)
    assert RUN_1 not in json.dumps(bodies[7], ensure_ascii=False)  # an earlier run's input
    if placement is not None:
        state = derived_json(texts_of(bodies[7], "state")[0])
        assert state["checkpointPosition"] == 13 and state["lastToolName"] == HOST_TOOL
    # Fold read-back after compression: the raw lookup, from the log, not the summary.
    read = ToolReceipt.objects.get(session_id=case.session_id, tool_call_id=read_call).result
    assert read["success"] is True and read["foldId"] == fold_id, read
    assert read["nextCursor"] is None and read["totalLength"] == len(read["text"])
    raw = json.loads(read["text"])
    assert [(m["index"], m["kind"], m["windowId"]) for m in raw] == [
        (4, "tool_call", "quote"),
        (5, "tool_result", "quote"),
    ]
    assert raw[1]["content"] == PRICE_RESULT
    # The read's result reached the model, paired with its call.
    if provider == OPENAI:
        assert shape(bodies[8], provider) == expected_openai(
            placement,
            [
                ("user", "input"),
                ("assistant", f"call:{HOST_TOOL}"),
                ("tool", f"{HOST_TOOL}->result"),
                ("assistant", "call:context_fold_read"),
                ("tool", "context_fold_read->ok"),
            ],
        )
    else:
        assert shape(bodies[8], provider) == expected_anthropic(
            placement,
            ["input"],
            [
                ("assistant", [f"call:{HOST_TOOL}"]),
                ("user", [f"{HOST_TOOL}->result"]),
                ("assistant", ["call:context_fold_read"]),
                ("user", ["context_fold_read->ok"]),
            ],
        )
    # After archive + restore the next turn saw the same history as the view before.
    assert history_core(bodies[6], provider) == history_core(case.restored_view.request, provider)
    for body in bodies:
        assert_pairing(body, provider)
    _assert_request_basics(case, bodies)
    kv = case.kv()
    assert kv["activeWindow"] == "quote" and kv["window/quote"]["memory"] == MEMORY
    assert kv["window/main"]["memory"] == ""  # the write naming main changed nothing there


def _assert_request_basics(case: Case, bodies: list[dict[str, Any]]) -> None:
    """What the SDK sent is the stored request of the turn; tools, model and headers."""
    snapshots = case.runtime_snapshots()
    assert len(snapshots) == len(bodies)
    protocol = catalog.get_version(case.protocol, case.version)
    tool_names = [*protocol.tools, HOST_TOOL]
    for body, snapshot, received in zip(bodies, snapshots, case.api.received, strict=True):
        assert snapshot.provider == case.provider
        assert body["messages"] == snapshot.request["messages"]
        if case.provider == OPENAI:
            assert received.path == "/v1/chat/completions"
            assert received.headers["authorization"] == f"Bearer {FAKE_KEY}"
            assert body["model"] == "gpt-e2e"
            assert [t["function"]["name"] for t in body["tools"]] == tool_names
            schemas = {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
            # The default promptCache (auto): the session's routing key, no markers.
            assert body["prompt_cache_key"] == session_cache_key(case.session_id)
            assert body["prompt_cache_key"] == snapshot.request["prompt_cache_key"]
            assert "cache_control" not in json.dumps(body)
        else:
            assert received.path == "/v1/messages"
            assert received.headers["x-api-key"] == FAKE_KEY
            assert "anthropic-version" in received.headers
            assert body["model"] == "claude-e2e" and body["max_tokens"] == 4096
            assert body["system"] == snapshot.request["system"]
            # The default promptCache (auto): the system prompt is one marked text block.
            assert [b["type"] for b in body["system"]] == ["text"]
            assert body["system"][0]["text"].startswith("You are ACME's quote assistant.\n")
            assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
            assert not any(m["role"] == "system" for m in body["messages"])
            assert [t["name"] for t in body["tools"]] == tool_names
            assert body["tools"] == snapshot.request["tools"]
            schemas = {t["name"]: t["input_schema"] for t in body["tools"]}
            assert_breakpoints(body)
        if case.protocol == "unified":
            memory_set = schemas["context_window_memory_set"]
            guarded = "expectedWindowId" in memory_set["required"]
            assert guarded is (case.version >= 2)
            assert ("expectedWindowId" in memory_set["properties"]) is guarded


def _wait_job(case: Case, timeout: float = 90) -> MaintenanceJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        case.worker.require()
        job = MaintenanceJob.objects.filter(
            session_id=case.session_id, status__in=["committed", "failed", "rejected"]
        ).first()
        if job is not None:
            assert job.status == "committed", (job.status, job.reason, case.worker.tail())
            assert job.trigger == "input_tokens"
            return job
        time.sleep(0.1)
    jobs = list(MaintenanceJob.objects.filter(session_id=case.session_id).values())
    raise AssertionError(f"no maintenance job finished: {jobs}\n{case.worker.tail()}")


def _archive_restore_same_view(case: Case, first_messages: list[dict], chunk_size: int) -> None:
    """Archive the whole log, then restore it: the view is the same before, cold and after;
    ids, indices, windows and pairing come back (the call archived while pending included)."""
    log_before = [
        m.to_wire() for m in log_page(case.session_id, window_id=None, after_index=0, limit=100)
    ]
    assert log_before[: len(first_messages)] == first_messages
    hot = case.view()
    # Whole chunks only move (no slivers): chunk_size divides the number of hot messages.
    chunks = archive_session(session_id=case.session_id, keep_last=0, chunk_size=chunk_size)
    assert chunks and not Message.objects.filter(session_id=case.session_id).exists()
    cold = case.view()
    restored = restore_session(session_id=case.session_id)
    assert restored == len(log_before)
    assert not ArchiveChunk.objects.filter(session_id=case.session_id).exists()
    again = case.view()
    for view in (cold, again):
        assert view.request == hot.request
        assert view.sources == hot.sources
        assert (view.revision, view.upper_bound, view.window_id) == (
            hot.revision,
            hot.upper_bound,
            hot.window_id,
        )
    rows = list(Message.objects.filter(session_id=case.session_id).order_by("index"))
    assert [str(r.id) for r in rows] == [m["id"] for m in log_before]
    assert [(r.index, r.window_id) for r in rows] == [
        (m["index"], m["windowId"]) for m in log_before
    ]
    calls = {r.tool_call_id for r in rows if r.kind == "tool_call"}
    assert calls == {r.tool_call_id for r in rows if r.kind == "tool_result"}
    case.restored_view = hot


# --------------------------------------------------------------------------- prefix@2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_prefix_roundtrip(e2e_worker, make_case, fake_model, provider):
    e2e_worker.require()
    case = make_case("prefix", 2, {})
    api = fake_model

    lookup_call = api.call(HOST_TOOL, {"q": "laptop price"})
    # prefix@2 exposes no context tools and has no windows, so there is no wrong window to
    # name: a model that calls a context tool anyway gets an error receipt (tool_unknown),
    # and the session goes on.
    stray_call = api.call(
        "context_window_memory_set", {"purpose": "note the price", "memory": MEMORY}
    )
    api.text("Quote: 3 laptops at 1300 EUR = 3900 EUR, within the budget.")

    run_1 = case.start_run(RUN_1)  # #1
    case.wait_run(run_1, ("waiting_for_host_tool",))
    before_archive = [
        m.to_wire() for m in log_page(case.session_id, window_id=None, after_index=0, limit=100)
    ]
    assert [(m["index"], m["windowId"]) for m in before_archive] == [(1, "main"), (2, "main")]
    assert archive_session(session_id=case.session_id, keep_last=0, chunk_size=1)
    assert not Message.objects.filter(session_id=case.session_id).exists()
    assert case.host_result(lookup_call, PRICE_RESULT)["index"] == 3
    case.wait_run(run_1, ("completed",))

    bodies = api.bodies()
    assert len(bodies) == 3
    stray = ToolReceipt.objects.get(session_id=case.session_id, tool_call_id=stray_call).result
    assert stray["success"] is False and stray["error"]["code"] == "tool_unknown", stray
    # No state message, no windows: header (inputs + checkpoint) then the history.
    if provider == OPENAI:
        assert shape(bodies[2], provider) == expected_openai(
            None,
            [
                ("user", "input"),
                ("assistant", f"call:{HOST_TOOL}"),
                ("tool", f"{HOST_TOOL}->result"),
                ("assistant", "call:context_window_memory_set"),
                ("tool", "context_window_memory_set->tool_unknown"),
            ],
        )
    else:
        assert shape(bodies[2], provider) == expected_anthropic(
            None,
            ["input"],
            [
                ("assistant", [f"call:{HOST_TOOL}"]),
                ("user", [f"{HOST_TOOL}->result"]),
                ("assistant", ["call:context_window_memory_set"]),
                ("user", ["context_window_memory_set->tool_unknown"]),
            ],
        )
    for body in bodies:
        assert_pairing(body, provider)
        assert not texts_of(body, "state")
    header = derived_json(texts_of(bodies[2], "header")[0])
    assert header == {"agent_inputs": SESSION_INPUTS, "checkpoint": None}
    assert "Zoë Café" in texts_of(bodies[2], "header")[0]
    _assert_request_basics(case, bodies)

    # Receipt replay: the only protocol receipt prefix@2 can have is an error; it replays.
    before = case.session()
    again = case.dispatch_again(stray_call)
    assert again["replayed"] is True and again["result"] == stray
    after = case.session()
    # Nothing written by the replay; revision 1 is the session's initial state, and the
    # refused context tool changed nothing since.
    assert (before["lastIndex"], before["stateRevision"]) == (6, 1)
    assert (after["lastIndex"], after["stateRevision"]) == (6, 1)

    # #1-#2 are cold since the pending call; #3-#6 are hot: two chunks of two.
    _archive_restore_same_view(case, before_archive, chunk_size=2)

    # Run 2: maintenance of the single window main. prefix@2 has no folds, so "fold
    # read-back" becomes: the compressed raw messages stay readable in the log, while the
    # model sees only the checkpoint and the uncompressed tail.
    stock_call = api.call(HOST_TOOL, {"q": "laptop stock"}, tokens=TRIGGER_TOKENS)
    api.text("Confirmed: 3900 EUR, within the new budget of 9000.")
    run_2 = case.start_run(RUN_2)  # #7
    case.wait_run(run_2, ("waiting_for_host_tool",))
    job = _wait_job(case)
    assert (job.window_id, job.from_index, job.through_index) == ("main", 1, 7)
    kv = case.kv()
    assert kv["checkpoint/main"] == CHECKPOINT and kv["coveredThrough/main"] == 7
    case.host_result(stock_call, STOCK_RESULT)  # #9
    case.wait_run(run_2, ("completed",))

    bodies = api.bodies()
    assert len(bodies) == 5
    if provider == OPENAI:
        assert shape(bodies[4], provider) == expected_openai(
            None,
            [
                ("user", "input"),
                ("assistant", f"call:{HOST_TOOL}"),
                ("tool", f"{HOST_TOOL}->result"),
            ],
        )
    else:
        assert shape(bodies[4], provider) == expected_anthropic(
            None,
            ["input"],
            [("assistant", [f"call:{HOST_TOOL}"]), ("user", [f"{HOST_TOOL}->result"])],
        )
    assert derived_json(texts_of(bodies[4], "header")[0]) == {
        "agent_inputs": SESSION_INPUTS,
        "checkpoint": CHECKPOINT,
    }
    assert PRICE_RESULT not in json.dumps(bodies[4])
    # After archive + restore the next turn saw the same history as the view before.
    assert history_core(bodies[3], provider) == history_core(case.restored_view.request, provider)
    log = case.client.get(case.path("messages/"), limit=50).json()["messages"]
    assert [m["index"] for m in log] == list(range(1, 11))
    assert log[2]["content"] == PRICE_RESULT  # compressed, still in the raw log
    _assert_request_basics(case, bodies)


# --------------------------------------------------------------------------- unified@4

# Mask early so that a short session shows it: keep the newest result, step 2, stub results
# longer than 200 characters.
V4_OPTIONS = {"maskKeepRecent": 1, "maskStep": 2, "maskMinChars": 200}
LOOKUPS = [
    json.dumps({"item": "laptop", "price": 1300, "notes": "price list " + "p" * 300}),
    json.dumps({"item": "laptop", "stock": 40, "notes": "stock list " + "s" * 300}),
    json.dumps({"item": "laptop", "delivery": "3 days", "notes": "routes " + "d" * 300}),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_unified4_roundtrip(e2e_worker, make_case, fake_model, provider):
    e2e_worker.require()
    case = make_case("unified", 4, V4_OPTIONS)
    api = fake_model
    assert case.placement == "trailing_user"  # unified@4's default

    # ---- run 1: three bulky host lookups, a read-back of the first, a memory write.
    lookups = [api.call(HOST_TOOL, {"q": q}) for q in ("price", "stock", "delivery")]
    read_call = api.call("context_history_read", {"purpose": "re-check the price", "index": 3})
    memory_call = api.call(
        "context_window_memory_set",
        {"purpose": "note the price", "memory": MEMORY, "expectedWindowId": "main"},
    )
    api.text("Quote: 3 laptops at 1300 EUR = 3900 EUR, delivery in 3 days.")

    run_1 = case.start_run(RUN_1)  # #1
    for n, call_id in enumerate(lookups):  # calls #2, #4, #6; results #3, #5, #7
        case.wait_run(run_1, ("waiting_for_host_tool",))
        if n == 2:
            # Archive the whole log while the third call is pending: the read-back of #3
            # below comes from cold storage.
            before_archive = [
                m.to_wire()
                for m in log_page(case.session_id, window_id=None, after_index=0, limit=100)
            ]
            assert [m["index"] for m in before_archive] == [1, 2, 3, 4, 5, 6]
            assert len(archive_session(session_id=case.session_id, keep_last=0, chunk_size=2)) == 3
            assert not Message.objects.filter(session_id=case.session_id).exists()
        assert case.host_result(call_id, LOOKUPS[n])["index"] == 3 + 2 * n
    case.wait_run(run_1, ("completed",))

    bodies = api.bodies()
    assert len(bodies) == 6
    for body in bodies:
        assert_pairing(body, provider)
    _assert_request_basics(case, bodies)

    def expect(history: list[tuple[str, str]]) -> list:
        if provider == OPENAI:
            return expected_openai("trailing_user", [("user", "input"), *history])
        turns = [(role, [what]) for role, what in history]
        return expected_anthropic("trailing_user", ["input"], turns)

    lookup_turns = [
        ("assistant", f"call:{HOST_TOOL}"),
        ("tool" if provider == OPENAI else "user", f"{HOST_TOOL}->masked"),
        ("assistant", f"call:{HOST_TOOL}"),
        ("tool" if provider == OPENAI else "user", f"{HOST_TOOL}->masked"),
        ("assistant", f"call:{HOST_TOOL}"),
    ]
    result = "tool" if provider == OPENAI else "user"
    # Turn 2: two results, the newest kept, one eligible: less than a step, nothing masked.
    assert shape(bodies[2], provider) == expect(
        [
            ("assistant", f"call:{HOST_TOOL}"),
            (result, f"{HOST_TOOL}->result"),
            ("assistant", f"call:{HOST_TOOL}"),
            (result, f"{HOST_TOOL}->result"),
        ]
    )
    # Turn 3: three results, two eligible: the first step masks both, each paired with its
    # call (the third result arrived after the archive: cold calls, hot result).
    assert shape(bodies[3], provider) == expect([*lookup_turns, (result, f"{HOST_TOOL}->result")])
    # Turn 4: the read-back's result is new, three eligible: still one step, nothing moves,
    # and the request only grew: the turn before's messages (all but its last, which holds
    # the state message) open this one unchanged.
    assert shape(bodies[4], provider) == expect(
        [
            *lookup_turns,
            (result, f"{HOST_TOOL}->result"),
            ("assistant", "call:context_history_read"),
            (result, "context_history_read->ok"),
        ]
    )
    kept = bodies[3]["messages"][:-1]
    assert bodies[4]["messages"][: len(kept)] == kept
    # Turn 5: four eligible: the second step masks the third lookup and the long read-back.
    assert shape(bodies[5], provider) == expect(
        [
            *lookup_turns,
            (result, f"{HOST_TOOL}->masked"),
            ("assistant", "call:context_history_read"),
            (result, "context_history_read->masked"),
            ("assistant", "call:context_window_memory_set"),
            (result, "context_window_memory_set->ok"),
        ]
    )
    if provider == OPENAI:
        results = [m["content"] for m in bodies[5]["messages"] if m["role"] == "tool"]
    else:
        results = [
            b["content"]
            for m in bodies[5]["messages"]
            for b in m["content"]
            if b["type"] == "tool_result"
        ]
    assert results[0] == (
        f"[tool result #3 of {HOST_TOOL} masked: {len(LOOKUPS[0])} characters; read it with "
        'context_history_read {"index": 3}]'
    )
    assert [r.startswith("[tool result #") for r in results] == [True] * 4 + [False]

    # The read-back: the raw message #3, from the archive, through the dispatcher.
    receipts = {
        r.tool_call_id: r.result for r in ToolReceipt.objects.filter(session_id=case.session_id)
    }
    read = receipts[read_call]
    assert read["success"] is True, read
    assert (read["index"], read["windowId"], read["nextCursor"]) == (3, "main", None)
    raw = json.loads(read["text"])
    assert (raw["index"], raw["kind"], raw["content"]) == (3, "tool_result", LOOKUPS[0])
    assert receipts[memory_call]["success"] is True

    # The header holds only rare state: the memory write between turns 4 and 5 left it as
    # it was; the state message carries the memory and the pressure.
    header_4, header_5 = (texts_of(b, "header")[0] for b in (bodies[4], bodies[5]))
    assert header_4 == header_5
    header = derived_json(header_5)
    assert list(header) == ["inputs", "task_memory", "current_window", "current_window_checkpoint"]
    assert header["current_window"] == {"id": "main", "goal": "Main conversation"}
    assert "Zoë Café" in header_5
    (state_text,) = texts_of(bodies[5], "state")
    state = derived_json(state_text)
    assert state["workingMemory"] == MEMORY and state["maskedToolResults"] == 4
    pressure = state["contextPressure"]
    assert (pressure["maxInputTokens"], pressure["triggerTokens"]) == (MAX_INPUT_TOKENS, 24000)
    assert pressure["maintenancePending"] is False
    assert 0 < pressure["viewTokens"] < MAX_INPUT_TOKENS
    assert "workingMemory" not in header_5 and MEMORY not in header_5

    # #1-#6 are cold since the pending call; #7-#12 are hot: two chunks of three. The view
    # (masked results included) is the same before, while cold and after the restore.
    _archive_restore_same_view(case, before_archive, chunk_size=3)

    # ---- run 2: usage crosses the trigger; maintenance summarises the raw log, not stubs.
    stock_call = api.call(HOST_TOOL, {"q": "laptop stock"}, tokens=TRIGGER_TOKENS)
    api.text("Confirmed: 3900 EUR, within the new budget of 9000.")
    run_2 = case.start_run(RUN_2)  # #13
    case.wait_run(run_2, ("waiting_for_host_tool",))
    job = _wait_job(case)
    assert (job.window_id, job.from_index, job.through_index) == ("main", 1, 13)
    assert case.kv()["checkpoint/main"] == CHECKPOINT
    case.host_result(stock_call, STOCK_RESULT)  # #15
    case.wait_run(run_2, ("completed",))

    bodies = api.bodies()
    assert len(bodies) == 8
    # After the commit: the checkpoint in the header, nothing left to mask.
    assert shape(bodies[7], provider) == expect(
        [("assistant", f"call:{HOST_TOOL}"), (result, f"{HOST_TOOL}->result")]
    )
    assert derived_json(texts_of(bodies[7], "header")[0])["current_window_checkpoint"] == (
        CHECKPOINT
    )
    state = derived_json(texts_of(bodies[7], "state")[0])
    assert state["checkpointPosition"] == 13 and state["maskedToolResults"] == 0
    for body in bodies:
        assert_pairing(body, provider)
    _assert_request_basics(case, bodies)
