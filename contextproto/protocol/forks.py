"""Where a fork may cut a session's log (contract §10, §2.7).

A fork copies the messages #1..bound. A call without its result in the copy would leave the
fork with an open call no dispatch can answer (its receipt belongs to the original), so a
bound inside an interaction group with an unanswered call moves back to before that group.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from contextproto.protocol.groups import build_groups
from contextproto.protocol.messages import RawMessage


def fork_bound(log: Sequence[RawMessage], through_index: int) -> int:
    """The highest bound <= `through_index` that cuts no group with an unanswered call.

    `log` holds the session's messages with index <= through_index in index order (an
    outline is enough: kind, window, toolCallId). Groups are per window; a call counts as
    unanswered when its result is not at or below the bound. Moving back can open a group
    that was closed at the first bound (a result after the new bound), so this repeats
    until no group is cut.
    """
    bound = through_index
    while bound > 0:
        by_window: dict[str, list[RawMessage]] = defaultdict(list)
        for message in log:
            if message.index > bound:
                break
            by_window[message.window_id].append(message)
        cut = [
            group.first_index
            for messages in by_window.values()
            for group in build_groups(messages)
            if group.open
        ]
        if not cut:
            return bound
        bound = min(cut) - 1
    return max(bound, 0)
