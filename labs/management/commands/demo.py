"""`manage.py demo`: seed a demo Application, run the long story with the scripted model,
print a per-turn progress line, compare the token economy, and create the admin login.

The agents of `scenario.DEMO_VIEWS` (unified@2, unified@4 and their prefix@2 twin) work
through the same five tasks of an ACME sales desk (scenario.STORY: quotes, a delivery, a
resumed window), turn for turn. One more conversation goes through the gateway (contract §14)
with the official `openai` client, in process (its HTTP goes to Django's WSGI handler), and
the demo prints the gateway's base URL and a snippet that continues it against the server.
Maintenance jobs are executed as a Celery worker beside the runtime would (labs/demo/worker.py):
through the `maintenance_job_run` task body, one turn after they were queued (deterministic, so the
figures repeat). Token counts are estimates (characters / 4 of each request as sent),
labelled as such. The summary (labs/demo/report.py) then compares what each agent and the
full history cost once the provider caches (`sessions_app/cache_economy.py`: every turn
rebuilt for openai-chat and anthropic-messages with caching on, cl100k_base counts).
"""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from agents.models import Agent, AgentVersion, Application, Tool
from agents.services import (
    agent_create,
    agent_version_create,
    agent_version_publish,
    application_create,
)
from labs import scenario
from labs.demo import gateway, report
from labs.demo.report import FULL_HISTORY_OF
from labs.demo.worker import Worker, worker_queue
from sessions_app.models import FoldRecord, ProjectionSnapshot
from sessions_app.services.runs import runs_driven_here
from sessions_app.services.runtime import TurnReport
from sessions_app.services.sessions import session_create
from sessions_app.store.snapshot_bodies import views_of

DEMO_USERNAME = "admin"
DEMO_APPLICATION = "Demo"
SYSTEM_PROMPT = (
    "You are ACME's sales assistant. You prepare quotes and schedule deliveries.\n\n"
    "{{context_protocol}}"
)
MAX_INPUT_TOKENS = 16000
GATEWAY_AGENT = "gateway-desk"


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
        conversation = self._gateway(application)
        base = results[FULL_HISTORY_OF]
        full = report.full_history_tokens(base["session"], base["snapshots"])
        write = self.stdout.write
        report.summary(results, full, write)
        report.cache_summary(results, write)
        report.pages(
            self.base_url,
            results["unified@2"],
            results["prefix@2"],
            [r for label, r in results.items() if label not in ("unified@2", "prefix@2")],
            conversation,
            write,
        )
        gateway.snippet(self.base_url, conversation, write)
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
        """One conversation through the gateway (labs/demo/gateway.py), on its own agent."""
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
        return gateway.converse(version, self.stdout.write)

    def _login(self) -> None:
        password = os.environ.get("DEMO_ADMIN_PASSWORD", "contextproto-demo")
        user, _ = get_user_model().objects.get_or_create(username=DEMO_USERNAME)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(f"\nAdmin: {self.base_url}/admin/")
        self.stdout.write(f"Login: {DEMO_USERNAME} / {password}")
