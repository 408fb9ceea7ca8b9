"""Small helpers every page of the session browser uses: URLs, text rendering, parameters."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from django.http import HttpRequest
from django.urls import reverse

from contextproto.protocol.catalog import JSON_INTEGER_MAX
from contextproto.protocol.messages import content_text
from sessions_app.models import Session

PAGE_SIZE = 100
MAX_PAGE_SIZE = 500
RAW_INLINE_LIMIT = 20_000
PREVIEW_CHARS = 400
# Tool-call arguments up to this size show open; longer ones fold behind a <details>.
ARGUMENTS_OPEN_LINES = 12
ARGUMENTS_OPEN_CHARS = 800
SNAPSHOT_HEAVY_FIELDS = ("body", "options", "notes")

# The pages render a content as the engine flattens it (text, `[image <type>]` markers,
# JSON for anything else); re-exported for the other admin_views modules.
__all__ = [
    "MAX_PAGE_SIZE",
    "PAGE_SIZE",
    "PREVIEW_CHARS",
    "RAW_INLINE_LIMIT",
    "SNAPSHOT_HEAVY_FIELDS",
    "arguments_block",
    "content_text",
    "int_param",
    "limit_param",
    "pretty",
    "preview",
    "query",
    "url",
]


def url(name: str, session: Session | UUID | str, *args: Any) -> str:
    """The browser page `name` of `session` (extra path arguments after the session id)."""
    session_id = session.pk if isinstance(session, Session) else session
    return reverse(f"admin:sessions_app_session_browse_{name}", args=[session_id, *args])


def pretty(value: Any) -> str:
    """Indented JSON for <pre> blocks (non-ASCII kept readable)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def arguments_block(arguments: Any) -> dict[str, Any] | None:
    """A tool call's arguments as pretty JSON, and whether they are long enough to fold.

    None when the message has no arguments. Short arguments are what an operator reads a
    call by, so they show open; long ones would push the rest of the page away.
    """
    if arguments is None:
        return None
    # Text that is no JSON object was stored as the model wrote it (contract §5.2): shown so.
    text = arguments if isinstance(arguments, str) else pretty(arguments)
    lines = text.count("\n") + 1
    long = lines > ARGUMENTS_OPEN_LINES or len(text) > ARGUMENTS_OPEN_CHARS
    return {"text": text, "lines": lines, "chars": len(text), "long": long}


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """`text` cut to `limit` characters, saying how long it was."""
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def int_param(request: HttpRequest, name: str, default: int | None = None) -> int | None:
    """An integer query parameter; junk and numbers beyond the index range give `default`."""
    raw = request.GET.get(name, "")
    try:
        value = int(raw) if raw != "" else default
    except ValueError:
        return default
    # A number beyond the index columns' range would reach the database and fail there.
    if value is not None and abs(value) > JSON_INTEGER_MAX:
        return default
    return value


def limit_param(request: HttpRequest, default: int = PAGE_SIZE, name: str = "limit") -> int:
    """A page size from the query string, between 1 and MAX_PAGE_SIZE."""
    value = int_param(request, name, default) or default
    return max(1, min(value, MAX_PAGE_SIZE))


def query(request: HttpRequest, **changes: Any) -> str:
    """The current query string with `changes` applied (None removes a key)."""
    params = request.GET.copy()
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = str(value)
    encoded = params.urlencode()
    return "?" + encoded if encoded else "?"
