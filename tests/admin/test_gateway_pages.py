"""The admin says what came through the gateway (issue 38 item 5): a session's overview and a
run's timeline name the client API and the client's User-Agent."""

from __future__ import annotations

import json

from django.test import Client

from agents.services import application_create
from sessions_app.models import Run


def test_the_overview_and_the_timeline_name_the_gateway_client(make_version, superuser, client):
    application, key = application_create(name="Gateway pages")
    make_version(
        application,
        name="helper",
        provider="scripted",
        model_config={"steps": [{"text": "Hello there."}], "wireFormat": "anthropic-messages"},
        system_prompt="Help.\n{{context_protocol}}",
    )
    reply = Client().post(
        "/gateway/anthropic/v1/messages",
        data=json.dumps(
            {"model": "helper", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
        ),
        content_type="application/json",
        HTTP_X_API_KEY=key,
        HTTP_USER_AGENT="claude-cli/2.1.332 (external, sdk-cli)",
    )
    assert reply.status_code == 200, reply.content
    session = reply["X-Contextproto-Session"]
    run = Run.objects.get(session_id=session)
    assert (run.via_gateway, run.client_api) == (True, "anthropic")

    client.force_login(superuser)
    overview = client.get(f"/admin/sessions_app/session/{session}/browse/").content.decode()
    assert 'id="driven-by"' in overview
    assert "Anthropic Messages" in overview and "claude-cli/2.1.332" in overview
    timeline = client.get(f"/admin/sessions_app/session/{session}/browse/runs/{run.pk}/")
    page = timeline.content.decode()
    assert 'id="driven-by-gateway"' in page, page[:2000]
    assert "a gateway client: Anthropic Messages" in page and "claude-cli/2.1.332" in page


def test_a_conversations_sub_agents_and_side_requests_are_shown_under_it(
    make_version, superuser, client
):
    """SPEC §19.1: a sub-agent's child session is linked to its parent and shown under it; a
    side request is shown and priced apart."""
    application, key = application_create(name="Conversation pages")
    version = make_version(
        application,
        name="helper",
        provider="scripted",
        model_config={
            "steps": [
                {"text": "Main."},
                {"text": "A title", "usage": {"inputTokens": 40, "outputTokens": 4}},
                {"text": "Explored."},
            ],
            "wireFormat": "anthropic-messages",
        },
        system_prompt="Help.\n{{context_protocol}}\n{{client_system}}",
    )
    version.prices = {"input": 1, "cacheRead": 0.1, "cacheWrite": 1.25, "output": 4}
    version.save()
    tools = [{"name": "lookup", "input_schema": {"type": "object"}}]

    def send(body, **headers):
        answer = Client().post(
            "/gateway/anthropic/v1/messages",
            data=json.dumps({"model": "helper", "max_tokens": 100, **body}),
            content_type="application/json",
            HTTP_X_API_KEY=key,
            HTTP_X_CLAUDE_CODE_SESSION_ID="conv-7",
            **headers,
        )
        assert answer.status_code == 200, answer.content
        return answer["X-Contextproto-Session"]

    main = send(
        {"tools": tools, "system": "Code.", "messages": [{"role": "user", "content": "go"}]}
    )
    send({"system": "Title it.", "messages": [{"role": "user", "content": "go"}]})
    child = send(
        {"tools": tools, "system": "Explore.", "messages": [{"role": "user", "content": "look"}]},
        HTTP_X_CLAUDE_CODE_AGENT_ID="explorer-1",
    )

    client.force_login(superuser)
    page = client.get(f"/admin/sessions_app/session/{main}/browse/").content.decode()
    assert 'id="gateway-conversation"' in page and "conv-7" in page
    assert 'id="child-sessions"' in page and "explorer-1" in page and child in page
    assert 'id="side-exchanges"' in page and 'id="side-usage"' in page
    assert "1 request answered apart" in page and "0.000056" in page  # 40 x 1 + 4 x 4
    sub = client.get(f"/admin/sessions_app/session/{child}/browse/").content.decode()
    assert 'id="parent-session"' in sub and main in sub
