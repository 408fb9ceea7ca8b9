"""Model answers as the providers' SDKs return them, and the turn call, for the tests of
`POST sessions/{id}/turns/` (tests/api/test_turns*.py)."""

from __future__ import annotations

import json

LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "required": ["q"],
    "additionalProperties": False,
}
MEMORY = {"purpose": "keep the request", "memory": "Quote 5000 x A-100."}
THINKING = {"type": "thinking", "thinking": "A lookup first.", "signature": "c2lnLTE="}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
OPENAI_USAGE = {
    "prompt_tokens": 3512,
    "completion_tokens": 48,
    "total_tokens": 3560,
    "prompt_tokens_details": {"cached_tokens": 3072, "audio_tokens": 0},
}
ANTHROPIC_USAGE = {
    "input_tokens": 12,
    "output_tokens": 30,
    "cache_read_input_tokens": 3400,
    "cache_creation_input_tokens": 100,
    "server_tool_use": None,
    "service_tier": "standard",
}


def openai_completion(content, *calls, usage=OPENAI_USAGE) -> dict:
    """A chat.completion as `ChatCompletion.model_dump()` gives it."""
    message = {
        "content": content,
        "refusal": None,
        "role": "assistant",
        "annotations": [],
        "audio": None,
        "function_call": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for call_id, name, arguments in calls
        ]
        or None,
    }
    return {
        "id": "chatcmpl-Bx1",
        "object": "chat.completion",
        "created": 1767000000,
        "model": "gpt-4.1-2025-04-14",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": usage,
        "service_tier": "default",
        "system_fingerprint": "fp_1",
    }


def anthropic_message(*blocks, usage=ANTHROPIC_USAGE) -> dict:
    """A Messages response as `Message.model_dump()` gives it."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": list(blocks),
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": usage,
    }


def turn(s, body: dict, status: int = 201) -> dict:
    answer = s.client.post(s.path("turns/"), body)
    assert answer.status_code == status, answer.content
    return answer.json()


def log(s) -> list[dict]:
    return s.client.get(s.path("messages/"), afterIndex=-1).json()["messages"]
