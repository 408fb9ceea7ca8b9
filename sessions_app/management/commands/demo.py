"""`manage.py demo`: seed a demo Application, run the scenario with the scripted model, print
a per-turn progress line and a summary, and create the admin login.

unified@2 and prefix@2 agents run the same quote → schedule → "budget is now 9000" scenario.
Token counts are estimates (characters / 4 of the request as sent), labelled as such.
"""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.test.utils import override_settings

from agents.models import Agent, AgentVersion, Application, Tool
from agents.services import (
    agent_create,
    agent_version_create,
    agent_version_publish,
    application_create,
)
from sessions_app import scenario, selectors
from sessions_app.models import FoldRecord, MaintenanceJob, ProjectionSnapshot, Session
from sessions_app.providers.base import canonical_json, estimate_tokens
from sessions_app.services.runtime import TurnReport
from sessions_app.services.sessions import session_create

DEMO_USERNAME = "admin"
DEMO_APPLICATION = "Demo"
SYSTEM_PROMPT = (
    "You are ACME's sales assistant. You prepare quotes and schedule deliveries.\n\n"
    "{{context_protocol}}"
)


class Command(BaseCommand):
    help = "Run the demo scenario with the scripted model and create the admin login."

    def handle(self, *args: Any, **options: Any) -> None:
        application = self._application()
        versions = self._agents(application)
        results = []
        with override_settings(RUNTIME_AUTOSTART=False):
            for label, version in versions:
                results.append(self._run(label, version))
        self._summary(results)
        self._login()

    # ------------------------------------------------------------ seeding

    def _application(self) -> Application:
        application = Application.objects.filter(name=DEMO_APPLICATION).first()
        if application is None:
            application, key = application_create(name=DEMO_APPLICATION)
            self.stdout.write(f"Demo Application created; API key: {key}")
        for name in scenario.HOST_TOOLS:
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
                "max_input_tokens": 8000,
                "model_config": scenario.maintainer_script(),
            },
        )
        tools = list(application.tools.values_list("id", flat=True))
        common = {
            "system_prompt": SYSTEM_PROMPT,
            "model_provider": "scripted",
            "model_name": "scripted-demo",
        }
        unified = self._version(
            application,
            "quote-assistant (unified@2)",
            {
                **common,
                "context_protocol_id": "unified",
                "context_protocol_version": 2,
                "max_input_tokens": 8000,
                "model_config": scenario.unified_script(),
            },
            tool_ids=tools,
            maintainer_agent_id=maintainer.agent_id,
        )
        prefix = self._version(
            application,
            "quote-assistant (prefix@2)",
            {
                **common,
                "context_protocol_id": "prefix",
                "context_protocol_version": 2,
                "max_input_tokens": 4000,
                "model_config": scenario.prefix_script(),
            },
            tool_ids=tools,
            maintainer_agent_id=maintainer.agent_id,
        )
        return [("unified@2", unified), ("prefix@2", prefix)]

    # ------------------------------------------------------------ running

    def _run(self, label: str, version: AgentVersion) -> dict[str, Any]:
        session, _ = session_create(agent_version=version, inputs={"customer": "ACME"})
        self.stdout.write(f"\n== {label}: session {session.id}")

        def progress(turn: TurnReport) -> None:
            self.stdout.write(
                f"  run {turn.run_id[:8]} turn {turn.turn:>2}  window {turn.window_id:<6} "
                f"tool {turn.tool or '-':<28} input tokens {turn.input_tokens or 0:>6} (est.)"
            )

        for number, content in enumerate(scenario.RUN_INPUTS, start=1):
            self.stdout.write(f" run {number}: {content}")
            status = scenario.drive_run(session.id, content, on_turn=progress)
            self.stdout.write(f"  -> {status}")
        return {"label": label, "session": session, **self._measure(session)}

    def _measure(self, session: Session) -> dict[str, Any]:
        snapshots = list(
            ProjectionSnapshot.objects.filter(session=session).order_by("created_at", "id")
        )
        view_tokens = [int((s.usage or {}).get("inputTokens") or 0) for s in snapshots]
        full_tokens = [self._full_history_tokens(session, s) for s in snapshots]
        return {
            "turns": len(snapshots),
            "view": sum(view_tokens),
            "full": sum(full_tokens),
            "last_view": view_tokens[-1] if view_tokens else 0,
            "last_full": full_tokens[-1] if full_tokens else 0,
            "folds": FoldRecord.objects.filter(session=session).count(),
            "checkpoints": MaintenanceJob.objects.filter(
                session=session, status=MaintenanceJob.Status.COMMITTED
            ).count(),
        }

    def _full_history_tokens(self, session: Session, snapshot: ProjectionSnapshot) -> int:
        """What sending every raw message up to the turn's bound would have cost (estimate)."""
        history = selectors.log_page(
            session.id, window_id=None, after_index=0, limit=snapshot.upper_bound
        )
        request = dict(snapshot.request)
        system = snapshot.messages[0] if snapshot.messages else {}
        request["messages"] = [system] + [
            {
                k: v
                for k, v in m.to_wire().items()
                if k in ("role", "content", "toolName", "toolCallId", "arguments")
            }
            for m in history
        ]
        request.pop("system", None)
        return estimate_tokens(canonical_json(request))

    def _summary(self, results: list[dict[str, Any]]) -> None:
        self.stdout.write("\nSummary (token counts are estimates: characters / 4)")
        header = (
            f"{'protocol':<10} {'turns':>5} {'view tok/turn':>14} {'full tok/turn':>14} "
            f"{'saved':>6} {'last view':>10} {'last full':>10} {'folds':>5} {'checkpoints':>11}"
        )
        self.stdout.write(header)
        for r in results:
            per_view = r["view"] // max(r["turns"], 1)
            per_full = r["full"] // max(r["turns"], 1)
            saved = 100 - round(100 * r["view"] / r["full"]) if r["full"] else 0
            self.stdout.write(
                f"{r['label']:<10} {r['turns']:>5} {per_view:>14} {per_full:>14} {saved:>5}% "
                f"{r['last_view']:>10} {r['last_full']:>10} {r['folds']:>5} "
                f"{r['checkpoints']:>11}"
            )

    def _login(self) -> None:
        password = os.environ.get("DEMO_ADMIN_PASSWORD", "contextproto-demo")
        user, _ = get_user_model().objects.get_or_create(username=DEMO_USERNAME)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write("\nAdmin: http://127.0.0.1:8000/admin/")
        self.stdout.write(f"Login: {DEMO_USERNAME} / {password}")
