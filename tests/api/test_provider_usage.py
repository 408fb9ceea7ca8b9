"""Usage reported in the provider's own shape (contract §8.2, §8), over HTTP.

`POST sessions/{id}/snapshots/{snapshotId}/usage/` `{"usage": {...}}` takes the usage object
as the OpenAI or Anthropic SDK returned it and stores §15's counts.
"""

from __future__ import annotations

import pytest

# As `ChatCompletion.usage.model_dump()` gives it.
OPENAI_USAGE = {
    "prompt_tokens": 2000,
    "completion_tokens": 50,
    "total_tokens": 2050,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {
        "reasoning_tokens": 0,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    },
}
# As `Message.usage.model_dump()` gives it: input_tokens counts the uncached part only.
ANTHROPIC_USAGE = {
    "input_tokens": 100,
    "output_tokens": 40,
    "cache_read_input_tokens": 3000,
    "cache_creation_input_tokens": 500,
    "cache_creation": {"ephemeral_5m_input_tokens": 500, "ephemeral_1h_input_tokens": 0},
    "server_tool_use": None,
    "service_tier": "standard",
}
PRICES = {"input": 2.0, "cacheRead": 0.2, "cacheWrite": 2.5, "output": 10.0}


def report(s, body: dict):
    snapshot = s.project()
    return snapshot, s.client.post(s.path(f"snapshots/{snapshot['snapshotId']}/usage/"), body)


@pytest.mark.parametrize(
    "usage, counts",
    [
        (
            OPENAI_USAGE,
            {
                "inputTokens": 2000,
                "outputTokens": 50,
                "cacheReadInputTokens": 1024,
                "cacheWriteInputTokens": 0,
            },
        ),
        (
            ANTHROPIC_USAGE,
            {
                "inputTokens": 3600,  # 100 uncached + 3000 read + 500 written
                "outputTokens": 40,
                "cacheReadInputTokens": 3000,
                "cacheWriteInputTokens": 500,
            },
        ),
    ],
    ids=["openai", "anthropic"],
)
def test_a_provider_usage_object_is_stored_as_the_services_counts(api_session, usage, counts):
    s = api_session(version=2, prices=PRICES)
    s.input("quote")
    snapshot, answer = report(s, {"usage": usage})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["usage"] == counts and body["replayed"] is False
    session_usage = s.client.get(s.path()).json()["usage"]
    assert session_usage["inputTokens"] == counts["inputTokens"]
    assert session_usage["cacheReadInputTokens"] == counts["cacheReadInputTokens"]
    assert session_usage["cacheWriteInputTokens"] == counts["cacheWriteInputTokens"]
    uncached = counts["inputTokens"] - counts["cacheReadInputTokens"]
    uncached -= counts["cacheWriteInputTokens"]
    cost = (
        uncached * 2.0
        + counts["cacheReadInputTokens"] * 0.2
        + counts["cacheWriteInputTokens"] * 2.5
        + counts["outputTokens"] * 10.0
    ) / 1_000_000
    assert session_usage["cost"] == pytest.approx(cost)

    # The same object again replays, and so do the same counts in the service's own shape.
    path = s.path(f"snapshots/{snapshot['snapshotId']}/usage/")
    again = s.client.post(path, {"usage": usage}).json()
    assert again["replayed"] is True
    assert s.client.post(path, counts).json()["replayed"] is True


def test_nulls_the_sdks_write_for_absent_counts_are_zero(api_session):
    s = api_session(version=2)
    s.input("quote")
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": None}
    assert report(s, {"usage": usage})[1].json()["usage"]["cacheReadInputTokens"] == 0
    usage = {
        "input_tokens": 10,
        "output_tokens": 2,
        "cache_read_input_tokens": None,
        "cache_creation_input_tokens": None,
    }
    assert report(s, {"usage": usage})[1].json()["usage"]["inputTokens"] == 10


@pytest.mark.parametrize(
    "body, code, field",
    [
        ({"usage": {"prompt_tokens": 1, "input_tokens": 1}}, "usage_invalid", "usage"),
        ({"usage": {"total_tokens": 5}}, "usage_invalid", "usage"),
        ({"usage": []}, "usage_invalid", "usage"),
        (
            {"usage": {"prompt_tokens": -1, "completion_tokens": 0}},
            "usage_invalid",
            "usage.prompt_tokens",
        ),
        ({"usage": {"prompt_tokens": 5}}, "usage_invalid", "usage.completion_tokens"),
        (
            {"usage": {"input_tokens": 5, "output_tokens": "7"}},
            "usage_invalid",
            "usage.output_tokens",
        ),
        (
            {
                "usage": {
                    "prompt_tokens": 5,
                    "completion_tokens": 1,
                    "prompt_tokens_details": {"cached_tokens": 6},
                }
            },
            "usage_invalid",
            "usage.prompt_tokens_details.cached_tokens",
        ),
        ({"usage": OPENAI_USAGE, "inputTokens": 1}, "invalid_request", "inputTokens"),
        ({"outputTokens": 1}, "invalid_request", "inputTokens"),
    ],
)
def test_a_usage_object_of_no_known_shape_is_refused_naming_the_field(
    api_session, body, code, field
):
    s = api_session(version=2)
    s.input("quote")
    snapshot, answer = report(s, body)
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == code
    if code == "usage_invalid":
        assert error["details"]["field"] == field
    else:
        assert [e["field"] for e in error["details"]["errors"]] == [field]
    listed = s.client.get(s.path("snapshots/")).json()["snapshots"]
    assert next(x for x in listed if x["snapshotId"] == snapshot["snapshotId"])["usage"] is None
