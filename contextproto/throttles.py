"""Request rate limits per Application and per session (OWASP API4), on the shared cache.

DRF's SimpleRateThrottle, keyed by the credential: an application key counts against its
Application, a session key against its session (and its Application). The rates are read
from settings on every request (`API_THROTTLE_RATES`, None = unlimited) so an operator can
tune them by environment. The history lives in the cache (Redis in production, shared by
every process); if the cache is unreachable the request is let through: a limiter must not
turn a cache outage into an API outage.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from contextproto.api import Credential

logger = logging.getLogger(__name__)


class CredentialRateThrottle(SimpleRateThrottle):
    """Base: the rate of `scope` from settings; fail open when the cache fails."""

    def get_rate(self) -> str | None:
        return settings.API_THROTTLE_RATES.get(self.scope) if self.scope else None

    def credential_ident(self, credential: Any) -> str | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        credential = request.auth
        if not isinstance(credential, Credential):
            return None  # anonymous requests are refused by the views themselves
        ident = self.credential_ident(credential)
        if ident is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request: Any, view: Any) -> bool:
        try:
            return super().allow_request(request, view)
        except Exception as exc:  # the cache is down: let the request through, say so
            logger.warning("rate limit not applied (%s): %s", self.scope, exc)
            return True


class ApplicationRateThrottle(CredentialRateThrottle):
    """Every request made with any key of one Application."""

    scope = "application"

    def credential_ident(self, credential: Any) -> str | None:
        return str(credential.application.id)


class SessionRateThrottle(CredentialRateThrottle):
    """Every request made with one session's key."""

    scope = "session"

    def credential_ident(self, credential: Any) -> str | None:
        return str(credential.session_id) if credential.is_session_key else None
