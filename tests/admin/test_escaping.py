"""Model-generated text is always escaped: an XSS payload renders as text."""

from __future__ import annotations

import pytest

from contextproto.protocol.state import new_window_record
from sessions_app import charts
from sessions_app.models import Message
from sessions_app.store.state import kv_commit
from tests.builders.sessions import build_session

PAYLOAD = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


@pytest.fixture
def poisoned(published_version):
    version = published_version()
    session, fold_id, snapshot = build_session(version, input_text=PAYLOAD, tool_result=PAYLOAD)
    kv_commit(
        session_id=session.id,
        writes={
            "taskMemory": PAYLOAD,
            "window/x": new_window_record(goal=PAYLOAD),
            "checkpoint/x": PAYLOAD,
        },
    )
    return session, fold_id, snapshot


def test_xss_payload_in_messages_and_state_renders_escaped(admin_client_for, superuser, poisoned):
    client = admin_client_for(superuser)
    session, fold_id, snapshot = poisoned
    base = f"/admin/sessions_app/session/{session.pk}/browse/"
    message = Message.objects.get(session=session, index=1)
    urls = [
        base,
        base + "windows/",
        base + "messages/",
        base + f"messages/{message.pk}/",
        base + f"folds/{fold_id}/",
        base + f"snapshots/{snapshot.pk}/",
        base + f"snapshots/{snapshot.pk}/?raw_after=0",  # the raw pane beside the view
        base + f"snapshots/{snapshot.pk}/diff/",
        base + "kv/",
        base + f"runs/{session.current_run_id}/",  # the run timeline
        "/admin/sessions_app/message/",
        "/admin/sessions_app/kventry/",
    ]
    for url in urls:
        html = client.get(url).content.decode()
        assert PAYLOAD not in html, url
        assert ESCAPED in html or "&lt;script&gt;" in html, url


def test_chart_labels_are_escaped():
    svg = charts.input_tokens_chart(
        [charts.Turn("1", 100), charts.Turn("2", 200)],
        [charts.Marker(0.5, charts.FOLD, PAYLOAD)],
    )
    assert PAYLOAD not in svg and ESCAPED in svg
