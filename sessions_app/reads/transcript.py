"""The tail of a session's transcript (contract §14), read off the end of its log.

A gateway request is compared with the last items of the transcript only (as many as it has
messages), so the read starts near the log's end and reaches back page by page until it has
enough, whatever the session's length. Hot and cold messages are merged as every reader does.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextproto.protocol import catalog
from contextproto.protocol.gateway.transcript import LogTranscript, transcript_of_log
from sessions_app.reads import hot_sql, raw_log

# Messages read first: an incremental client's request needs two items, which a few answers
# (with their protocol calls and results) hold.
FIRST_PAGE = 24
# A read that would go further back than this gives up looking for the gateway's last reply
# (the request is then not taken for a retry); the transcript items it wants are found long
# before in any session a client can resend (a body is at most a few MB).
MAX_READ = 50_000


@dataclass(frozen=True)
class TranscriptTail:
    """The transcript read off the log's last `read_from`… messages.

    `complete`: the read reached the log's start, so `transcript.items` is all of it.
    """

    transcript: LogTranscript
    complete: bool


def transcript_tail(
    session_id: object, last_index: int, *, wanted: int, before_index: int | None = None
) -> TranscriptTail:
    """At least `wanted` items of the transcript (all of them if it has fewer); with
    `before_index`, also `wanted` items whose messages come before that MessageIndex."""
    span = max(FIRST_PAGE, 4 * wanted + 8)
    while True:
        start = max(last_index - span, 0)
        messages = hot_sql.log_tail(session_id, start, last_index)
        if messages is None:  # part of the range is archived: the merging reader
            messages = raw_log.log_page(session_id, window_id=None, after_index=start, limit=span)
        transcript = transcript_of_log(messages, catalog.PROTOCOL_TOOL_NAMES, from_start=start == 0)
        items = transcript.items
        enough = len(items) >= wanted
        if before_index is not None and enough:
            enough = sum(1 for i in items if i.position < before_index) >= wanted
        if start == 0 or enough or span >= MAX_READ:
            return TranscriptTail(transcript=transcript, complete=start == 0)
        span *= 4
