"""The one error type services raise; rendered by contextproto.api_errors.

Kept free of DRF imports so authentication and services can import it without cycles.
"""

from __future__ import annotations

from typing import Any

from contextproto.protocol.errors import ProtocolError


class ApplicationError(Exception):
    """A refusal by a service: stable `code`, a message saying what to fix, an HTTP status."""

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        status: int = 400,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}
        self.status = status

    @classmethod
    def from_protocol(cls, exc: ProtocolError, status: int = 400) -> ApplicationError:
        return cls(exc.code, exc.message, exc.details, status)


class NotFound(ApplicationError):
    def __init__(self, what: str, details: dict[str, Any] | None = None) -> None:
        super().__init__("not_found", f"{what} not found.", details, 404)
