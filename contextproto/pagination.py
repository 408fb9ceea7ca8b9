"""Keyset pagination: the one way a list endpoint pages (contract §12 "Lists use cursor
pagination").

A list is ordered by a unique key; its cursor is the key of the last row of the previous page,
base64 JSON, opaque to clients. A `Keyset` says which fields a cursor holds and how to filter
the rows after it; `keyset_page` reads one page and the cursor of the next. Cursors are checked
against the keyset's shape before they reach a query (400 `invalid_cursor` otherwise).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from contextproto.errors import INVALID_CURSOR, ApplicationError
from contextproto.protocol.catalog import JSON_INTEGER_MAX

CURSOR_TEXT_MAX = 256  # the longest text a cursor of ours holds is a KV key or a timestamp

Position = dict[str, Any]


def encode_cursor(position: Position) -> str:
    return base64.urlsafe_b64encode(json.dumps(position, separators=(",", ":")).encode()).decode()


def decode_cursor(raw: str | None, shape: dict[str, type]) -> Position | None:
    """Decode a list cursor this API issued; refuse anything else with 400 `invalid_cursor`.

    `shape` names every field and its type: a cursor that decodes but holds other fields,
    other types, NUL characters or integers outside the index range is as foreign as
    garbage, and must not reach a query.
    """
    if not raw:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(raw.encode()))
    except (ValueError, UnicodeError, RecursionError) as exc:
        raise invalid_cursor() from exc
    if not isinstance(value, dict) or set(value) != set(shape):
        raise invalid_cursor()
    for name, expected in shape.items():
        field = value[name]
        if type(field) is not expected:  # bool is not int; exact types only
            raise invalid_cursor()
        if isinstance(field, int) and not 0 <= field <= JSON_INTEGER_MAX:
            raise invalid_cursor()
        if isinstance(field, str) and ("\x00" in field or len(field) > CURSOR_TEXT_MAX):
            raise invalid_cursor()
    return value


def invalid_cursor() -> ApplicationError:
    return ApplicationError(
        INVALID_CURSOR,
        "The cursor is not one this API issued; pass nextCursor from the previous page as is, "
        "or leave it out to start at the beginning.",
        {"field": "cursor"},
    )


@dataclass(frozen=True)
class Keyset:
    """How one list is ordered and how its cursor names a position in that order.

    `order` is a unique ordering (its last field breaks ties); `shape` the cursor's fields
    and their exact types; `position` the cursor of a row; `after` the rows that follow a
    position, which may raise `invalid_cursor()` for a value the shape cannot express (a
    malformed timestamp).
    """

    order: tuple[str, ...]
    shape: dict[str, type]
    position: Callable[[Any], Position]
    after: Callable[[QuerySet, Position], QuerySet]

    def decode(self, raw: str | None) -> Position | None:
        return decode_cursor(raw, self.shape)


# Lists in the order rows were created, by their integer primary key.
BY_ID = Keyset(
    order=("id",),
    shape={"id": int},
    position=lambda row: {"id": row.pk},
    after=lambda rows, at: rows.filter(id__gt=at["id"]),
)


@dataclass(frozen=True)
class Page[T]:
    """One page of a list and the cursor of the next (None on the last page)."""

    items: list[T]
    next_cursor: str | None


def split_page[T](rows: Sequence[T], limit: int) -> tuple[list[T], bool]:
    """The first `limit` of `rows` (read with limit + 1) and whether more follow."""
    return list(rows[:limit]), len(rows) > limit


def keyset_page(rows: QuerySet, keyset: Keyset, *, cursor: str | None, limit: int) -> Page:
    """Read the page of `rows` after `cursor` (a raw cursor, checked here): one query."""
    position = keyset.decode(cursor)
    rows = rows.order_by(*keyset.order)
    if position is not None:
        rows = keyset.after(rows, position)
    items, more = split_page(list(rows[: limit + 1]), limit)
    return Page(items, encode_cursor(keyset.position(items[-1])) if more else None)
