"""Write paths for host tools (contract §11): register, change and delete an Application's tools.

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
    check_taken: bool = True,
) -> None:
    """Refuse a name, description or input schema a host tool may not have (400 or 409).

    Order: name rule (`tool_name_invalid`), reserved name (`tool_name_reserved`),
    description, input schema (`invalid_input_schema`, details.path: its size, then
    host_tools.input_schema_problem), then a name another tool of the Application has
    (`tool_name_taken`, with `details.id` of that tool; `tool` is the one being changed;
    `check_taken=False` leaves this last check to the caller). Each refusal's details name
    the field ("name", "description", "inputSchema").
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
    if not check_taken:
        return
    taken = Tool.objects.filter(application=application, name=name)
    if tool is not None:
        taken = taken.exclude(pk=tool.pk)
    clash = taken.values_list("id", flat=True).first()
    if clash is not None:
        raise _name_taken(name, clash)


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


def _name_taken(name: str, tool_id: Any) -> ApplicationError:
    return ApplicationError(
        TOOL_NAME_TAKEN,
        f"A tool named {name!r} with another definition already exists in this application "
        f"(id {tool_id}); pick another name, or change that tool.",
        {"field": "name", "id": str(tool_id)},
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
        clash_id = clash.exclude(pk=tool.pk).values_list("id", flat=True).first()
        if clash_id is not None:
            raise _name_taken(tool.name, clash_id) from exc
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


def _same_definition(tool: Tool, description: Any, input_schema: Any) -> bool:
    """Whether `tool` has this description and input schema (as JSON values: key order and
    formatting do not count)."""

    def canonical(value: Any) -> str:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    return tool.description == description and canonical(tool.input_schema) == canonical(
        input_schema
    )


def tool_register(
    *, application: Application, name: Any, description: Any = "", input_schema: Any
) -> tuple[Tool, bool]:
    """Register a host tool idempotently (contract §11); return (tool, created).

    The name and definition (description, input schema) of an existing tool of the
    Application answer that tool (created False), so a deploy may register its tools every
    time; the same name with another definition is 409 `tool_name_taken` with `details.id`.
    Otherwise tool_create's checks and insert. Two concurrent registrations of one new tool
    both succeed: the loser of the insert race reads the winner's row and compares.
    """
    tool_check(
        application=application,
        name=name,
        description=description,
        input_schema=input_schema,
        check_taken=False,
    )
    existing = Tool.objects.filter(application=application, name=name).first()
    if existing is None:
        try:
            with transaction.atomic():
                tool = Tool.objects.create(
                    application=application,
                    name=name,
                    description=description,
                    input_schema=input_schema,
                )
            return tool, True
        except IntegrityError:
            # A concurrent registration inserted it first: compare with that one.
            existing = Tool.objects.filter(application=application, name=name).first()
            if existing is None:
                raise
    if _same_definition(existing, description, input_schema):
        return existing, False
    raise _name_taken(name, existing.id)


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
