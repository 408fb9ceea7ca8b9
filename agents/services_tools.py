"""Write paths for host tools (SPEC §18): register, change and delete an Application's tools.

The API (`tools/`) and the admin call these; both get the same checks and the same codes.

Locking: these services lock the tool row (FOR UPDATE). A service that binds tools to a
version or publishes it locks the version first and then its tools (agents.services), so
the order is always version -> tool and a delete or change never waits on a version lock:
it sees each binding version's committed status under the tool lock.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import IntegrityError, transaction

from agents.models import Application, Tool
from agents.selectors import tool_frozen_versions
from contextproto.errors import (
    INVALID_INPUT_SCHEMA,
    INVALID_REQUEST,
    TOOL_IN_USE,
    TOOL_NAME_INVALID,
    TOOL_NAME_RESERVED,
    TOOL_NAME_TAKEN,
    ApplicationError,
    NotFound,
)
from contextproto.protocol import host_tools

DESCRIPTION_MAX = 4000
# The schema travels to the model on every turn; beyond this it only costs tokens.
INPUT_SCHEMA_MAX_BYTES = 64 * 1024


def tool_check(
    *,
    application: Application,
    name: Any,
    description: Any,
    input_schema: Any,
    tool: Tool | None = None,
) -> None:
    """Refuse a name, description or input schema a host tool may not have (400 or 409).

    Order: name rule (`tool_name_invalid`), reserved name (`tool_name_reserved`),
    description, input schema (`invalid_input_schema`, details.path: its size, then
    host_tools.input_schema_problem), then a name another
    tool of the Application has (`tool_name_taken`; `tool` is the one being changed). Each
    refusal's details name the field ("name", "description", "inputSchema").
    """
    problem = host_tools.name_problem(name)
    if problem is not None:
        raise ApplicationError(TOOL_NAME_INVALID, problem, {"field": "name"})
    if name in host_tools.reserved_names():
        raise ApplicationError(
            TOOL_NAME_RESERVED,
            f"{name!r} is the name of a context protocol tool; give the host tool another name.",
            {"field": "name"},
        )
    if not isinstance(description, str) or len(description) > DESCRIPTION_MAX:
        raise ApplicationError(
            INVALID_REQUEST,
            f"description must be a string of at most {DESCRIPTION_MAX} characters.",
            {"field": "description"},
        )
    _schema_check(input_schema)
    taken = Tool.objects.filter(application=application, name=name)
    if tool is not None:
        taken = taken.exclude(pk=tool.pk)
    if taken.exists():
        raise _name_taken(name)


def _schema_check(input_schema: Any) -> None:
    # Size first: it is cheap, and it bounds what the engine compiles and caches.
    size = len(json.dumps(input_schema, ensure_ascii=False).encode())
    if size > INPUT_SCHEMA_MAX_BYTES:
        raise ApplicationError(
            INVALID_INPUT_SCHEMA,
            f"inputSchema is {size} bytes of JSON; at most {INPUT_SCHEMA_MAX_BYTES}, since "
            "the model receives it on every turn.",
            {"field": "inputSchema", "path": "$"},
        )
    problem = host_tools.input_schema_problem(input_schema)
    if problem is not None:
        raise ApplicationError(
            INVALID_INPUT_SCHEMA,
            f"inputSchema at {problem.path}: {problem.message}",
            {"field": "inputSchema", "path": problem.path},
        )


def _name_taken(name: str) -> ApplicationError:
    return ApplicationError(
        TOOL_NAME_TAKEN,
        f"A tool named {name!r} already exists in this application; pick another name or "
        "change that tool.",
        {"field": "name"},
    )


def _save(tool: Tool, *, creating: bool) -> Tool:
    """Insert or update `tool`; a concurrent writer of the same name gets `tool_name_taken`.

    The unique constraint decides the race: the losing statement fails inside a savepoint,
    so the caller's transaction stays usable for the check and the refusal.
    """
    try:
        with transaction.atomic():
            tool.save(force_insert=creating)
    except IntegrityError as exc:
        clash = Tool.objects.filter(application_id=tool.application_id, name=tool.name)
        if clash.exclude(pk=tool.pk).exists():
            raise _name_taken(tool.name) from exc
        raise
    return tool


@transaction.atomic
def tool_create(
    *, application: Application, name: Any, description: Any = "", input_schema: Any
) -> Tool:
    """Register a host tool of `application` after tool_check's checks."""
    tool_check(
        application=application, name=name, description=description, input_schema=input_schema
    )
    tool = Tool(
        application=application, name=name, description=description, input_schema=input_schema
    )
    return _save(tool, creating=True)


def _in_use(tool: Tool, doing: str) -> ApplicationError:
    versions = tool_frozen_versions(tool)
    listed = ", ".join(f"{v.agent.name} v{v.number} ({v.status})" for v in versions)
    return ApplicationError(
        TOOL_IN_USE,
        f"Cannot {doing} tool {tool.name!r}: published versions run with it as it is "
        f"({listed}). Register a new tool and bind it in a new draft instead.",
        {
            "versions": [
                {
                    "id": str(v.id),
                    "agentId": str(v.agent_id),
                    "agent": v.agent.name,
                    "number": v.number,
                    "status": v.status,
                }
                for v in versions
            ]
        },
    )


def _lock(tool: Tool) -> Tool:
    found = (
        Tool.objects.select_for_update(of=("self",))
        .select_related("application")
        .filter(pk=tool.pk)
        .first()
    )
    if found is None:
        raise NotFound("Tool")  # deleted since it was read: as gone as an unknown id
    return found


@transaction.atomic
def tool_update(*, tool: Tool, changes: dict[str, Any]) -> Tool:
    """Change a tool's `name`, `description` and/or `input_schema` (the keys of `changes`).

    Locks the tool row. Refused (409 `tool_in_use`, details.versions) while a published or
    archived version binds it: those versions run with the tool as they were published.
    Drafts binding it see the change.
    """
    unknown = set(changes) - {"name", "description", "input_schema"}
    if unknown:
        raise ValueError(f"tool_update cannot change {sorted(unknown)}")
    locked = _lock(tool)
    if tool_frozen_versions(locked):
        raise _in_use(locked, "change")
    for field, value in changes.items():
        setattr(locked, field, value)
    tool_check(
        application=locked.application,
        name=locked.name,
        description=locked.description,
        input_schema=locked.input_schema,
        tool=locked,
    )
    return _save(locked, creating=False)


@transaction.atomic
def tool_delete(*, tool: Tool) -> None:
    """Delete a host tool; drafts binding it lose it.

    Locks the tool row. Refused (409 `tool_in_use`, details.versions) while a published or
    archived version binds it: its sessions would lose a tool mid-run.
    """
    locked = _lock(tool)
    if tool_frozen_versions(locked):
        raise _in_use(locked, "delete")
    locked.delete()
