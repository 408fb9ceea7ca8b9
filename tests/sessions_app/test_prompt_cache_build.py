"""projection_build applies the version's `model.promptCache` to the stored request (contract
§8)."""

from __future__ import annotations

import json

import pytest

from agents.models import Tool
from contextproto.errors import ApplicationError
from contextproto.protocol.prompt_cache import session_cache_key
from sessions_app.services.projection import projection_build
from sessions_app.services.runs import run_start
from sessions_app.services.sessions import session_create


def _session(application, make_version, **fields):
    created, _key = session_create(agent_version=make_version(application, **fields))
    run_start(session_id=created.id, content="Quote ACME")
    return created


def test_default_setting_marks_anthropic_and_keys_openai(application, make_version):
    session = _session(application, make_version)
    anthropic = projection_build(session_id=session.id, provider="anthropic-messages").request
    assert anthropic["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert anthropic["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    openai = projection_build(session_id=session.id, provider="openai-chat").request
    assert openai["prompt_cache_key"] == session_cache_key(str(session.id))
    other = _session(application, make_version, name="other")
    key = projection_build(session_id=other.id, provider="openai-chat").request["prompt_cache_key"]
    assert key != openai["prompt_cache_key"]


def test_one_hour_ttl_and_mode_off_come_from_the_version(application, make_version):
    hour = _session(application, make_version, prompt_cache={"mode": "auto", "ttl": "1h"})
    request = projection_build(session_id=hour.id, provider="anthropic-messages").request
    assert request["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    off = _session(application, make_version, name="off", prompt_cache={"mode": "off"})
    for provider in ("anthropic-messages", "openai-chat", "neutral"):
        request = projection_build(session_id=off.id, provider=provider).request
        assert "cache_control" not in json.dumps(request)
        assert "prompt_cache_key" not in request


def test_a_stored_setting_publish_would_refuse_is_a_400_not_a_500(application, make_version):
    session = _session(application, make_version, prompt_cache={"ttl": "1d"})
    with pytest.raises(ApplicationError) as refused:
        projection_build(session_id=session.id, provider="anthropic-messages")
    assert (refused.value.code, refused.value.status) == ("prompt_cache_invalid_value", 400)


def test_host_tools_are_sent_in_name_order(application, make_version):
    version = make_version(application)
    for name in ("zeta", "alpha", "mid"):
        version.tools.add(Tool.objects.create(application=application, name=name, input_schema={}))
    session, _key = session_create(agent_version=version)
    run_start(session_id=session.id, content="go")
    tools = projection_build(session_id=session.id, provider="anthropic-messages").request["tools"]
    assert [t["name"] for t in tools][-3:] == ["alpha", "mid", "zeta"]
