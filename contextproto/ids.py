"""Ids named in paths and bodies, parsed once for selectors and views alike.

Sits beside contextproto.errors, below the views and the selectors (docs/architecture.md):
plain Python, no Django, no DRF. An id that cannot name an object answers 404, as if the
object did not exist (a body's ids are checked by contextproto.api.IdField: 400 naming the
field).

Only the spellings the API itself issues are ids: the 36-character hyphenated form
(`str(uuid)`, every object id) and the 32-character hex form (`uuid.hex`, run ids), ASCII
hex digits in either case. Python's `UUID()` also accepts braces, `urn:uuid:` and other
scripts' digits (fullwidth, Arabic-Indic), so many spellings would reach one object; those
are refused here (see docs/decisions.md).
"""

from __future__ import annotations

import re
from uuid import UUID

from contextproto.errors import NotFound

_CANONICAL = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|[0-9a-fA-F]{32}"
)


def canonical_uuid(raw: object) -> UUID | None:
    """The UUID `raw` spells in one of the API's own forms; None for anything else."""
    if isinstance(raw, UUID):
        return raw
    if not isinstance(raw, str) or not _CANONICAL.fullmatch(raw):
        return None
    return UUID(raw)


def parse_uuid(raw: object, what: str) -> UUID:
    """The UUID `raw` spells; NotFound (404) naming `what` if it spells none."""
    found = canonical_uuid(raw)
    if found is None:
        raise NotFound(what)
    return found
