"""The database side of the engine's SessionReader port: every read scoped to one session."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from django.db.models import Q

from contextproto.protocol.messages import Fold, RawMessage
from contextproto.protocol.state import window_key
from sessions_app.models import FoldRecord, KVEntry, WindowRecord
from sessions_app.reads import hot_sql, raw_log

_UNSET = object()  # a key read and found unset


class DbSessionReader:
    """Reads of one session for tool handlers; the model can never name another session."""

    def __init__(self, session_id: Any, *, prefetch: Sequence[str] = ()) -> None:
        """`prefetch`: KV keys read along with the first KV read, and every value read kept
        for this reader's life. Only for a reader that lives inside one transaction holding
        the session row lock (a dispatch), where KV cannot change under it."""
        self.session_id = session_id
        self._prefetch = tuple(prefetch)
        self._kv: dict[str, Any] | None = {} if prefetch else None
        # Index ranges of folds this reader returned, so reading their messages back only
        # touches the archive chunks that range overlaps.
        self._fold_ranges: dict[tuple[str, ...], tuple[int, int]] = {}

    def _remember(self, folds: list[Fold]) -> list[Fold]:
        for fold in folds:
            self._fold_ranges[tuple(fold.message_ids)] = (fold.first_index, fold.last_index)
        return folds

    def kv_get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        if self._kv is None:
            return raw_log.kv_values(self.session_id, keys)
        missing = [k for k in keys if k not in self._kv]
        if missing:
            wanted = list(dict.fromkeys([*missing, *self._prefetch]))
            self._prefetch = ()
            found = hot_sql.kv_values(self.session_id, wanted)
            self._kv.update({k: found.get(k, _UNSET) for k in wanted})
        # Copies: a handler may change what it read and read the key again.
        return {k: copy.deepcopy(self._kv[k]) for k in keys if self._kv[k] is not _UNSET}

    def window_messages(
        self, window_id: str, after_index: int, through_index: int
    ) -> list[RawMessage]:
        return raw_log.log_window(self.session_id, window_id, after_index, through_index)

    def window_outline(
        self, window_id: str, after_index: int, through_index: int
    ) -> list[RawMessage]:
        hot = hot_sql.window_outline(self.session_id, window_id, after_index, through_index)
        if hot is not None:
            return hot
        return raw_log.log_window(
            self.session_id, window_id, after_index, through_index, outline=True
        )

    def message_windows(self, indices: Sequence[int]) -> dict[int, str]:
        return raw_log.log_windows_of(self.session_id, indices)

    def messages_by_ids(self, message_ids: Sequence[str]) -> list[RawMessage]:
        index_range = self._fold_ranges.get(tuple(message_ids))
        return raw_log.log_by_ids(self.session_id, message_ids, index_range=index_range)

    def message_at(self, index: int) -> RawMessage | None:
        return raw_log.log_at(self.session_id, index)

    def fold(self, fold_id: str) -> Fold | None:
        records = FoldRecord.objects.filter(session_id=self.session_id, fold_id=fold_id)
        folds = self._remember(raw_log.folds_from_records(self.session_id, records))
        return folds[0] if folds else None

    def folds_of_window(self, window_id: str, offset: int, limit: int) -> list[Fold]:
        records = FoldRecord.objects.filter(
            session_id=self.session_id, window_id=window_id
        ).order_by("first_index")[offset : offset + limit]
        return raw_log.folds_from_records(self.session_id, records)

    def folds_intersecting(self, window_id: str, first_index: int, last_index: int) -> list[Fold]:
        records = FoldRecord.objects.filter(
            session_id=self.session_id,
            window_id=window_id,
            first_index__lte=last_index,
            last_index__gte=first_index,
        ).order_by("first_index")
        return raw_log.folds_from_records(self.session_id, records)

    def folds_in_range(self, window_id: str, first_index: int, last_index: int) -> list[Fold]:
        records = FoldRecord.objects.filter(
            session_id=self.session_id,
            window_id=window_id,
            first_index__gte=first_index,
            last_index__lte=last_index,
        ).order_by("first_index")
        return raw_log.folds_from_records(self.session_id, records)

    def fold_count(self) -> int:
        return FoldRecord.objects.filter(session_id=self.session_id).count()

    def _records(self, window_ids: Sequence[str]) -> list[tuple[str, dict]]:
        values = raw_log.kv_values(self.session_id, [window_key(w) for w in window_ids])
        return [(w, values[window_key(w)]) for w in window_ids if window_key(w) in values]

    def windows(self, status: str | None, offset: int, limit: int) -> list[tuple[str, dict]]:
        rows = WindowRecord.objects.filter(session_id=self.session_id)
        if status:
            rows = rows.filter(status=status)
        ids = list(
            rows.order_by("created_at_index", "window_id").values_list("window_id", flat=True)[
                offset : offset + limit
            ]
        )
        return self._records(ids)

    def window_count(self) -> int:
        return WindowRecord.objects.filter(session_id=self.session_id).count()

    def search_windows(self, query: str, limit: int) -> list[tuple[str, dict]]:
        # Window records and checkpoints are bounded by maxWindows, so a scan of them is bounded.
        needle = query.casefold()
        entries = KVEntry.objects.filter(session_id=self.session_id).filter(
            Q(key__startswith="window/") | Q(key__startswith="checkpoint/")
        )
        records: dict[str, dict] = {}
        checkpoints: dict[str, str] = {}
        for key, value in entries.values_list("key", "value"):
            if key.startswith("window/"):
                records[key[len("window/") :]] = value
            else:
                checkpoints[key[len("checkpoint/") :]] = str(value)
        found = []
        for window_id in sorted(records, key=lambda w: (records[w].get("createdAtIndex", 0), w)):
            record = records[window_id]
            haystack = " ".join(
                [
                    window_id,
                    str(record.get("goal", "")),
                    str(record.get("memory", "")),
                    " ".join(str(o) for o in record.get("outcomes", [])),
                    checkpoints.get(window_id, ""),
                ]
            ).casefold()
            if needle in haystack:
                found.append((window_id, record))
                if len(found) >= limit:
                    break
        return found
