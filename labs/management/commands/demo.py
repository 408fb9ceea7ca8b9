"""`manage.py demo`: seed a demo Application, run the long story with the scripted model,
print a per-turn progress line, compare the token economy, and create the admin login.

The agents of `scenario.DEMO_VIEWS` (unified@2, unified@4 and their prefix@2 twin) work
through the same five tasks of an ACME sales desk (scenario.STORY: quotes, a delivery, a
resumed window), turn for turn. One more conversation goes through the gateway (contract §14)
with the official `openai` client, in process (its HTTP goes to Django's WSGI handler), and
the demo prints the gateway's base URL and a snippet that continues it against the server.
Maintenance jobs are executed as a Celery worker beside the runtime would: through the
`maintenance_job_run` task body, one turn after they were queued (deterministic, so the
figures repeat). Token counts are estimates (characters / 4 of each request as sent),
labelled as such. The summary then compares what each agent and the
full history cost once the provider caches (`sessions_app/cache_economy.py`: every turn
rebuilt for openai-chat and anthropic-messages with caching on, cl100k_base counts).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.core.wsgi import get_wsgi_application
from openai import OpenAI

from agents.models import Agent, AgentVersion, Application, Tool
from agents.selectors import gateway_model_name
from agents.services import (
    agent_create,
    agent_version_create,
    agent_version_publish,
    application_create,
)
from contextproto.celery import app
from contextproto.economics.cache_report import CacheEconomy
from contextproto.economics.causes import CAUSE_APPEND
from contextproto.protocol.adapters import PROVIDER_ANTHROPIC_MESSAGES, PROVIDER_OPENAI_CHAT
from labs import scenario
from sessions_app.admin_views import url
from sessions_app.cache_economy import DEFAULT_THINK_SECONDS, session_cache_economy
from sessions_app.models import FoldRecord, MaintenanceJob, Message, ProjectionSnapshot, Session
from sessions_app.providers.base import canonical_json
from sessions_app.reads import raw_log
from sessions_app.services.runs import runs_driven_here
from sessions_app.services.runtime import TurnReport
from sessions_app.services.sessions import session_create
from sessions_app.store.snapshot_bodies import views_of
from sessions_app.tasks import maintenance_job_run

DEMO_USERNAME = "admin"
DEMO_APPLICATION = "Demo"
SYSTEM_PROMPT = (
    "You are ACME's sales assistant. You prepare quotes and schedule deliveries.\n\n"
    "{{context_protocol}}"
)
MAX_INPUT_TOKENS = 16000
ESTIMATE = "estimates: characters / 4 of each request as sent, not a real tokenizer"
# The full history is the prefix@2 agent's log: the same work, without context tools.
FULL_HISTORY_OF = "prefix@2"
FULL_HISTORY = "full history"
CACHED_PROVIDERS = ((PROVIDER_OPENAI_CHAT, "OpenAI"), (PROVIDER_ANTHROPIC_MESSAGES, "Anthropic"))
GATEWAY_AGENT = "gateway-desk"
# Where the in-process client's requests say they go (a host ALLOWED_HOSTS always has).
IN_PROCESS_BASE = "http://127.0.0.1"
PASTE_QUESTION = "Does the quote still stand?"


@contextmanager
def worker_queue() -> Iterator[None]:
    """Queue Celery tasks instead of running them inline, so the demo can play the worker.

    Without REDIS_URL, Celery runs every task eagerly inside the enqueuing call; the demo
    wants maintenance to happen beside the agent's turns, as a worker would.
    """
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = False
    # The demo prints its own line per job; the worker's log line would repeat it.
    jobs_log = logging.getLogger("contextproto.jobs")
    level = jobs_log.level
    jobs_log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        app.conf.task_always_eager = previous
        jobs_log.setLevel(level)


@dataclass
class Worker:
    """Runs a session's queued maintenance jobs through the Celery task body, one turn late."""

    write: Any
    due: list[str] = field(default_factory=list)
    committed: list[dict[str, Any]] = field(default_factory=list)

    def _queued(self, session_id: Any) -> list[str]:
        return [
            str(pk)
            for pk in MaintenanceJob.objects.filter(
                session_id=session_id, external=False, status=MaintenanceJob.Status.QUEUED
            )
            .order_by("created_at")
            .values_list("pk", flat=True)
        ]

    def tick(self, session_id: Any, turn: int) -> None:
        """After a turn: run the jobs queued before it; the newer ones wait one turn."""
        due, self.due = self.due, [j for j in self._queued(session_id) if j not in self.due]
        for job_id in due:
            self._run(job_id, turn)

    def drain(self, session_id: Any, turn: int) -> None:
        for job_id in self.due + [j for j in self._queued(session_id) if j not in self.due]:
            self._run(job_id, turn)
        self.due = []

    def _run(self, job_id: str, turn: int) -> None:
        outcome = maintenance_job_run.apply(args=(job_id,)).get()
        job = MaintenanceJob.objects.get(pk=job_id)
        if outcome == MaintenanceJob.Status.COMMITTED:
            self.committed.append({"turn": turn, "job": job})
            self.write(
                f"    worker: checkpoint of {job.window_id} committed, covers "
                f"#{(job.from_index or 0) + 1}-#{job.through_index} "
                f"({job.tokens_before or 0:,} -> {job.tokens_after or 0:,} tokens, est.; "
                f"trigger: {job.trigger})"
            )
        else:
            self.write(f"    worker: maintenance of {job.window_id} {outcome}: {job.reason}")


class Command(BaseCommand):
    help = "Run the demo story with the scripted model and create the admin login."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--base-url",
            default="http://127.0.0.1:8000",
            help="Where the admin will be served, for the printed links.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.base_url = options["base_url"].rstrip("/")
        application = self._application()
        versions = self._agents(application)
        results = {}
        with runs_driven_here(), worker_queue():
            for label, version in versions:
                results[label] = self._run(label, version)
        gateway = self._gateway(application)
        base = results[FULL_HISTORY_OF]
        full = full_history_tokens(base["session"], base["snapshots"])
        self._summary(results, full)
        self._cache_summary(results)
        self._pages(
            results["unified@2"],
            results["prefix@2"],
            [r for label, r in results.items() if label not in ("unified@2", "prefix@2")],
            gateway,
        )
        self._gateway_snippet(gateway)
        self._login()

    # ------------------------------------------------------------ seeding

    def _application(self) -> Application:
        application = Application.objects.filter(name=DEMO_APPLICATION).first()
        if application is None:
            application, key = application_create(name=DEMO_APPLICATION)
            self.stdout.write(f"Demo Application created; API key: {key}")
        for name in (*scenario.HOST_TOOLS, scenario.NOTE_TOOL):
            Tool.objects.get_or_create(
                application=application,
                name=name,
                defaults={
                    "description": f"Host tool {name}: looks data up in ACME's systems.",
                    "input_schema": {"type": "object"},
                },
            )
        return application

    def _version(
        self, application: Application, name: str, fields: dict[str, Any], **binding: Any
    ) -> AgentVersion:
        agent = Agent.objects.filter(application=application, name=name).first()
        agent = agent or agent_create(application=application, name=name)
        version = agent_version_create(agent=agent, fields=fields, **binding)
        return agent_version_publish(version=version)

    def _agents(self, application: Application) -> list[tuple[str, AgentVersion]]:
        maintainer = self._version(
            application,
            "context-maintainer",
            {
                "system_prompt": "You write checkpoints of agent conversations.",
                "context_protocol_id": "prefix",
                "context_protocol_version": 2,
                "model_provider": "scripted",
                "model_name": "scripted-maintainer",
                "max_input_tokens": MAX_INPUT_TOKENS,
                "model_config": scenario.story_maintainer_script(),
            },
        )
        unified_script, prefix_script = scenario.story_scripts()
        common = {
            "system_prompt": SYSTEM_PROMPT,
            "model_provider": "scripted",
            "model_name": "scripted-demo",
            "max_input_tokens": MAX_INPUT_TOKENS,
            "max_turns_per_run": 60,
        }
        lookups = list(
            application.tools.filter(name__in=scenario.HOST_TOOLS).values_list("id", flat=True)
        )
        note = list(application.tools.filter(name=scenario.NOTE_TOOL).values_list("id", flat=True))
        agents = []
        for label in scenario.DEMO_VIEWS:
            view = scenario.protocol_view(label)
            version = self._version(
                application,
                f"quote-assistant ({label})",
                {
                    **common,
                    "context_protocol_id": view.protocol_id,
                    "context_protocol_version": view.version,
                    "options": dict(view.options),
                    "model_config": unified_script if view.windowed else prefix_script,
                },
                # The unified agent uses context tools; its prefix twin notes progress instead.
                tool_ids=lookups if view.windowed else lookups + note,
                maintainer_agent_id=maintainer.agent_id,
            )
            agents.append((label, version))
        return agents

    # ------------------------------------------------------------ running

    def _run(self, label: str, version: AgentVersion) -> dict[str, Any]:
        session, _ = session_create(agent_version=version, inputs={"customer": "ACME"})
        self.stdout.write(f"\n== {label}: session {session.id}")
        worker = Worker(write=self.stdout.write)
        turns = [0]

        def progress(turn: TurnReport) -> None:
            turns[0] += 1
            self.stdout.write(
                f"  turn {turns[0]:>3}  window {turn.window_id:<14} "
                f"tool {turn.tool or '(answer)':<26} input tokens {turn.input_tokens or 0:>6,} "
                "(est.)"
            )
            worker.tick(session.id, turns[0])

        for number, content in enumerate(scenario.story_inputs(), start=1):
            self.stdout.write(f" run {number}: {content}")
            status = scenario.drive_run(session.id, content, on_turn=progress)
            if status != "completed":
                raise RuntimeError(f"{label}: run {number} ended {status}")
        worker.drain(session.id, turns[0])
        snapshots = list(
            ProjectionSnapshot.objects.filter(session=session)
            .order_by("created_at", "pk")
            .only("id", "created_at", "upper_bound", "window_id", "usage")
        )
        views_of(snapshots)
        return {
            "label": label,
            "session": session,
            "snapshots": snapshots,
            "tokens": [int((s.usage or {}).get("inputTokens") or 0) for s in snapshots],
            "commits": worker.committed,
            "folds": FoldRecord.objects.filter(session=session).count(),
        }

    # ------------------------------------------------------------ the gateway

    def _gateway(self, application: Application) -> dict[str, Any]:
        """One conversation through the gateway with the official openai client, in process.

        The client declares its own tool and sends the whole conversation each time, as a
        plain Chat Completions loop does; the session (its key is the client's API key)
        keeps the log, the scripted model notes the task with a protocol tool the gateway
        runs itself, calls the client's tool, and answers from its result.
        """
        version = self._version(
            application,
            GATEWAY_AGENT,
            {
                "system_prompt": SYSTEM_PROMPT + "\n\n{{client_system}}",
                "context_protocol_id": "unified",
                "context_protocol_version": 2,
                "model_provider": "scripted",
                "model_name": "scripted-gateway",
                "max_input_tokens": MAX_INPUT_TOKENS,
                "model_config": scenario.gateway_script(),
            },
        )
        session, key = session_create(agent_version=version)
        model = gateway_model_name(version)
        client = OpenAI(
            base_url=f"{IN_PROCESS_BASE}/gateway/openai/v1",
            api_key=key,
            http_client=httpx2.Client(transport=httpx2.WSGITransport(app=get_wsgi_application())),
            max_retries=0,
        )
        tools: Any = [scenario.GATEWAY_TOOL]
        messages: list[Any] = [
            {"role": "system", "content": scenario.GATEWAY_SYSTEM},
            {"role": "user", "content": scenario.GATEWAY_QUESTION},
        ]
        self.stdout.write(
            f"\n== through the gateway: the official openai client, {model}: session {session.id}"
        )
        self.stdout.write(f"  client  -> {scenario.GATEWAY_QUESTION} (its own tool: price_lookup)")
        raw = client.chat.completions.with_raw_response.create(
            model=model, messages=messages, tools=tools
        )
        asked = raw.parse().choices[0].message
        [call] = asked.tool_calls or []
        function = getattr(call, "function")  # noqa: B009 (a function tool call)
        ran = sorted(
            {
                str(name)
                for name in Message.objects.filter(
                    session=session, kind="tool_call", tool_name__startswith="context_"
                ).values_list("tool_name", flat=True)
            }
        )
        self.stdout.write(
            f'  gateway -> "{asked.content}" + {function.name} {function.arguments} '
            f"({raw.headers['X-Contextproto-Turns']} model turns; the gateway ran "
            f"{', '.join(ran)} itself)"
        )
        self.stdout.write(f"  client ran {function.name}: {scenario.GATEWAY_PRICE}")
        messages += [
            {
                "role": "assistant",
                "content": asked.content,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": function.name, "arguments": function.arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "content": scenario.GATEWAY_PRICE},
        ]
        raw = client.chat.completions.with_raw_response.create(
            model=model, messages=messages, tools=tools
        )
        answer = raw.parse().choices[0].message.content
        self.stdout.write(
            f'  gateway -> "{answer}" ({raw.headers["X-Contextproto-Turns"]} model turn)'
        )
        return {"session": session, "key": key, "model": model}

    def _gateway_snippet(self, gateway: dict[str, Any]) -> None:
        openai_base = f"{self.base_url}/gateway/openai/v1"
        self.stdout.write(
            f"\nDrop-in gateway, served with the admin: OpenAI Chat Completions at {openai_base}"
            f", Anthropic Messages at {self.base_url}/gateway/anthropic."
        )
        self.stdout.write(
            "Paste into python while the server runs: it continues the gateway conversation "
            "with its session key, sending only the new message (the same message sent again "
            'is a retry and gets the same reply; an application key and model="name@N" start '
            'a new session; README, "Drop-in: change the base URL"):\n'
        )
        self.stdout.write(
            "from openai import OpenAI\n\n"
            f'client = OpenAI(base_url="{openai_base}", api_key="{gateway["key"]}")\n'
            "reply = client.chat.completions.create(\n"
            f'    model="{gateway["model"]}", '
            f'messages=[{{"role": "user", "content": "{PASTE_QUESTION}"}}]\n'
            ")\n"
            "print(reply.choices[0].message.content)"
        )

    # ------------------------------------------------------------ reporting

    def _summary(self, results: dict[str, dict[str, Any]], full: list[int]) -> None:
        unified, prefix = results["unified@2"], results["prefix@2"]
        columns = {label: r["tokens"] for label, r in results.items()}
        columns[FULL_HISTORY] = full
        turns = len(unified["tokens"])
        if any(len(tokens) != turns for tokens in columns.values()):
            counts = ", ".join(f"{k} {len(v)}" for k, v in columns.items())
            raise RuntimeError(f"the twins diverged: {counts} turns")
        after_commit = {c["turn"] + 1 for c in unified["commits"]}
        shown = sorted(
            {1, turns, *range(10, turns + 1, 10), *after_commit} & set(range(1, turns + 1))
        )
        windows = [s.window_id for s in unified["snapshots"]]
        widths = {label: max(10, len(label)) for label in columns}

        def row(first: str, second: str, cells: dict[str, str]) -> str:
            return f"{first:>5}  {second:<16} " + " ".join(
                f"{cells[label]:>{widths[label]}}" for label in columns
            )

        self.stdout.write(f"\nInput tokens per turn ({ESTIMATE})")
        self.stdout.write(row("turn", "unified@2 window", {k: k for k in columns}))
        for turn in shown:
            i = turn - 1
            note = "  <- first view after a checkpoint" if turn in after_commit else ""
            cells = {k: f"{v[i]:,}" for k, v in columns.items()}
            self.stdout.write(row(str(turn), windows[i], cells) + note)
        self.stdout.write(
            row("total", f"{turns} turns", {k: f"{sum(v):,}" for k, v in columns.items()})
        )
        self.stdout.write(row("/turn", "", {k: f"{sum(v) // turns:,}" for k, v in columns.items()}))
        u, p = sum(unified["tokens"]), sum(prefix["tokens"])
        self.stdout.write(
            f"unified@2 sent {100 - round(100 * u / p)}% fewer input tokens than "
            f"prefix@2 and {100 - round(100 * u / sum(full))}% fewer than the full history "
            f"over the {turns} turns (estimates). Full history: every raw message up to the "
            f"turn, sent every turn ({FULL_HISTORY_OF}'s log, no compression)."
        )
        triggers = ", ".join(
            f"{c['job'].window_id} at turn {c['turn']} ({c['job'].trigger})"
            for c in unified["commits"]
        )
        opened = {s for s in windows if s != "main"}
        self.stdout.write(
            f"unified@2: {len(opened)} task windows (one resumed), {unified['folds']} folds, "
            f"{len(unified['commits'])} checkpoints written by the worker: {triggers or 'none'}."
        )
        for label, other in results.items():
            if label in ("unified@2", FULL_HISTORY_OF):
                continue
            sent = sum(other["tokens"])
            opened = {s.window_id for s in other["snapshots"] if s.window_id != "main"}
            change = round(100 * sent / u) - 100
            self.stdout.write(
                f"{label} sent {sent:,} input tokens over the same {turns} turns: "
                f"{abs(change)}% {'more' if change > 0 else 'fewer'} than unified@2 (estimates); "
                f"{len(opened)} task windows, {other['folds']} folds, "
                f"{len(other['commits'])} checkpoints written by the worker."
            )
        self.stdout.write(
            f"prefix@2: one window, no folds, {len(prefix['commits'])} checkpoints written by "
            "the worker."
        )

    def _cache_summary(self, results: dict[str, dict[str, Any]]) -> None:
        """What each agent and the full history cost once the provider caches."""
        economies: dict[str, CacheEconomy] = {}
        for label, result in results.items():
            report = session_cache_economy(
                result["session"].id, full_history=label == FULL_HISTORY_OF, view=label
            )
            economies[label] = report.view
            if report.full_history is not None:
                economies[FULL_HISTORY] = report.full_history
        full = economies.pop(FULL_HISTORY)
        economies[FULL_HISTORY] = full
        tokenizer = full.tokenizer
        self.stdout.write(
            f"\nCost with prompt caching ({tokenizer}; every turn's request rebuilt for "
            f"openai-chat and anthropic-messages with caching on, a turn every "
            f"{DEFAULT_THINK_SECONDS:g} s; effective cost in input-token equivalents: "
            "uncached 1, cache read 0.1, cache write 1.25 on Anthropic, no write charge on "
            "OpenAI)"
        )
        header = f"{'view':<14} {'tokens':>11}"
        for _provider, name in CACHED_PROVIDERS:
            header += f"  {name + ': hit':>14} {'cost':>10} {'vs full':>7}"
        self.stdout.write(header)
        for label, economy in economies.items():
            line = f"{label:<14} {economy[PROVIDER_ANTHROPIC_MESSAGES].totals.input_tokens:>11,}"
            for provider, _name in CACHED_PROVIDERS:
                p = economy[provider]
                share = p.cost / full[provider].cost
                line += (
                    f"  {f'{100 * p.hit_ratio:.0f}%':>14} {round(p.equivalent_tokens):>10,} "
                    f"{f'{100 * share:.0f}%':>7}"
                )
            self.stdout.write(line)
        self.stdout.write(
            "tokens: input tokens of the anthropic-messages requests; hit: cache-read / input "
            "tokens; vs full: share of the full history's effective cost under the same rules."
        )
        for label, economy in economies.items():
            breaks = [
                f"{b.cause} {b.pairs} ({b.rebilled_tokens:,})"
                for b in economy[PROVIDER_ANTHROPIC_MESSAGES].breaks
                if b.cause != CAUSE_APPEND
            ]
            self.stdout.write(
                f"Cache breaks, {label} (Anthropic rules; turn pairs, tokens re-billed): "
                + (", ".join(breaks) or "none, every turn appends")
                + "."
            )
        unified = economies["unified@2"]
        for label, other in economies.items():
            if label in ("unified@2", FULL_HISTORY_OF, FULL_HISTORY):
                continue
            self.stdout.write(
                f"{label} beside unified@2 with caching on: "
                + " and ".join(
                    f"{100 * other[p].cost / unified[p].cost:.0f}% of its cost on {name} "
                    f"(hit ratio {100 * other[p].hit_ratio:.0f}% vs "
                    f"{100 * unified[p].hit_ratio:.0f}%)"
                    for p, name in CACHED_PROVIDERS
                )
                + " (estimates)."
            )
        sent = unified[PROVIDER_ANTHROPIC_MESSAGES].totals.input_tokens
        share = sent / full[PROVIDER_ANTHROPIC_MESSAGES].totals.input_tokens
        self.stdout.write(
            f"unified@2 sends {100 * share:.0f}% "
            "of the full history's input tokens; once both cache it pays "
            + " and ".join(
                f"{100 * unified[p].cost / full[p].cost:.0f}% of its cost on {name}"
                for p, name in CACHED_PROVIDERS
            )
            + " (estimates)."
        )

    def _pages(
        self,
        unified: dict[str, Any],
        prefix: dict[str, Any],
        others: list[dict[str, Any]],
        gateway: dict[str, Any],
    ) -> None:
        session, snapshots = unified["session"], unified["snapshots"]
        showcase = showcase_snapshot(session)
        lines = [
            ("session browser, unified@2", url("overview", session)),
            ("input tokens chart", url("overview", session) + "#input-tokens"),
        ]
        if showcase is not None:
            lines.append(
                ("a turn with a fold and a checkpoint", url("snapshot", session, showcase.pk))
            )
            folded = first_view_with_fold(snapshots, showcase)
            if folded is not None:
                lines.append(
                    ("the turn its fold was made (diff)", url("snapshot_diff", session, folded.pk))
                )
        if unified["commits"]:
            # Turn N's worker commit shows in the view of turn N + 1 (snapshots[N]).
            turn = unified["commits"][0]["turn"]
            if turn < len(snapshots):
                after = snapshots[turn]
                lines.append(
                    ("the turn after a checkpoint (diff)", url("snapshot_diff", session, after.pk))
                )
        for other in others:
            lines.append((f"session browser, {other['label']}", url("overview", other["session"])))
        lines.append(("session browser, prefix@2", url("overview", prefix["session"])))
        lines.append(("session browser, through the gateway", url("overview", gateway["session"])))
        self.stdout.write("\nLook inside (admin, login below):")
        for label, path in lines:
            self.stdout.write(f"  {label:<37} {self.base_url}{path}")

    def _login(self) -> None:
        password = os.environ.get("DEMO_ADMIN_PASSWORD", "contextproto-demo")
        user, _ = get_user_model().objects.get_or_create(username=DEMO_USERNAME)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(f"\nAdmin: {self.base_url}/admin/")
        self.stdout.write(f"Login: {DEMO_USERNAME} / {password}")


def full_history_tokens(session: Session, snapshots: list[ProjectionSnapshot]) -> list[int]:
    """Per turn: the turn's request with every raw message up to its bound (estimate).

    Computed incrementally from the sizes of the messages' JSON (the same characters / 4 a
    direct `estimate_tokens(canonical_json(request))` gives), so a long story stays linear.
    """
    if not snapshots:
        return []
    last = max(s.upper_bound for s in snapshots)
    history = raw_log.log_page(session.id, window_id=None, after_index=0, limit=last)
    keep = ("role", "content", "toolName", "toolCallId", "arguments")
    sizes = [0]
    for message in history:
        wire = {k: v for k, v in message.to_wire().items() if k in keep}
        sizes.append(sizes[-1] + len(canonical_json(wire)))
    views_of(snapshots)
    heavy = {s.pk: s for s in snapshots}
    tokens = []
    for snapshot in snapshots:
        loaded = heavy[snapshot.pk]
        request = {k: v for k, v in loaded.request.items() if k != "system"}
        request["messages"] = [loaded.messages[0]] if loaded.messages else []
        base = len(canonical_json(request))
        n = min(snapshot.upper_bound, len(history))
        # "[system]" becomes "[system, m1, ..., mn]": each message adds ", " and its JSON.
        tokens.append(-(-(base + sizes[n] + 2 * n) // 4))
    return tokens


def first_view_with_fold(
    snapshots: list[ProjectionSnapshot], showcase: ProjectionSnapshot
) -> ProjectionSnapshot | None:
    """The first turn whose view holds the showcase's (last) fold: the turn it was made."""
    fold_ids = [
        s.get("foldId") for s in showcase.sources or [] if s.get("derivedType") == "context_fold"
    ]
    if not fold_ids:
        return None
    for snapshot in snapshots:
        if any(s.get("foldId") == fold_ids[-1] for s in snapshot.sources or []):
            return snapshot
    return None


def showcase_snapshot(session: Session) -> ProjectionSnapshot | None:
    """The latest turn whose view holds a fold and a checkpoint of its window."""
    candidates = (
        ProjectionSnapshot.objects.filter(session=session)
        .order_by("-created_at", "-pk")
        .only("id", "body_state", "created_at", "session_id", "request_hash")
    )
    for snapshot in candidates:
        kinds = {s.get("derivedType") for s in snapshot.sources or []}
        if "context_fold" not in kinds:
            continue
        header = next(
            (m for m in snapshot.messages or [] if m.get("kind") == "context_header"), None
        )
        if header and '"current_window_checkpoint": null' not in str(header.get("content")):
            return snapshot
    return None
