"""The model schema: one list of settings that the admin form and publish both read."""

from __future__ import annotations

import math

import pytest

from agents.model_schema import FIELDS_BY_NAME, MODEL_FIELDS, model_problems
from agents.models import AgentVersion
from contextproto.protocol.prompt_cache import PROMPT_CACHE_SCHEMA
from contextproto.usage import PRICE_KEYS

PROVIDERS = "scripted, openai, anthropic, external"


def version(**fields) -> AgentVersion:
    values = {
        "model_provider": "openai",
        "model_name": "gpt",
        "max_input_tokens": 8000,
        "maintenance_trigger_ratio": 0.75,
        "prompt_cache": {},
        "prices": None,
        **fields,
    }
    return AgentVersion(**values)


# The problems publish answered before the schema existed, word for word.
@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"model_provider": ""},
            (
                "model.provider",
                "model_provider_invalid",
                f"model.provider must be one of {PROVIDERS}.",
            ),
        ),
        (
            {"model_provider": "gemini"},
            (
                "model.provider",
                "model_provider_invalid",
                f"model.provider must be one of {PROVIDERS}.",
            ),
        ),
        ({"model_name": ""}, ("model.name", "required", "model.name is required.")),
        (
            {"max_input_tokens": None},
            (
                "model.maxInputTokens",
                "required",
                "model.maxInputTokens must be an integer of at least 1000.",
            ),
        ),
        (
            {"max_input_tokens": 999},
            (
                "model.maxInputTokens",
                "out_of_range",
                "model.maxInputTokens must be an integer of at least 1000.",
            ),
        ),
        *[
            (
                {"maintenance_trigger_ratio": ratio},
                (
                    "model.maintenanceTriggerRatio",
                    "out_of_range",
                    "model.maintenanceTriggerRatio must be strictly between 0 and 1.",
                ),
            )
            for ratio in (0, 1, 1.5, -0.1, math.nan, math.inf, None)
        ],
    ],
)
def test_publish_refuses_model_settings_as_it_always_did(fields, expected):
    problems = [(p["field"], p["code"], p["message"]) for p in model_problems(version(**fields))]
    assert problems == [expected]


def test_valid_settings_have_no_problem_and_connection_settings_are_not_checked_at_publish():
    assert model_problems(version(maintenance_trigger_ratio=0.999, max_input_tokens=1000)) == []
    # A connection setting publish never checked stays unchecked there (the form checks it).
    assert (
        model_problems(version(model_config={"baseUrl": "not a url", "timeoutSeconds": -1})) == []
    )


def test_prompt_cache_and_prices_keep_their_own_checks():
    found = model_problems(
        version(prompt_cache={"mode": "always"}, prices={"input": 1, "output": -1, "euro": 2})
    )
    assert [(p["field"], p["code"]) for p in found] == [
        ("model.promptCache.mode", "prompt_cache_invalid_value"),
        ("model.prices.euro", "price_unknown"),
        ("model.prices.cacheRead", "price_required"),
        ("model.prices.cacheWrite", "price_required"),
        ("model.prices.output", "price_out_of_range"),
    ]


def test_the_schema_covers_every_setting_once_from_its_single_source():
    names = [f.name for f in MODEL_FIELDS]
    assert len(names) == len(set(names))
    assert len({f.form_name for f in MODEL_FIELDS}) == len(names)
    assert FIELDS_BY_NAME["provider"].choices == tuple(AgentVersion.Provider.values)
    for key, schema in PROMPT_CACHE_SCHEMA["properties"].items():
        field = FIELDS_BY_NAME[f"promptCache.{key}"]
        assert field.choices == tuple(schema["enum"]) and field.default == schema["default"]
    assert [f.key for f in MODEL_FIELDS if f.store == "prices"] == list(PRICE_KEYS)
    for name in ("config.baseUrl", "config.apiKeyEnv", "config.maxOutputTokens"):
        assert FIELDS_BY_NAME[name].checked_at == "save"


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        (
            "config.baseUrl",
            ["https://llm.internal:8443/v1", "http://127.0.0.1:11434"],
            ["ftp://x", "llm.internal", "https://a b"],
        ),
        ("config.apiKeyEnv", ["OPENAI_KEY_TEAM2", "_K"], ["2KEY", "MY KEY", "sk-abc", ""]),
        ("config.maxOutputTokens", [1, 4096], [0, -5, 1.5, True]),
        ("config.timeoutSeconds", [0.5, 60, 3599], [0, -1, 3600, math.nan]),
    ],
)
def test_connection_settings_accept_and_refuse_by_the_schema(name, good, bad):
    field = FIELDS_BY_NAME[name]
    assert all(field.valid(v) for v in good)
    assert not any(field.valid(v) for v in bad if v != "")


def test_publish_takes_the_openai_api_and_refuses_one_it_does_not_know():
    for api in ("chat", "responses"):
        assert model_problems(version(model_config={"api": api})) == []
    assert model_problems(version(model_config={"api": "assistants"})) == [
        {
            "field": "model.config.api",
            "code": "out_of_range",
            "message": "model.config.api must be one of chat, responses.",
        }
    ]
