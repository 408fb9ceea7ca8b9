"""`manage.py run_experiment PLAN.json --provider scripted|openai-chat|anthropic-messages`.

Runs a pre-registered experiment plan (docs/architecture.md: Labs, experiments/README in the project
README): one progress line per run, a summary table at the end, report.json and report.md
in the output directory (listed in the admin under Sessions → Experiment runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labs.experiments.plan import PROVIDER_SCRIPTED, PROVIDERS, PlanInvalid, load_plan
from labs.experiments.report import REPORT_JSON, summary_lines, write_report
from labs.experiments.runner import ExperimentRunner
from labs.experiments.setup import ProviderSetup, new_out_dir


class Command(BaseCommand):
    help = "Run an experiment plan (JSON) against the scripted model or a real provider."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("plan", help="Path of the plan (see experiments/*.schema.json).")
        parser.add_argument("--provider", required=True, choices=PROVIDERS)
        parser.add_argument(
            "--model", help="Model name; required for openai-chat and anthropic-messages."
        )
        parser.add_argument(
            "--out", help="Output directory (default: a new one under VAR_DIR/experiments)."
        )
        parser.add_argument(
            "--base-url",
            help="Provider base URL (default: OPENAI_BASE_URL / ANTHROPIC_BASE_URL).",
        )
        parser.add_argument(
            "--api-key-env",
            help="Environment variable holding the API key (default: OPENAI_API_KEY / "
            "ANTHROPIC_API_KEY settings).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        provider = options["provider"]
        try:
            loaded = load_plan(options["plan"], provider=provider)
        except PlanInvalid as exc:
            listing = "\n".join(f"  - {e}" for e in exc.errors)
            raise CommandError(
                f"{options['plan']}: the plan has {len(exc.errors)} problem(s):\n{listing}"
            ) from exc
        model = options["model"]
        if provider != PROVIDER_SCRIPTED and not model:
            raise CommandError(f"--model is required with --provider {provider}.")
        out_dir = (
            Path(options["out"]) if options["out"] else new_out_dir(loaded.plan.name, provider)
        )
        if (out_dir / REPORT_JSON).exists():
            raise CommandError(f"{out_dir} already holds a report; choose another --out.")
        setup = ProviderSetup(
            provider=provider,
            model=model or "scripted",
            base_url=options["base_url"],
            api_key_env=options["api_key_env"],
        )
        if provider == PROVIDER_SCRIPTED:
            self.stdout.write(
                "SCRIPTED REHEARSAL: answers come from the plan's script; token counts are "
                "estimates. Nothing here is a model result."
            )
        self.stdout.write(
            f"Plan {loaded.plan.name} (sha256 {loaded.sha256[:12]}), provider {provider}, "
            f"model {setup.model}, budget {loaded.plan.budget_tokens} tokens"
        )
        runner = ExperimentRunner(loaded, setup, out_dir=out_dir, progress=self.stdout.write)
        report = runner.run()
        json_path, md_path = write_report(report, out_dir)
        self.stdout.write("")
        for line in summary_lines(report):
            self.stdout.write(line)
        self.stdout.write(f"\nReport: {json_path}\n        {md_path}")
