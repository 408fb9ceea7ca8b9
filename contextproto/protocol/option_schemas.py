"""Option schemas of the catalog's versions (SPEC §1): what a version's `options` may hold."""

from __future__ import annotations

from typing import Any

from .vocabulary import (
    JSON_SCHEMA_DIALECT,
    PLACEMENT_TRAILING_ASSISTANT,
    STATE_MESSAGE_PLACEMENTS,
)


def _bool_option(title: str, description: str, default: bool) -> dict[str, Any]:
    return {"type": "boolean", "title": title, "description": description, "default": default}


def _int_option(
    title: str, description: str, default: int, minimum: int, maximum: int
) -> dict[str, Any]:
    return {
        "type": "integer",
        "title": title,
        "description": description,
        "default": default,
        "minimum": minimum,
        "maximum": maximum,
    }


def option_schema(key: str, *, checkpoint_max: int, windowed: bool, placement: bool) -> dict:
    """The JSON Schema of `key`'s options, every property with its default."""
    props: dict[str, Any] = {
        "guiProjection": _bool_option(
            "GUI projection",
            "Keep images only in the 3 most recent messages that carry them; older images "
            "are replaced by a short text marker. Saves tokens in long GUI sessions.",
            True,
        ),
        "pageSize": _int_option(
            "Maintenance page size",
            "How many raw messages the maintainer reads per page while it writes a "
            "checkpoint. Larger pages mean fewer, bigger maintainer calls.",
            200,
            10,
            1000,
        ),
        "checkpointMaxCharacters": _int_option(
            "Checkpoint length limit",
            "Maximum length, in characters, of a window's checkpoint (the summary that "
            "replaces its older history). This limits the summary, not the model's input.",
            checkpoint_max,
            1000,
            24000,
        ),
    }
    if windowed:
        props["maxWindows"] = _int_option(
            "Windows per session",
            "Maximum number of windows a session may have, the main window included. "
            "Opening one more is refused with an error the model can read.",
            128,
            1,
            1024,
        )
        props["maxFolds"] = _int_option(
            "Folds per session",
            "Maximum number of folds a session may have, folds already covered by a "
            "checkpoint included.",
            1024,
            1,
            65536,
        )
    if placement:
        props["stateMessagePlacement"] = {
            "type": "string",
            "title": "State message placement (experiment)",
            "description": (
                "Where the context_state message goes in the model's view: "
                "trailing_assistant (group A, default) after the history as an assistant "
                "message; before_history_assistant (group B) between the header and the "
                "history; trailing_user (group C) after the history as a user message."
            ),
            "enum": list(STATE_MESSAGE_PLACEMENTS),
            "default": PLACEMENT_TRAILING_ASSISTANT,
        }
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": f"Options of {key}",
        "type": "object",
        "properties": props,
        "additionalProperties": False,
    }


def defaults_of(schema: dict[str, Any]) -> dict[str, Any]:
    """Every option's default, by name."""
    return {name: prop["default"] for name, prop in schema["properties"].items()}
