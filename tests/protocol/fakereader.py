"""An in-memory SessionReader: the reference semantics the Django reader must match.

Built from a KV dict and the session's raw messages. Every method answers from
the committed KV (`kv`) exactly as the DB layer must: present keys only, index
order, folds ordered by first index (then id), windows by createdAtIndex then
id. `apply()` commits a ToolOutcome's writes the way the dispatch service does
(one revision per non-empty transaction), so tests can chain calls.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from contextproto.protocol.messages import Fold, RawMessage
from contextproto.protocol.state import (
    FOLD_PREFIX,
    WINDOW_PREFIX,
    checkpoint_key,
    initial_kv,
)
from contextproto.protocol.tools import ToolOutcome


class FakeReader:
    """A dict-backed reader of one session."""

    def __init__(
        self,
        kv: Mapping[str, Any] | None = None,
        messages: Iterable[RawMessage] = (),
        *,
        revision: int = 1,
        with_initial: bool = True,
    ) -> None:
        base = initial_kv() if with_initial else {}
        self.kv: dict[str, Any] = {**base, **copy.deepcopy(dict(kv or {}))}
        self.messages: list[RawMessage] = sorted(messages, key=lambda m: m.index)
        self.revision = revision
        self.calls: list[str] = []  # method names, so tests can see what a handler read

    # ------------------------------------------------------------ test helpers

    def add_fold(self, fold: Fold) -> FakeReader:
        self.kv[FOLD_PREFIX + fold.id] = fold.to_kv()
        return self

    def apply(self, outcome: ToolOutcome) -> None:
        """Commit the outcome's KV writes as one transaction (one revision bump)."""
        if outcome.kv_writes:
            self.kv.update(copy.deepcopy(outcome.kv_writes))
            self.revision += 1

    # ------------------------------------------------------------ SessionReader

    def kv_get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        self.calls.append("kv_get_many")
        return {key: copy.deepcopy(self.kv[key]) for key in keys if key in self.kv}

    def window_messages(
        self, window_id: str, after_index: int, through_index: int
    ) -> list[RawMessage]:
        self.calls.append("window_messages")
        return [
            m
            for m in self.messages
            if m.window_id == window_id and after_index < m.index <= through_index
        ]

    def window_outline(
        self, window_id: str, after_index: int, through_index: int
    ) -> list[RawMessage]:
        self.calls.append("window_outline")
        return [
            replace(m, content="", arguments=None)
            for m in self.messages
            if m.window_id == window_id and after_index < m.index <= through_index
        ]

    def message_windows(self, indices: Sequence[int]) -> dict[int, str]:
        self.calls.append("message_windows")
        wanted = set(indices)
        return {m.index: m.window_id for m in self.messages if m.index in wanted}

    def messages_by_ids(self, message_ids: Sequence[str]) -> list[RawMessage]:
        self.calls.append("messages_by_ids")
        wanted = set(message_ids)
        return [m for m in self.messages if m.id in wanted]

    def message_at(self, index: int) -> RawMessage | None:
        self.calls.append("message_at")
        return next((m for m in self.messages if m.index == index), None)

    def _folds(self) -> list[Fold]:
        folds = [
            Fold.from_kv(key[len(FOLD_PREFIX) :], value)
            for key, value in self.kv.items()
            if key.startswith(FOLD_PREFIX)
        ]
        return sorted(folds, key=lambda f: (f.first_index, f.id))

    def fold(self, fold_id: str) -> Fold | None:
        self.calls.append("fold")
        value = self.kv.get(FOLD_PREFIX + fold_id)
        return None if value is None else Fold.from_kv(fold_id, value)

    def folds_of_window(self, window_id: str, offset: int, limit: int) -> list[Fold]:
        self.calls.append("folds_of_window")
        mine = [f for f in self._folds() if f.window_id == window_id]
        return mine[offset : offset + limit]

    def folds_intersecting(self, window_id: str, first_index: int, last_index: int) -> list[Fold]:
        self.calls.append("folds_intersecting")
        return [
            f
            for f in self._folds()
            if f.window_id == window_id
            and f.first_index <= last_index
            and f.last_index >= first_index
        ]

    def folds_in_range(self, window_id: str, first_index: int, last_index: int) -> list[Fold]:
        self.calls.append("folds_in_range")
        return [
            f
            for f in self._folds()
            if f.window_id == window_id
            and first_index <= f.first_index
            and f.last_index <= last_index
        ]

    def fold_count(self) -> int:
        self.calls.append("fold_count")
        return sum(1 for key in self.kv if key.startswith(FOLD_PREFIX))

    def _windows(self) -> list[tuple[str, dict]]:
        rows = [
            (key[len(WINDOW_PREFIX) :], copy.deepcopy(value))
            for key, value in self.kv.items()
            if key.startswith(WINDOW_PREFIX)
        ]
        return sorted(rows, key=lambda row: (int(row[1].get("createdAtIndex") or 0), row[0]))

    def windows(self, status: str | None, offset: int, limit: int) -> list[tuple[str, dict]]:
        self.calls.append("windows")
        rows = [row for row in self._windows() if status is None or row[1].get("status") == status]
        return rows[offset : offset + limit]

    def window_count(self) -> int:
        self.calls.append("window_count")
        return sum(1 for key in self.kv if key.startswith(WINDOW_PREFIX))

    def search_windows(self, query: str, limit: int) -> list[tuple[str, dict]]:
        self.calls.append("search_windows")
        needle = query.lower()
        found = []
        for window_id, record in self._windows():
            texts = [
                str(record.get("goal") or ""),
                str(record.get("memory") or ""),
                *(str(o) for o in record.get("outcomes") or []),
                str(self.kv.get(checkpoint_key(window_id)) or ""),
            ]
            if any(needle in text.lower() for text in texts):
                found.append((window_id, record))
                if len(found) >= limit:
                    break
        return found
