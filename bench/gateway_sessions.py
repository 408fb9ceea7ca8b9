"""The sessions the gateway section's requests continue (bench/bench_gateway.py).

Two kinds. `prepare` builds sessions of 1k and 100k messages with bench_data's layout (a
200-message window above its checkpoint, folds, 50 windows: the view is the same ~200
messages at every size), one per path measured, so each path's records are its own.
`start_view_sessions` starts, through the gateway itself, sessions whose view holds a whole
conversation of ~1k, 10k, 50k and 100k tokens (no checkpoint: nothing in them ever asks the
protocol for one), and gives the same conversation to the LiteLLM client that resends it
whole, the fair peer of a client that sends only its new message (issue 38).
"""

from __future__ import annotations

import json
import random
import secrets
import time
from dataclasses import dataclass
from typing import Any

import bench_data
from gateway_setup import APPLICATION, GATEWAY_PATH, SIZES, VIEW_TOKENS, Client, Process

# A version's maxInputTokens for the view-size sessions: far above the largest view, so
# nothing is refused or reported over capacity.
VIEW_MAX_INPUT_TOKENS = 1_000_000
TURN_CHARS = 1_200  # one message of the conversations (issue 38's client message)


@dataclass
class GatewaySession:
    session_id: Any
    full_history: list[dict[str, Any]] | None = None  # the full-history client's messages


# The bench_data sessions of a run: (name, size, version). Each gateway path has its own.
BUILT = (
    ("gw1:incremental@1k", SIZES[0], "overhead"),
    ("gw1:incremental@100k", SIZES[1], "overhead"),
    ("gw1:full@1k", SIZES[0], "overhead"),
    ("gw1:protocol@1k", SIZES[0], "overhead"),
    ("gw1:responses@1k", SIZES[0], "overhead"),
    ("gw1:responses-upstream@1k", SIZES[0], "responses"),
    ("gw4:incremental@1k", SIZES[0], "overhead"),
    ("gw4:incremental@100k", SIZES[1], "overhead"),
    ("trace-off:incremental@1k", SIZES[0], "overhead"),
    ("trace-up:incremental@1k", SIZES[0], "overhead"),
    ("trace-down:incremental@1k", SIZES[0], "overhead"),
    ("gw1:stream@1k", SIZES[0], "overhead"),
    ("gw1:stream-responses@1k", SIZES[0], "overhead"),
)


def _openai_messages(items: Any) -> list[dict[str, Any]]:
    """A transcript as the OpenAI messages a client that kept everything holds."""
    from contextproto.protocol.messages import ROLE_ASSISTANT, ROLE_TOOL

    messages: list[dict[str, Any]] = []
    for item in items:
        if item.role == ROLE_ASSISTANT:
            message: dict[str, Any] = {"role": "assistant", "content": item.text or None}
            if item.calls:
                message["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in item.calls
                ]
            messages.append(message)
        elif item.role == ROLE_TOOL:
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.content})
        else:
            messages.append({"role": "user", "content": item.content})
    return messages


def transcript_messages(session_id: Any) -> list[dict[str, Any]]:
    """The session's whole transcript (contract §14) read off its log, as OpenAI messages."""
    from contextproto.protocol import catalog
    from contextproto.protocol.gateway.transcript import transcript_of_log
    from sessions_app.models import Session
    from sessions_app.reads import raw_log

    last = Session.objects.get(pk=session_id).last_index
    messages = raw_log.log_page(session_id, window_id=None, after_index=-1, limit=last + 1)
    transcript = transcript_of_log(messages, catalog.PROTOCOL_TOOL_NAMES, from_start=True)
    return _openai_messages(transcript.items)


def _version(name: str, config: dict[str, Any], **fields: Any) -> Any:
    from agents.models import AgentVersion

    version = bench_data.bench_version(APPLICATION, name, provider="openai")
    AgentVersion.objects.filter(pk=version.pk).update(
        model_config=config, model_provider="openai", **fields
    )
    version.refresh_from_db()
    return version


def prepare(fake_base: str, slow_base: str) -> dict[str, Any]:
    """The Application, its key, the versions and the fresh bench_data sessions of this run."""
    from django.utils import timezone

    from agents.models import Agent, ApiKey, Application
    from agents.selectors import gateway_model_name
    from agents.services import api_key_revoke, application_key_issue
    from sessions_app.models import Run
    from sessions_app.services.runs import runs_driven_here

    nonce = secrets.token_hex(4)
    application, _ = Application.objects.get_or_create(name=APPLICATION)
    # The keys of earlier runs are gone with their runs (only their hashes were kept).
    for stale in ApiKey.objects.filter(application=application, revoked_at__isnull=True):
        api_key_revoke(api_key=stale)
    key = application_key_issue(application=application)
    upstream = fake_base + "/v1"
    versions = {
        "overhead": _version("overhead", {"baseUrl": upstream}),
        "responses": _version("responses", {"baseUrl": upstream, "api": "responses"}),
        "views": _version("views", {"baseUrl": upstream}, max_input_tokens=VIEW_MAX_INPUT_TOKENS),
        "slow": _version("slow", {"baseUrl": slow_base + "/v1"}),
    }
    started = time.perf_counter()
    sessions: dict[str, GatewaySession] = {}
    # The sessions are written here; no worker may take the run each build starts.
    with runs_driven_here():
        for name, size, version in BUILT:
            built = bench_data.build_session(
                versions[version], size, nonce=f"gw-{nonce}-{name}", analyze=False
            )
            sessions[name] = GatewaySession(built.session_id)
        api = bench_data.build_session(versions["slow"], SIZES[0], nonce=f"gw-{nonce}-api")
    # The run each build started is over (as if a worker had driven it): a queued run would
    # make the session busy for the gateway.
    Run.objects.filter(
        session_id__in=[s.session_id for s in sessions.values()] + [api.session_id],
        status=Run.Status.QUEUED,
    ).update(status=Run.Status.COMPLETED, finished_at=timezone.now())
    full = sessions["gw1:full@1k"]
    full.full_history = transcript_messages(full.session_id)
    return {
        "key": key,
        "sessions": sessions,
        "api_session": api.session_id,
        "slow_model": Agent.objects.get(pk=versions["slow"].agent_id).name,
        "slow_version": versions["slow"].pk,
        "views_model": gateway_model_name(versions["views"]),
        "full_messages": len(full.full_history or []),
        "seconds": time.perf_counter() - started,
    }


# --------------------------------------------------------------------------- view sizes


def conversation(tokens: int, seed: int = bench_data.SEED) -> list[dict[str, Any]]:
    """User and assistant messages of TURN_CHARS characters each, alternating, about `tokens`
    tokens in all (chars / 4, the engine's estimate), ending with the assistant's."""
    rng = random.Random(f"{seed}:conversation:{tokens}")
    messages: list[dict[str, Any]] = []
    chars = 0
    while chars < tokens * 4 or not messages or messages[-1]["role"] != "assistant":
        role = "assistant" if messages and messages[-1]["role"] == "user" else "user"
        words: list[str] = []
        while len(" ".join(words)) < TURN_CHARS - 12:
            words.append(rng.choice(bench_data.WORDS))
        text = f"{role} {len(messages)}: " + " ".join(words)
        messages.append({"role": role, "content": text[:TURN_CHARS]})
        chars += TURN_CHARS
    return messages


def view_name(tokens: int) -> str:
    return f"{tokens // 1000}k"


def start_view_sessions(gateway: Process, prepared: dict[str, Any]) -> None:
    """One session per VIEW_TOKENS size, started by one gateway request that sends the whole
    conversation (the client's first request); the LiteLLM client's conversations (the same
    messages) beside them. Adds `view_sessions`, `view_conversations` to `prepared`."""
    client = Client(gateway.base, {"Authorization": f"Bearer {prepared['key']}"})
    sessions: dict[str, GatewaySession] = {}
    conversations: dict[str, list[dict[str, Any]]] = {}
    for tokens in VIEW_TOKENS:
        name = view_name(tokens)
        messages = conversation(tokens)
        first = {"role": "user", "content": f"Start of the {name} conversation."}
        status, headers, raw = client.request(
            "POST",
            GATEWAY_PATH,
            {"model": prepared["views_model"], "messages": [*messages, first]},
            timeout=120,
        )
        if status != 200:
            raise RuntimeError(f"the {name} view session did not start: {status} {raw[:300]!r}")
        sessions[name] = GatewaySession(headers["x-contextproto-session"])
        reply = json.loads(raw)["choices"][0]["message"]["content"]
        conversations[name] = [*messages, first, {"role": "assistant", "content": reply}]
    client.close()
    prepared["view_sessions"] = sessions
    prepared["view_conversations"] = conversations


def view_tokens(session_id: Any) -> int:
    """The estimated tokens (chars / 4) of the request the session's last turn sent upstream."""
    from contextproto.protocol.tokens import json_tokens
    from sessions_app.models import ProjectionSnapshot

    snapshot = (
        ProjectionSnapshot.objects.filter(session_id=session_id).order_by("-created_at").first()
    )
    return json_tokens(snapshot.request) if snapshot is not None else 0
