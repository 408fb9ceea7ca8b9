"""Option schemas of the catalog's versions (contract §3): what a version's `options` may hold."""

from __future__ import annotations

from typing import Any

from .vocabulary import (
    JSON_SCHEMA_DIALECT,
    MASK_KEEP_RECENT,
    MASK_MIN_CHARS,
    MASK_STEP,
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


# unified@3's text, kept byte for byte (the catalog fingerprint covers it).
_PLACEMENT_HELP_V3 = (
    "Where the context_state message goes in the model's view: "
    "trailing_assistant (group A, default) after the history as an assistant "
    "message; before_history_assistant (group B) between the header and the "
    "history; trailing_user (group C) after the history as a user message."
)
_PLACEMENT_HELP_MASKING = (
    "Where the context_state message goes in the model's view: trailing_user (default) "
    "after the history as a user message, valid on every provider; trailing_assistant "
    "after the history as an assistant message (on anthropic-messages it travels as "
    "marked user text unless the model config accepts an assistant prefill); "
    "before_history_assistant between the header and the history, which rewrites the "
    "provider's cached prefix every turn."
)


def option_schema(
    key: str,
    *,
    checkpoint_max: int,
    windowed: bool,
    placement: bool,
    placement_default: str = PLACEMENT_TRAILING_ASSISTANT,
    masking: bool = False,
) -> dict[str, Any]:
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
            "description": _PLACEMENT_HELP_MASKING if masking else _PLACEMENT_HELP_V3,
            "enum": list(STATE_MESSAGE_PLACEMENTS),
            "default": placement_default,
        }
    if masking:
        props[MASK_KEEP_RECENT] = _int_option(
            "Tool results kept unmasked",
            "How many of the newest tool results of the active window always stay as they "
            "are. Older ones are masked in steps of maskStep results: each one longer than "
            "maskMinChars is shown as a one-line stub the model can read back with "
            "context_history_read.",
            6,
            0,
            1000,
        )
        props[MASK_MIN_CHARS] = _int_option(
            "Masking threshold (characters)",
            "A tool result in the masked range is replaced by its stub only when it is longer "
            "than this many characters; shorter results stay in the view as they are, since "
            "a stub would save little.",
            1000,
            0,
            1000000,
        )
        props[MASK_STEP] = _int_option(
            "Masking step (results)",
            "The masking boundary moves in steps of this many tool results, so the cached "
            "prefix of the model's input is rewritten once a step, not on every turn. 1 "
            "masks as soon as a result leaves the kept recent ones.",
            10,
            1,
            1000,
        )
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
