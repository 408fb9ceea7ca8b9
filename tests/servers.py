"""Real server processes for tests: a free loopback port, the test database's URL, start/stop."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

from contextproto.celery import app

ROOT = Path(__file__).resolve().parents[1]


def run_coroutine[T](coroutine: Coroutine[object, object, T]) -> T:
    """Run `coroutine` to its end on an event loop in a thread of its own.

    Playwright's sync API (the browser tests) may have left an event loop running in the
    test thread, and asyncio.run() refuses to nest.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def current_database_url() -> str:
    """The URL of the database this test runs on (PostgreSQL), for a server subprocess."""
    db = connection.settings_dict
    host, port = db["HOST"] or "127.0.0.1", db["PORT"] or 5432
    return f"postgres://{db['USER']}@{host}:{port}/{db['NAME']}"


@contextmanager
def running_server(
    command: Sequence[str], *, env: dict[str, str], log: Path, base: str, probe: str
) -> Iterator[str]:
    """Start `command`, wait until `base + probe` answers (any status), yield `base`, stop it."""
    process = subprocess.Popen(
        list(command), cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + probe, timeout=2):
                    break
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("server did not start:\n" + log.read_text()) from None
                time.sleep(0.3)
        yield base
    finally:
        stop_process(process, 15)


def stop_process(process: subprocess.Popen, grace: float) -> None:
    """Ask `process` to stop (SIGTERM); kill it if it is still there after `grace` seconds."""
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def worker_env(**overrides: str) -> dict[str, str]:
    """A Celery worker's environment: this test's database and Redis, role `worker`."""
    return {
        **os.environ,
        "DATABASE_URL": current_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "NODE_ROLE": "worker",
        **overrides,
    }


def start_celery_worker(
    log: Path, *, env: dict[str, str], queue: str = "contextproto", extra: Sequence[str] = ()
) -> subprocess.Popen:
    """A real solo-pool worker on `queue`, logging to `log` (the caller stops or kills it)."""
    command = [sys.executable, "-m", "celery", "-A", "contextproto", "worker", "-P", "solo"]
    command += ["-Q", queue, "--without-mingle", "--without-gossip", "-l", "info", *extra]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT
    )


def wait_for[T](predicate: Callable[[], T], timeout: float, what: str, every: float = 0.1) -> T:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


@contextmanager
def purged_celery_queue() -> Iterator[None]:
    """An empty broker queue before and after: no task of another test is delivered."""
    app.control.purge()
    try:
        yield
    finally:
        app.control.purge()
