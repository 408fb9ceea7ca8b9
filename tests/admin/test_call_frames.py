"""The admin shows what a tool call acted on (issue 42): its frame on the message page and in
the run timeline, for a host's call (its view's) and an MCP call (no snapshot, the state its
client saw)."""

from __future__ import annotations

import re

import pytest

from sessions_app.models import Message
from sessions_app.services.mcp_calls import tool_call_record_and_dispatch
from sessions_app.services.runs import run_start
from sessions_app.services.sessions import session_create
from tests.builders.sessions import HostTurns


def browse(session, tail: str = "") -> str:
    return f"/admin/sessions_app/session/{session.pk}/browse/{tail}"


@pytest.fixture
def framed_calls(published_version):
    """A run with a host's protocol call from a view, then an MCP call of the same run."""
    session, _key = session_create(agent_version=published_version(), inputs={})
    run, _ = run_start(session_id=session.id, content="go")
    turns = HostTurns(session)
    turns.context("context_task_memory_set", memory="quote")
    view = turns.views[-1]
    receipt = tool_call_record_and_dispatch(
        session_id=session.id,
        tool_call_id="mcp-1",
        tool_name="context_task_memory_get",
        arguments={"purpose": "p"},
    )
    assert receipt.result["success"] is True
    host = Message.objects.get(session=session, kind="tool_call", snapshot_id=view.pk)
    mcp = Message.objects.get(session=session, kind="tool_call", tool_call_id="mcp-1")
    return session, run, view, host, mcp


def test_the_message_page_shows_a_calls_frame(framed_calls, superuser, client):
    session, _run, view, host, mcp = framed_calls
    client.force_login(superuser)
    page = client.get(browse(session, f"messages/{host.pk}/")).content.decode()
    frame = re.search(r'<td id="message-frame">(.*?)</td>', page, re.S).group(1)
    assert f"revision {view.revision} · through #{view.upper_bound}" in frame
    assert "MCP" not in frame
    page = client.get(browse(session, f"messages/{mcp.pk}/")).content.decode()
    frame = re.search(r'<td id="message-frame">(.*?)</td>', page, re.S).group(1)
    assert f"revision {mcp.frozen_revision} · through #{mcp.frozen_upper_bound}" in frame
    assert "no snapshot" in frame and "MCP client" in frame
    text = Message.objects.filter(session=session, kind="input").first()
    page = client.get(browse(session, f"messages/{text.pk}/")).content.decode()
    assert 'id="message-frame"' not in page


def test_the_timeline_shows_each_calls_frame(framed_calls, superuser, client):
    session, run, view, host, mcp = framed_calls
    client.force_login(superuser)
    page = client.get(browse(session, f"runs/{run.pk}/")).content.decode()
    frames = re.findall(r'<small class="call-frame"[^>]*>(.*?)</small>', page, re.S)
    assert f"frame r{view.revision} · through #{view.upper_bound}" in frames
    assert f"frame r{mcp.frozen_revision} · through #{mcp.frozen_upper_bound} · MCP" in frames
    assert host.frozen_revision == view.revision
