"""`model.promptCache` (contract §8): schema, validation, the effective setting, the cache key."""

from __future__ import annotations

import re

import pytest

from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.jsonschema_check import SUPPORTED_KEYWORDS
from contextproto.protocol.prompt_cache import (
    PROMPT_CACHE_SCHEMA,
    PromptCache,
    effective_prompt_cache,
    session_cache_key,
    validate_prompt_cache,
)


def _problems(value: object) -> list[tuple[str | None, str]]:
    return [(e["key"], e["code"]) for e in validate_prompt_cache(value).errors]


def test_empty_means_auto_with_five_minutes() -> None:
    checked = validate_prompt_cache({})
    assert checked.errors == []
    assert checked.normalized == {"mode": "auto", "ttl": "5m"}
    assert PromptCache.from_config({}) == PromptCache(mode="auto", ttl="5m")
    assert PromptCache.from_config({}).enabled


def test_given_values_are_kept_and_the_rest_filled_in() -> None:
    assert validate_prompt_cache({"ttl": "1h"}).normalized == {"mode": "auto", "ttl": "1h"}
    setting = PromptCache.from_config({"mode": "off"})
    assert setting == PromptCache(mode="off", ttl="5m") and not setting.enabled
    assert setting.to_wire() == {"mode": "off", "ttl": "5m"}


def test_every_problem_is_listed_with_its_key() -> None:
    checked = validate_prompt_cache({"mode": "sometimes", "ttl": 5, "size": 1, "Ttl": "1h"})
    assert checked.normalized is None
    assert _problems({"mode": "sometimes", "ttl": 5, "size": 1, "Ttl": "1h"}) == [
        ("mode", "prompt_cache_invalid_value"),
        ("ttl", "prompt_cache_invalid_value"),
        ("Ttl", "prompt_cache_unknown_key"),
        ("size", "prompt_cache_unknown_key"),
    ]
    messages = [e["message"] for e in checked.errors]
    assert messages[0] == ("model.promptCache.mode must be one of: auto, off (got 'sometimes').")
    assert messages[1] == "model.promptCache.ttl must be a string (got integer)."
    assert "known keys: mode, ttl" in messages[3]


@pytest.mark.parametrize("value", [None, "auto", ["auto"], 1])
def test_a_value_that_is_not_an_object_is_refused(value: object) -> None:
    assert _problems(value) == [(None, "prompt_cache_not_object")]
    with pytest.raises(ProtocolError) as caught:
        PromptCache.from_config(value)
    assert caught.value.code == "prompt_cache_not_object"


def test_from_config_refuses_with_every_problem() -> None:
    with pytest.raises(ProtocolError) as caught:
        PromptCache.from_config({"ttl": "24h", "extra": True})
    assert caught.value.code == "prompt_cache_invalid_value"
    assert [e["key"] for e in caught.value.details["errors"]] == ["ttl", "extra"]


def test_effective_value_overlays_the_defaults() -> None:
    assert effective_prompt_cache({}) == {"mode": "auto", "ttl": "5m"}
    assert effective_prompt_cache({"mode": "off"}) == {"mode": "off", "ttl": "5m"}
    # A draft's invalid value stays visible, merged or as stored.
    assert effective_prompt_cache({"ttl": "2h"}) == {"mode": "auto", "ttl": "2h"}
    assert effective_prompt_cache("auto") == "auto"


def test_the_schema_is_one_the_admin_form_can_generate_from() -> None:
    assert PROMPT_CACHE_SCHEMA["additionalProperties"] is False
    for name, prop in PROMPT_CACHE_SCHEMA["properties"].items():
        assert set(prop) <= SUPPORTED_KEYWORDS, name
        assert prop["default"] in prop["enum"] and prop["title"] and prop["description"]


def test_the_session_cache_key_is_stable_short_and_reveals_no_id() -> None:
    session_id = "2f1e9c3a-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
    key = session_cache_key(session_id)
    assert key == session_cache_key(session_id)
    assert key != session_cache_key("2f1e9c3a-5b7d-4e8f-9a0b-1c2d3e4f5a6c")
    assert re.fullmatch(r"cp-[0-9a-f]{32}", key)
    assert session_id.replace("-", "")[:8] not in key
