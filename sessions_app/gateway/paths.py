"""The client API of a path under /gateway/ (contract §14, §21).

The URL conf routes each endpoint to its view; an unknown path and the server edge's own
refusals (contextproto/serving.py, which loads before Django's apps: this module imports no
model) answer in the wire its prefix names.
"""

from __future__ import annotations

from contextproto.protocol.gateway.wire import ClientFormat

GATEWAY_PREFIX = "/gateway/"
PATH_FORMATS = (
    ("/gateway/anthropic/", ClientFormat.ANTHROPIC),
    ("/gateway/openai/v1/responses", ClientFormat.RESPONSES),
)


def client_format_of_path(path: str) -> ClientFormat:
    return next((f for prefix, f in PATH_FORMATS if path.startswith(prefix)), ClientFormat.OPENAI)
