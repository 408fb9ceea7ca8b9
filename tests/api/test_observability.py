"""Metrics at /metrics (token only) move after a dispatch; one log line per API request."""

from __future__ import annotations

import logging
import re

import pytest
from django.test import Client


def sample(body: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = (
        rf"^{re.escape(name)}(?:\{{{re.escape(wanted)}\}})? ([0-9.e+-]+)$"
        if labels
        else (rf"^{re.escape(name)} ([0-9.e+-]+)$")
    )
    found = re.search(pattern, body, re.M)
    return float(found.group(1)) if found else 0.0


def scrape(token: str = "scrape-secret") -> str:
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    return response.content.decode()


@pytest.fixture
def metrics_token(settings):
    settings.METRICS_TOKEN = "scrape-secret"


def test_metrics_are_not_public(db, settings):
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 404
    settings.METRICS_TOKEN = "scrape-secret"
    refused = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong")
    assert refused.status_code == 401 and "WWW-Authenticate" in refused


@pytest.mark.django_db(transaction=True)
def test_dispatch_and_projection_counters_move(api_session, metrics_token):
    s = api_session(version=2)
    s.input("start")
    before = scrape()
    ok = s.tool("context_task_memory_set", memory="m")
    wrong = s.tool("context_window_memory_set", memory="m", expectedWindowId="nowhere")
    assert ok["success"] and wrong["error"]["code"] == "context_window_mismatch"
    after = scrape()
    name = "contextproto_dispatches_total"
    assert (
        sample(after, name, tool="context_task_memory_set", outcome="ok")
        == sample(before, name, tool="context_task_memory_set", outcome="ok") + 1
    )
    mismatch = {"tool": "context_window_memory_set", "outcome": "context_window_mismatch"}
    assert sample(after, name, **mismatch) == sample(before, name, **mismatch) + 1
    assert (
        sample(after, "contextproto_projection_seconds_count")
        >= sample(before, "contextproto_projection_seconds_count") + 2
    )
    assert 'contextproto_maintenance_jobs{status="queued"}' in after


def test_one_structured_log_line_per_api_request(api_session, caplog):
    s = api_session()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="contextproto.requests"):
        response = s.client.get(s.path())
    lines = [r for r in caplog.records if r.name == "contextproto.requests"]
    assert len(lines) == 1
    fields = lines[0].request
    assert fields["requestId"] == response["X-Request-Id"]
    assert fields["session"] == s.id
    assert fields["application"] == str(s.app.id)
    assert (fields["status"], fields["outcome"]) == (200, "ok")


def test_the_log_line_names_the_error_code_and_tool_call(api_session, caplog):
    s = api_session()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="contextproto.requests"):
        s.client.post(s.path("tool-calls/nope/dispatch/"))
    fields = next(r for r in caplog.records if r.name == "contextproto.requests").request
    assert (fields["status"], fields["outcome"], fields["toolCallId"]) == (
        404,
        "not_found",
        "nope",
    )
