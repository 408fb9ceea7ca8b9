"""Shared API plumbing: the credential a request carries, strict input serializers, query
parameters. The bearer-key lookup itself is the sessions app's (sessions_app.auth).

List cursors and keyset paging live in contextproto.pagination.

Two credentials exist (contract §12): an application key sees its Application's agents and
sessions; a session key sees only `sessions/{id}/…` of its own session. Anything outside a
credential's reach answers 404, as if it did not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from rest_framework import serializers
from rest_framework.request import Request

from contextproto.errors import INVALID_REQUEST, NOT_AUTHENTICATED, ApplicationError, NotFound
from contextproto.ids import canonical_uuid
from contextproto.protocol.catalog import JSON_INTEGER_MAX

if TYPE_CHECKING:  # a type only: the project package imports no app at run time
    from agents.models import Application

PAGE_LIMIT_DEFAULT = 50
PAGE_LIMIT_MAX = 200


@dataclass(frozen=True)
class Credential:
    application: Application
    session_id: UUID | None = None  # set for a session key

    @property
    def is_session_key(self) -> bool:
        return self.session_id is not None


def credential_of(request: Request) -> Credential:
    credential = request.auth
    if not isinstance(credential, Credential):
        raise ApplicationError(
            NOT_AUTHENTICATED,
            "Send 'Authorization: Bearer <key>' with an application key or a session key.",
        )
    return credential


def application_of(request: Request, what: str = "Resource") -> Application:
    """The Application of an application key; a session key reaches nothing here (404)."""
    credential = credential_of(request)
    if credential.is_session_key:
        raise NotFound(what)
    return credential.application


# Refuses unknown keys instead of dropping them silently (DRF's default). A comment, not a
# docstring: the schema would show a base class's docstring on every input model.
class StrictSerializer(serializers.Serializer):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                {"body": [f"Expected a JSON object, got {type(data).__name__}."]}
            )
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {
                    name: [
                        serializers.ErrorDetail(
                            f"Unknown field; allowed: {', '.join(sorted(self.fields))}.",
                            code="unknown_field",
                        )
                    ]
                    for name in unknown
                }
            )
        return super().to_internal_value(data)

    @classmethod
    def parse(cls, data: Any, **kwargs: Any) -> dict[str, Any]:
        serializer = cls(data=data, **kwargs)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


# A JSON value of any type (DRF's JSONField, named for the schema).
class AnyJSONField(serializers.JSONField):
    pass


class IdField(serializers.UUIDField):
    """An id in a body, in a form the API issues (contextproto.ids); a UUID once parsed.

    DRF's UUIDField takes braces, `urn:uuid:`, other scripts' digits and even integers.
    """

    default_error_messages = {
        "invalid": "Not an id; send it as the API issued it (8-4-4-4-12 hex digits with "
        "hyphens, or 32 hex digits)."
    }

    def to_internal_value(self, data: Any) -> UUID:
        found = canonical_uuid(data) if isinstance(data, str) else None
        if found is None:
            self.fail("invalid")
        return found


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer: no numeric strings, no 3.0, no booleans (DRF's IntegerField takes "3")."""

    default_error_messages = {
        "invalid": "A JSON integer is required (not a string, a decimal or a boolean)."
    }

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


def query_int(raw: object, name: str, default: int, *, minimum: int, maximum: int) -> int:
    """An integer query parameter within [minimum, maximum]; 400 naming it otherwise.

    ASCII digits only and bounded length: `int()` accepts other scripts' digits and
    arbitrarily long numbers, neither of which any column or OFFSET can take.
    """
    if raw in (None, ""):
        return default
    text = str(raw)
    try:
        value = int(text) if text.isascii() and len(text) <= 20 else None
    except ValueError:
        value = None
    if value is None or not minimum <= value <= maximum:
        raise ApplicationError(
            INVALID_REQUEST,
            f"{name} must be an integer between {minimum} and {maximum}.",
            {"field": name},
        )
    return value


def page_limit(raw: object, default: int = PAGE_LIMIT_DEFAULT) -> int:
    return query_int(raw, "limit", default, minimum=1, maximum=PAGE_LIMIT_MAX)


def query_revision(raw: object, name: str = "revision") -> int | None:
    """A state revision from the query string: None when absent, else a canonical integer.

    Canonical: ASCII digits without sign, spaces or leading zeros ("0", "17"), at most the
    JSON integer range; anything else is a 400 naming the parameter, so "+5", "05" or "5.0"
    never silently mean revision 5.
    """
    if raw is None:
        return None
    text = str(raw)
    canonical = (
        text.isascii()
        and text.isdigit()
        and len(text) <= 16
        and (text == "0" or not text.startswith("0"))
    )
    if not canonical or int(text) > JSON_INTEGER_MAX:
        raise ApplicationError(
            INVALID_REQUEST,
            f"{name} must be a state revision: a non-negative integer written with digits "
            "only (no sign, spaces or leading zeros).",
            {"field": name},
        )
    return int(text)
