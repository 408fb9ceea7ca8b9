"""Ids named in paths and bodies, parsed once for selectors and views alike.

Sits beside contextproto.errors, below the views and the selectors (docs/architecture.md):
plain Python, no Django, no DRF. An id that cannot name an object answers 404, as if the
object did not exist.
"""

from __future__ import annotations

from uuid import UUID

from contextproto.errors import NotFound


def parse_uuid(raw: object, what: str) -> UUID:
    """The UUID `raw` spells; NotFound (404) naming `what` if it spells none."""
    try:
        return UUID(str(raw))
    except (ValueError, TypeError) as exc:
        raise NotFound(what) from exc
