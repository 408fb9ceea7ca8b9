"""Fixtures of the API tests."""

from __future__ import annotations

import pytest

from agents.models import Tool
from tests.api.turn_bodies import LOOKUP_SCHEMA


@pytest.fixture
def host(api_session):
    """An external unified@2 session with the host tool `lookup` bound, and its first input."""

    def build(version: int = 2, **fields):
        s = api_session(version=version, **fields)
        tool = Tool.objects.create(application=s.app, name="lookup", input_schema=LOOKUP_SCHEMA)
        s.agent_version.tools.add(tool)
        s.input("What do 5000 units of A-100 cost?")
        return s

    return build
