"""`context_history_read` (contract §9): one raw message by index, paged like context_fold_read."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from contextproto.protocol import catalog
from contextproto.protocol.catalog import get_version
from contextproto.protocol.foldtext import (
    FOLD_READ_SLICE_UNITS,
    render_fold_text,
    render_message_text,
    utf16_len,
)
from contextproto.protocol.messages import Frame
from contextproto.protocol.state import KEY_ACTIVE_WINDOW, covered_key, new_window_record
from contextproto.protocol.tools import ToolCall, ToolContext, ToolOutcome, dispatch
from tests.protocol.fakereader import FakeReader
from tests.protocol.logbuilder import LogBuilder

V4 = get_version("unified", 4)
READ = catalog.HISTORY_READ
REV = 7


def run(
    reader: FakeReader,
    args: dict[str, Any],
    *,
    bound: int | None = None,
    frozen: int = REV,
    version: catalog.ProtocolVersion = V4,
) -> ToolOutcome:
    bound = len(reader.messages) if bound is None else bound
    call = ToolCall(
        tool_call_id="tc1",
        tool_name=READ,
        arguments={"purpose": "read it back", **args},
        call_index=bound + 1,
        call_window_id=reader.kv[KEY_ACTIVE_WINDOW],
        frame=Frame(frozen, bound),
    )
    context = ToolContext(
        version=version, options=version.defaults, current_revision=REV, maintainer_bound=False
    )
    return dispatch(call, context, reader)


def ok(outcome: ToolOutcome) -> dict[str, Any]:
    assert outcome.result["success"] is True, outcome.result
    # Read-only: nothing to commit, nothing to do after.
    assert outcome.kv_writes == {} and outcome.effects == ()
    return outcome.result


def err(outcome: ToolOutcome) -> dict[str, Any]:
    assert outcome.result["success"] is False, outcome.result
    assert outcome.kv_writes == {} and outcome.effects == ()
    return outcome.result["error"]


def _log() -> LogBuilder:
    """main: input #1, a lookup #2/#3; window b: a lookup #4/#5 with astral characters."""
    log = LogBuilder()
    log.input("quote please")
    log.exchange("price_lookup", "1300 EUR")
    log.switch("b")
    call = log.call("scrape", {"q": "漢字 😀"})
    log.result(call, "結果 🎉")
    log.switch("main")
    return log


def _reader(log: LogBuilder) -> FakeReader:
    reader = FakeReader({}, log.messages, revision=REV)
    reader.kv["window/b"] = new_window_record(goal="b", created_at_index=4)
    return reader


def test_reads_one_raw_message_as_the_json_fold_read_holds_for_it() -> None:
    log = _log()
    result = ok(run(_reader(log), {"index": 3}))
    text = render_message_text(log.at(3))
    assert result == {
        "success": True,
        "index": 3,
        "windowId": "main",
        "text": text,
        "cursor": 0,
        "nextCursor": None,
        "totalLength": utf16_len(text),
    }
    # The same object context_fold_read serves for this message inside a fold.
    assert json.loads(text) == json.loads(render_fold_text([log.at(3)]))[0]
    assert json.loads(text)["content"] == "1300 EUR"


def test_reads_a_message_of_another_window_and_a_compressed_one_without_switching() -> None:
    log = _log()
    reader = _reader(log)
    reader.kv[covered_key("main")] = 3  # #1-#3 are under main's checkpoint
    other = ok(run(reader, {"index": 5}))
    assert other["windowId"] == "b"
    assert json.loads(other["text"])["content"] == "結果 🎉"
    compressed = ok(run(reader, {"index": 2}))
    assert json.loads(compressed["text"])["toolName"] == "price_lookup"
    assert reader.kv[KEY_ACTIVE_WINDOW] == "main"


def test_is_read_only_so_a_stale_revision_does_not_refuse_it() -> None:
    result = ok(run(_reader(_log()), {"index": 1}, frozen=REV - 3))
    assert result["index"] == 1


def test_pages_in_utf16_slices_without_splitting_a_surrogate_pair() -> None:
    def build(pad: str) -> LogBuilder:
        log = LogBuilder()
        call = log.call("scrape")
        log.result(call, pad + "😀" * 20000)
        return log

    # Astral characters take two UTF-16 units each; pad the content so that the first
    # 12000-unit limit falls between the two halves of a pair.
    text = render_message_text(build("").at(2))
    first = text.encode("utf-16-le").index("😀".encode("utf-16-le")) // 2
    log = build("" if (FOLD_READ_SLICE_UNITS - first) % 2 else "x")
    reader = FakeReader({}, log.messages, revision=REV)
    full = render_message_text(log.at(2))
    pieces, cursor, cursors = [], 0, []
    while cursor is not None:
        result = ok(run(reader, {"index": 2, "cursor": cursor}))
        assert result["cursor"] == cursor
        assert utf16_len(result["text"]) <= FOLD_READ_SLICE_UNITS
        # A slice never ends on the first half of a pair, so it is valid text on its own.
        result["text"].encode("utf-8")
        pieces.append(result["text"])
        cursors.append(cursor)
        cursor = result["nextCursor"]
    assert "".join(pieces) == full
    assert len(pieces) > 3
    assert result["totalLength"] == utf16_len(full)
    # At least one slice was shortened by one unit to keep a pair whole.
    assert any((b - a) == FOLD_READ_SLICE_UNITS - 1 for a, b in itertools.pairwise(cursors))


@pytest.mark.parametrize("where", ["inside a pair", "past the end"])
def test_a_cursor_inside_a_pair_or_past_the_end_fails_like_fold_read(where: str) -> None:
    log = LogBuilder()
    log.text("😀")
    reader = FakeReader({}, log.messages, revision=REV)
    text = render_message_text(log.at(1))
    if where == "inside a pair":
        cursor = text.encode("utf-16-le").index("😀".encode("utf-16-le")) // 2 + 1
    else:
        cursor = utf16_len(text) + 1
    error = err(run(reader, {"index": 1, "cursor": cursor}))
    assert (error["code"], error["argument"], error["tool"]) == (
        "invalid_arguments",
        "cursor",
        READ,
    )
    assert error["correctable"] is True
    # The very same shape context_fold_read answers with for such a cursor.
    assert "nextCursor of the previous read" in error["message"]


def test_an_index_above_the_calls_frozen_bound_is_a_correctable_error() -> None:
    log = _log()
    reader = _reader(log)
    # #5 exists, but the call was made from a view whose bound was #4.
    error = err(run(reader, {"index": 5}, bound=4))
    assert error["code"] == "history_index_out_of_range"
    assert error["correctable"] is True
    assert (error["index"], error["upperBound"], error["argument"]) == (5, 4, "index")
    assert "#1 to #4" in error["message"]
    assert "message_at" not in reader.calls  # refused before any read


@pytest.mark.parametrize("index", [0, -1])
def test_an_index_below_1_fails_the_argument_schema(index: int) -> None:
    error = err(run(_reader(_log()), {"index": index}))
    assert (error["code"], error["argument"]) == ("invalid_arguments", "index")


@pytest.mark.parametrize(
    ("args", "argument"),
    [({}, "index"), ({"index": "3"}, "index"), ({"index": 1, "windowId": "b"}, "windowId")],
)
def test_other_bad_arguments_are_invalid_arguments(args: dict, argument: str) -> None:
    error = err(run(_reader(_log()), args))
    assert (error["code"], error["argument"]) == ("invalid_arguments", argument)


def test_a_message_the_log_cannot_load_is_reported_not_invented() -> None:
    log = _log()
    reader = _reader(log)
    reader.messages = [m for m in reader.messages if m.index != 2]
    error = err(run(reader, {"index": 2}))
    assert error["code"] == "history_message_missing"
    assert error["correctable"] is False


@pytest.mark.parametrize("version", [1, 2, 3])
def test_earlier_versions_do_not_have_the_tool(version: int) -> None:
    error = err(run(_reader(_log()), {"index": 1}, version=get_version("unified", version)))
    assert error["code"] == "tool_unknown"
