"""Model answers holding characters no database stores are written with U+FFFD instead."""

from __future__ import annotations

from sessions_app.providers.base import ModelReply, ToolCallRequest, storable_reply


def reply(text, arguments) -> ModelReply:
    return ModelReply(
        text=text,
        tool_calls=(
            ToolCallRequest(id="c\x001", name="context_task_memory_set", arguments=arguments),
        ),
        usage={"inputTokens": 1, "outputTokens": 1},
        stop_reason="tool_use",
        raw={"content": "a\x00"},
    )


def test_nul_and_lone_surrogates_become_replacement_characters_with_a_note():
    cleaned = storable_reply(reply("a\x00b\ud800", {"memory": ["x\udfff", {"k\x00": 1}]}))
    assert cleaned.text == "a\ufffdb\ufffd"
    call = cleaned.tool_calls[0]
    assert call.id == "c\ufffd1"
    assert call.arguments == {"memory": ["x\ufffd", {"k\ufffd": 1}]}
    assert cleaned.raw == {"content": "a\ufffd"}
    assert any("U+FFFD" in note for note in cleaned.notes)


def test_a_clean_reply_is_returned_unchanged():
    clean = reply("fine \U0001f600", {"memory": "ok"})
    clean = ModelReply(
        text=clean.text,
        tool_calls=(ToolCallRequest(id="c1", name="n", arguments={"memory": "ok"}),),
        usage=clean.usage,
        stop_reason=None,
    )
    assert storable_reply(clean) is clean
