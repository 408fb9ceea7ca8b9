"""The compaction token (contract §21): what a Responses `compaction` item's
`encrypted_content` holds when this service made it.

A compaction answer costs no model call: the session's own maintenance keeps the model's view
in budget, so the item only has to say which session and which point of its log it stands for.
The token names both and is signed (HMAC-SHA256) with a key the caller passes in, bound to the
Application: a token of another Application, or one altered by a byte, is refused with
`invalid_compaction_item`. It is opaque to clients (URL-safe text, nothing to read in it but
the session id and the bound) and not encrypted: neither is a secret, the session key is.

    cpx1.<payload>.<mac>    payload: base64url of {"s": session id, "t": through index}
                            mac: base64url of HMAC-SHA256(key, DOMAIN + application + payload)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json

from contextproto.protocol.errors import INVALID_COMPACTION_ITEM, ProtocolError

PREFIX = "cpx1."
# Separates these MACs from anything else the same key may sign.
DOMAIN = b"contextproto/responses-compaction/v1\n"


class CompactionTokenInvalid(ProtocolError):
    """A compaction item the service cannot take (400 `invalid_compaction_item`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            INVALID_COMPACTION_ITEM,
            "The compaction item's encrypted_content was not made by this service for this "
            f"Application, or it was altered ({reason}). Send the compaction item as the "
            "service gave it, or the conversation without it.",
            {"reason": reason},
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, application_id: str, payload: str) -> str:
    message = DOMAIN + application_id.encode() + b"\n" + payload.encode("ascii")
    return _b64(hmac.new(key, message, hashlib.sha256).digest())


def sign_compaction(key: bytes, application_id: str, session_id: str, through_index: int) -> str:
    """The token of a compaction item standing for `session_id`'s log through
    `through_index` (a MessageIndex, 0 for an empty log), for `application_id`'s keys."""
    if not key:
        raise ValueError("a compaction token needs a non-empty key")
    body = json.dumps({"s": str(session_id), "t": int(through_index)}, separators=(",", ":"))
    payload = _b64(body.encode())
    return f"{PREFIX}{payload}.{_mac(key, str(application_id), payload)}"


def read_compaction(key: bytes, token: object, application_id: str) -> tuple[str, int]:
    """(session id, through index) of a token `sign_compaction` made for `application_id`.

    Raises CompactionTokenInvalid for anything else: not a token of this service, another
    Application's, or altered.
    """
    if not isinstance(token, str) or not token.startswith(PREFIX):
        raise CompactionTokenInvalid("not a compaction token of this service")
    payload, dot, mac = token[len(PREFIX) :].partition(".")
    if not dot or not payload or not mac:
        raise CompactionTokenInvalid("not a compaction token of this service")
    if not hmac.compare_digest(mac, _mac(key, str(application_id), payload)):
        raise CompactionTokenInvalid("its signature does not match")
    try:
        data = json.loads(_unb64(payload))
    except (binascii.Error, ValueError) as exc:  # signed but unreadable: a defect, not a client's
        raise CompactionTokenInvalid("its content cannot be read") from exc
    session_id, through = (data.get("s"), data.get("t")) if isinstance(data, dict) else (None, None)
    if not isinstance(session_id, str) or isinstance(through, bool) or not isinstance(through, int):
        raise CompactionTokenInvalid("its content cannot be read")
    return session_id, through
