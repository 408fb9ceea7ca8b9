"""The beat schedule file goes under VAR_DIR, never into the start directory (issue 23, item 10).

`make worker` runs `celery … worker -B` from the repository root; Celery's default schedule
file, `celerybeat-schedule` in the working directory, left untracked files in the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from contextproto.celery import app
from tests.servers import ROOT, stop_process, wait_for


def test_the_schedule_file_is_configured_under_var_dir() -> None:
    assert Path(settings.CELERY_BEAT_SCHEDULE_FILENAME).parent == settings.VAR_DIR
    assert app.conf.beat_schedule_filename == settings.CELERY_BEAT_SCHEDULE_FILENAME


def test_make_worker_runs_beat_with_the_configured_schedule() -> None:
    # Under a parent make (CI runs this suite from `make test`) MAKEFLAGS carries -w, and the
    # recipe would end with "Leaving directory"; read the recipe as a fresh make prints it.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    recipe = subprocess.run(
        ["make", "--no-print-directory", "-n", "worker"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    command = recipe.strip().splitlines()[-1]
    assert "celery -A contextproto worker -B" in command
    # No -s/--schedule-filename: the setting decides (a relative path here would follow cwd).
    assert " -s " not in command and "--schedule" not in command


def test_beat_writes_its_schedule_under_var_dir_and_creates_it(tmp_path: Path) -> None:
    start_dir = tmp_path / "started-here"
    start_dir.mkdir()
    var_dir = tmp_path / "not-yet" / "var"  # made at start-up (the settings create it)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PYTEST_VERSION")},
        "PYTHONPATH": str(ROOT),
        "VAR_DIR": str(var_dir),
        # As `make worker` runs it, on PostgreSQL (beat does not connect to the database).
        "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
    }
    log = tmp_path / "beat.log"
    command = [sys.executable, "-m", "celery", "-A", "contextproto", "beat", "-l", "info"]
    process = subprocess.Popen(
        command, cwd=start_dir, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    try:
        wait_for(
            lambda: list(var_dir.glob("celerybeat-schedule*")) or process.poll() is not None,
            60,
            "the beat schedule file under VAR_DIR",
        )
    finally:
        stop_process(process, 10)
    assert list(var_dir.glob("celerybeat-schedule*")), log.read_text()
    assert not list(start_dir.iterdir()), "beat wrote into its working directory"
