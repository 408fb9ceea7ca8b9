"""A real Arize Phoenix for the trace tests: started as a subprocess, read through its own API.

Phoenix (the `phoenix` extra, pinned) runs from a virtualenv of its own
(`tests.gateway.installs.phoenix_python`): `phoenix serve` on two free ports, its data in a
temporary directory, its own telemetry off. It takes ~15 s to start on two cores, so a test
module starts one and every test of the module sends its spans to it
(`OTLP_PATH` on `base_url`) and reads them back with `GET /v1/projects/default/spans`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.gateway.installs import phoenix_python, unavailable

START_TIMEOUT = 180.0
OTLP_PATH = "/v1/traces"

Span = dict[str, Any]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Phoenix:
    """One `phoenix serve` process and the reads of its REST API."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data_dir / "phoenix.log"

    @property
    def traces_endpoint(self) -> str:
        return self.base_url + OTLP_PATH

    def start(self) -> Phoenix:
        python = phoenix_python()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))},
            "PHOENIX_WORKING_DIR": str(self.data_dir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(_free_port()),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(python.parent / "phoenix"), "serve"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                unavailable(f"phoenix serve exited ({self.process.returncode}):\n{self._tail()}")
            if self._healthy():
                return self
            time.sleep(0.5)
        self.stop()
        unavailable(f"phoenix serve was not healthy within {START_TIMEOUT:.0f} s:\n{self._tail()}")
        return self

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.base_url + "/healthz", timeout=2) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    # ------------------------------------------------------------------ reads

    def spans(self, **filters: str | list[str]) -> list[Span]:
        """`GET /v1/projects/default/spans` with these filters, every page, oldest first."""
        found: list[Span] = []
        cursor: str | None = None
        while True:
            query: dict[str, Any] = {
                **filters,
                "limit": "1000",
                "sort": "start_time",
                "order": "asc",
            }
            if cursor:
                query["cursor"] = cursor
            url = f"{self.base_url}/v1/projects/default/spans?" + urllib.parse.urlencode(
                query, doseq=True
            )
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = json.loads(answer.read())
            found.extend(body["data"])
            cursor = body.get("next_cursor")
            if not cursor:
                return found


def named(spans: list[Span], prefix: str) -> list[Span]:
    return [s for s in spans if s["name"].startswith(prefix)]


def one(spans: list[Span], prefix: str) -> Span:
    found = named(spans, prefix)
    assert len(found) == 1, [s["name"] for s in spans]
    return found[0]


def children(spans: list[Span], parent: Span) -> list[str]:
    """Names of `parent`'s children, in start order."""
    return [s["name"] for s in spans if s["parent_id"] == parent["context"]["span_id"]]
