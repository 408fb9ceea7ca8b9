"""Bearer-key authentication (contract §12): an application key or a session key, looked up by
its hash. The one lookup behind the API's authentication and the MCP server's.
"""

from __future__ import annotations

from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from agents.models import ApiKey, hash_key
from contextproto.api import Credential
from contextproto.errors import NOT_AUTHENTICATED, ApplicationError
from sessions_app.models import Session
from sessions_app.services.sessions import SESSION_KEY_PREFIX


class BearerKeyAuthentication(BaseAuthentication):
    """`Authorization: Bearer <key>` with an application key or a session key."""

    def authenticate(self, request: Request) -> tuple[None, Credential] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        raw = raw.strip()
        if scheme.lower() != "bearer" or not raw:
            raise ApplicationError(NOT_AUTHENTICATED, "Use 'Authorization: Bearer <key>'.")
        credential = credential_for_key(raw)
        if credential is None:
            raise ApplicationError(NOT_AUTHENTICATED, "Unknown or revoked key.")
        # For the request log line (contextproto.middleware), which sees the Django request;
        # our own attribute, which the stubs do not know.
        request._request.credential = credential  # type: ignore[attr-defined]
        return None, credential

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def credential_for_key(raw: str) -> Credential | None:
    """The credential a raw application or session key stands for; None if unknown or revoked.

    The one lookup behind the API's bearer authentication and the MCP server's.
    """
    digest = hash_key(raw)

    def application_key() -> Credential | None:
        key = (
            ApiKey.objects.select_related("application")
            .filter(key_hash=digest, revoked_at__isnull=True)
            .first()
        )
        return Credential(application=key.application) if key is not None else None

    def session_key() -> Credential | None:
        session = (
            Session.objects.select_related("application")
            .filter(session_key_hash=digest)
            .only("id", "application")
            .first()
        )
        if session is None:
            return None
        return Credential(application=session.application, session_id=session.id)

    # The key's prefix says which table holds it, so the usual lookup is one query; the
    # other table is still asked, so a key is never refused for its spelling alone.
    if raw.startswith(SESSION_KEY_PREFIX):
        return session_key() or application_key()
    return application_key() or session_key()
