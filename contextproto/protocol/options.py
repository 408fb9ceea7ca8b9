"""Validate an AgentVersion's protocol options against its catalog schema (contract §3, §2.1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from .catalog import check_value, get_version, json_type_name
from .errors import (
    OPTION_BAD_ENUM,
    OPTION_OUT_OF_RANGE,
    OPTION_UNKNOWN,
    OPTION_WRONG_TYPE,
    OPTIONS_NOT_OBJECT,
)

# check_value problem kind -> the option error code publishing reports. Option
# schemas use only type, minimum/maximum and enum (a catalog test holds them to it).
_CODE_OF_KIND = {
    "type": OPTION_WRONG_TYPE,
    "range": OPTION_OUT_OF_RANGE,
    "enum": OPTION_BAD_ENUM,
}


class OptionErrorWire(TypedDict):
    """One problem of a protocol options object (publish and `validate-options`)."""

    option: str | None  # None: the value as a whole (not an object)
    code: str
    message: str


@dataclass(frozen=True)
class OptionValidation:
    """The outcome of validating options: every problem at once, or the normalized options."""

    valid: bool
    normalized: dict[str, Any] | None
    errors: list[OptionErrorWire] = field(default_factory=list)


def validate_options(protocol_id: str, version: int, options: object) -> OptionValidation:
    """Check `options` against the schema of `protocol_id@version`.

    Returns all errors at once, known options first in schema order, then unknown
    keys sorted by name. When valid, `normalized` holds every option of the
    version (defaults merged in), in schema order. Raises ProtocolError
    (protocol_unknown) when the version is not in the catalog.
    """
    entry = get_version(protocol_id, version)
    if not isinstance(options, dict):
        return OptionValidation(
            valid=False,
            normalized=None,
            errors=[
                {
                    "option": None,
                    "code": OPTIONS_NOT_OBJECT,
                    "message": (
                        "Options must be a JSON object ({} means all defaults), "
                        f"not {_type_name(options)}."
                    ),
                }
            ],
        )

    properties: dict[str, Any] = entry.option_schema["properties"]
    errors: list[OptionErrorWire] = []
    for name, schema in properties.items():
        if name not in options:
            continue
        problem = check_value(schema, options[name])
        if problem is not None:
            errors.append(
                {
                    "option": name,
                    "code": _CODE_OF_KIND[problem.kind],
                    "message": f"{name} {problem.message}.",
                }
            )

    known = ", ".join(properties)
    for key in sorted((k for k in options if k not in properties), key=str):
        errors.append(
            {
                "option": key if isinstance(key, str) else str(key),
                "code": OPTION_UNKNOWN,
                "message": f"{key!s} is not an option of {entry.key}; known options: {known}.",
            }
        )

    if errors:
        return OptionValidation(valid=False, normalized=None, errors=errors)
    normalized = {name: options.get(name, entry.defaults[name]) for name in properties}
    return OptionValidation(valid=True, normalized=normalized, errors=[])


def _type_name(value: object) -> str:
    name = json_type_name(value)
    return "null" if name == "null" else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
