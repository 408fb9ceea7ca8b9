"""Write paths for Applications and their keys (AgentVersion services join with the API issue)."""

from __future__ import annotations

import secrets
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agents.model_schema import model_problems
from agents.models import Agent, AgentVersion, ApiKey, Application, Tool, hash_key
from agents.selectors import protocol_of
from contextproto.errors import (
    AGENT_NAME_TAKEN,
    AGENT_VERSION_IMMUTABLE,
    AGENT_VERSION_INVALID,
    AGENT_VERSION_NOT_PUBLISHED,
    CROSS_APPLICATION_TOOL_FORBIDDEN,
    INVALID_REQUEST,
    LAST_ACTIVE_API_KEY,
    MAINTAINER_NOT_FOUND,
    TOO_MANY_API_KEYS,
    TOOL_NOT_FOUND,
    ApplicationError,
)
from contextproto.protocol import catalog
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.options import validate_options
from contextproto.protocol.prompt_cache import validate_prompt_cache
from contextproto.protocol.vocabulary import SYSTEM_PLACEHOLDER

APPLICATION_KEY_PREFIX = "cpa_"
KEY_PREFIX_LENGTH = 10  # "cpa_" + 6 characters: enough to recognise a key in a list
# Rotation needs two live keys for a while; more than a handful means keys are leaking.
MAX_ACTIVE_API_KEYS = 10


def generate_key(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def _lock_application(application_id: Any) -> None:
    # Serialises key changes of one Application, so two concurrent revocations cannot both
    # believe the other key stays active.
    Application.objects.select_for_update().filter(pk=application_id).first()


@transaction.atomic
def api_key_issue(*, application: Application) -> tuple[ApiKey, str]:
    """Create a new API key for `application`; return the row and the raw key (shown once).

    Locks the Application row. Refuses (409 `too_many_api_keys`) when the Application
    already has MAX_ACTIVE_API_KEYS active keys.
    """
    _lock_application(application.pk)
    active = ApiKey.objects.filter(application=application, revoked_at__isnull=True).count()
    if active >= MAX_ACTIVE_API_KEYS:
        raise ApplicationError(
            TOO_MANY_API_KEYS,
            f"This application already has {active} active API keys; revoke one first.",
            {"active": active, "max": MAX_ACTIVE_API_KEYS},
        )
    raw = generate_key(APPLICATION_KEY_PREFIX)
    key = ApiKey.objects.create(
        application=application, key_hash=hash_key(raw), prefix=raw[:KEY_PREFIX_LENGTH]
    )
    return key, raw


@transaction.atomic
def application_key_issue(*, application: Application) -> str:
    """Create a new API key for `application`; return the raw key (stored only hashed)."""
    return api_key_issue(application=application)[1]


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey, keep_one_active: bool = False) -> ApiKey:
    """Revoke `api_key` at once (the next request with it gets 401); idempotent.

    Locks the Application row. With `keep_one_active` (the API's rule) revoking the last
    active key is refused (409 `last_active_api_key`): an Application must not lock
    itself out. Operators (admin, `revoke_api_key`) may revoke the last key in an incident
    and issue a new one with `rotate_api_key`.
    """
    _lock_application(api_key.application_id)
    key = ApiKey.objects.select_for_update().get(pk=api_key.pk)
    if key.revoked_at is not None:
        return key
    if keep_one_active:
        others = (
            ApiKey.objects.filter(application_id=key.application_id, revoked_at__isnull=True)
            .exclude(pk=key.pk)
            .exists()
        )
        if not others:
            raise ApplicationError(
                LAST_ACTIVE_API_KEY,
                "This is the application's last active API key; create a new key "
                "(POST api-keys/) before revoking this one.",
                {"id": key.pk},
            )
    key.revoked_at = timezone.now()
    key.save(update_fields=["revoked_at"])
    return key


@transaction.atomic
def application_keys_rotate(*, application: Application) -> tuple[ApiKey, str, int]:
    """Issue a new key and revoke every other active key of `application` in one step.

    Returns the new key row, the raw key (shown once) and how many keys were revoked.
    Locks the Application row.
    """
    _lock_application(application.pk)
    now = timezone.now()
    revoked = ApiKey.objects.filter(application=application, revoked_at__isnull=True).update(
        revoked_at=now
    )
    key, raw = api_key_issue(application=application)
    return key, raw, revoked


@transaction.atomic
def application_create(*, name: str) -> tuple[Application, str]:
    """Create an Application and its first API key; return both (the key in clear, once)."""
    application = Application.objects.create(name=name)
    return application, application_key_issue(application=application)


# ---------------------------------------------------------------- agents and versions

VERSION_FIELDS = (
    "system_prompt",
    "context_protocol_id",
    "context_protocol_version",
    "options",
    "model_provider",
    "model_name",
    "max_input_tokens",
    "maintenance_trigger_ratio",
    "model_config",
    "prompt_cache",
    "prices",
    "max_turns_per_run",
)


@transaction.atomic
def agent_create(*, application: Application, name: str) -> Agent:
    """Create an Agent; names are unique within an Application."""
    name = name.strip()
    if not name:
        raise ApplicationError(INVALID_REQUEST, "name must not be empty.")
    if Agent.objects.filter(application=application, name=name).exists():
        raise ApplicationError(
            AGENT_NAME_TAKEN,
            f"An agent named {name!r} already exists in this application.",
            {"field": "name"},
        )
    return Agent.objects.create(application=application, name=name)


def _resolve_binding(
    application: Application, tool_ids: list[Any] | None, maintainer_agent_id: Any
) -> tuple[list[Tool] | None, Agent | None, list[dict[str, str]]]:
    """Look up bound tools and maintainer; cross-application references become errors."""
    errors: list[dict[str, str]] = []
    tools: list[Tool] | None = None
    if tool_ids is not None:
        # Locked (after the version, as every binding write does) so a concurrent delete
        # or change of a tool waits for this binding or this binding sees the tool gone.
        locked = Tool.objects.select_for_update().filter(id__in=tool_ids).order_by("pk")
        found = {str(t.id): t for t in locked}
        tools = []
        for raw in tool_ids:
            tool = found.get(str(raw))
            if tool is None:
                errors.append(
                    {"field": "tools", "code": TOOL_NOT_FOUND, "message": f"No tool {raw}."}
                )
            elif tool.application_id != application.id:
                errors.append(
                    {
                        "field": "tools",
                        "code": CROSS_APPLICATION_TOOL_FORBIDDEN,
                        "message": f"Tool {raw} belongs to another application.",
                    }
                )
            else:
                tools.append(tool)
    maintainer = None
    if maintainer_agent_id is not None:
        maintainer = Agent.objects.filter(id=maintainer_agent_id).first()
        if maintainer is None:
            errors.append(
                {
                    "field": "maintainerAgentId",
                    "code": MAINTAINER_NOT_FOUND,
                    "message": f"No agent {maintainer_agent_id}.",
                }
            )
        elif maintainer.application_id != application.id:
            errors.append(
                {
                    "field": "maintainerAgentId",
                    "code": CROSS_APPLICATION_TOOL_FORBIDDEN,
                    "message": "The maintainer agent belongs to another application.",
                }
            )
            maintainer = None
    return tools, maintainer, errors


def _binding_errors_raise(errors: list[dict[str, str]]) -> None:
    if errors:
        # The first problem's code (tool_not_found, maintainer_not_found or
        # cross_application_tool_forbidden, all 400) heads the list of all of them.
        raise ApplicationError(errors[0]["code"], errors[0]["message"], {"errors": errors})


@transaction.atomic
def agent_version_create(
    *,
    agent: Agent,
    fields: dict[str, Any],
    tool_ids: list[Any] | None = None,
    maintainer_agent_id: Any = None,
) -> AgentVersion:
    """Create a draft version with the next number (the agent row is locked for numbering)."""
    Agent.objects.select_for_update().get(pk=agent.pk)
    tools, maintainer, errors = _resolve_binding(agent.application, tool_ids, maintainer_agent_id)
    _binding_errors_raise(errors)
    number = (agent.versions.aggregate(m=Max("number"))["m"] or 0) + 1
    version = AgentVersion.objects.create(
        agent=agent,
        number=number,
        maintainer_agent=maintainer,
        **{k: v for k, v in fields.items() if k in VERSION_FIELDS},
    )
    if tools:
        version.tools.set(tools)
    return version


def _lock_draft(version: AgentVersion) -> AgentVersion:
    locked = AgentVersion.objects.select_for_update().select_related("agent").get(pk=version.pk)
    if locked.status != AgentVersion.Status.DRAFT:
        raise ApplicationError(
            AGENT_VERSION_IMMUTABLE,
            f"Version {locked.number} is {locked.status} and cannot change; "
            "duplicate it as a new draft and edit that.",
            {"status": locked.status},
        )
    return locked


@transaction.atomic
def agent_version_update_draft(
    *,
    version: AgentVersion,
    fields: dict[str, Any],
    tool_ids: list[Any] | None = None,
    maintainer_agent_id: Any = ...,
) -> AgentVersion:
    """Change fields of a draft; published and archived versions refuse (409)."""
    locked = _lock_draft(version)
    tools, maintainer, errors = _resolve_binding(
        locked.agent.application,
        tool_ids,
        None if maintainer_agent_id is ... else maintainer_agent_id,
    )
    _binding_errors_raise(errors)
    for key, value in fields.items():
        if key in VERSION_FIELDS:
            setattr(locked, key, value)
    if maintainer_agent_id is not ...:
        locked.maintainer_agent = maintainer
    locked.save()
    if tools is not None:
        locked.tools.set(tools)
    return locked


def agent_version_problems(version: AgentVersion) -> list[dict[str, str]]:
    """Every reason `version` cannot be published, as `{field, code, message}` (contract §2.1)."""
    problems: list[dict[str, str]] = []
    try:
        protocol = protocol_of(version)
    except ProtocolError:
        known = ", ".join(v.key for v in catalog.all_versions())
        problems.append(
            {
                "field": "contextProtocolId",
                "code": "protocol_unknown",
                "message": f"{version.protocol_key} is not in the catalog; choose one of {known}.",
            }
        )
    else:
        checked = validate_options(protocol.protocol_id, protocol.version, version.options)
        for error in checked.errors:
            field = f"options.{error['option']}" if error.get("option") else "options"
            problems.append({"field": field, "code": error["code"], "message": error["message"]})
        if protocol.windowed:
            count = version.system_prompt.count(SYSTEM_PLACEHOLDER)
            if count != 1:
                problems.append(
                    {
                        "field": "systemPrompt",
                        "code": "protocol_placeholder_missing"
                        if count == 0
                        else "protocol_placeholder_repeated",
                        "message": f"A {protocol.key} system prompt must contain "
                        f"{SYSTEM_PLACEHOLDER} exactly once (found {count}).",
                    }
                )
    application_id = version.agent.application_id
    for tool in version.tools.all():
        if tool.application_id != application_id:
            problems.append(
                {
                    "field": "tools",
                    "code": CROSS_APPLICATION_TOOL_FORBIDDEN,
                    "message": f"Tool {tool.name} belongs to another application.",
                }
            )
    if version.maintainer_agent is not None:
        if version.maintainer_agent.application_id != application_id:
            problems.append(
                {
                    "field": "maintainerAgentId",
                    "code": CROSS_APPLICATION_TOOL_FORBIDDEN,
                    "message": "The maintainer agent belongs to another application.",
                }
            )
        elif version.maintainer_agent_id == version.agent_id:
            problems.append(
                {
                    "field": "maintainerAgentId",
                    "code": "maintainer_is_self",
                    "message": "An agent cannot be its own maintainer; bind a separate agent.",
                }
            )
    problems.extend(
        {"field": p["field"], "code": p["code"], "message": p["message"]}
        for p in model_problems(version)
    )
    if not 1 <= version.max_turns_per_run <= 1000:
        problems.append(
            {
                "field": "maxTurnsPerRun",
                "code": "out_of_range",
                "message": "maxTurnsPerRun must be between 1 and 1000.",
            }
        )
    return problems


@transaction.atomic
def agent_version_publish(*, version: AgentVersion) -> AgentVersion:
    """Validate and publish a draft, or refuse with every problem at once (400).

    The options and `model.promptCache` are stored normalized (defaults filled in), so a
    later default change never alters a published version's behaviour.
    """
    locked = _lock_draft(version)
    # Its tools are locked next, so a tool is not changed or deleted under a publish: that
    # write waits and then sees the version published (services_tools).
    list(Tool.objects.select_for_update(of=("self",)).filter(agent_versions=locked).order_by("pk"))
    problems = agent_version_problems(locked)
    if problems:
        raise ApplicationError(
            AGENT_VERSION_INVALID,
            f"The version has {len(problems)} problem(s); fix them and publish again.",
            {"errors": problems},
        )
    checked = validate_options(
        locked.context_protocol_id, locked.context_protocol_version, locked.options
    )
    locked.options = checked.normalized
    # Every key with its value, so a later default change never alters this version.
    locked.prompt_cache = validate_prompt_cache(locked.prompt_cache).normalized
    locked.status = AgentVersion.Status.PUBLISHED
    locked.published_at = timezone.now()
    locked.save()
    return locked


@transaction.atomic
def agent_version_duplicate(*, version: AgentVersion) -> AgentVersion:
    """Copy a version (any status) into a new draft of the same agent."""
    return agent_version_create(
        agent=version.agent,
        fields={name: getattr(version, name) for name in VERSION_FIELDS},
        tool_ids=[t.id for t in version.tools.all()],
        maintainer_agent_id=version.maintainer_agent_id,
    )


@transaction.atomic
def agent_version_archive(*, version: AgentVersion) -> AgentVersion:
    """Archive a published version: no new session starts on it; its sessions go on.

    Locks the version row. Idempotent: an archived version is returned as it is. Refuses a
    draft (409 `agent_version_not_published`): a draft was never usable, so archiving it
    would mean nothing; there is nothing to undo it either (duplicate it as a new draft).
    """
    locked = AgentVersion.objects.select_for_update().select_related("agent").get(pk=version.pk)
    if locked.status == AgentVersion.Status.ARCHIVED:
        return locked
    if locked.status != AgentVersion.Status.PUBLISHED:
        raise ApplicationError(
            AGENT_VERSION_NOT_PUBLISHED,
            f"Version {locked.number} is a {locked.status}; only published versions can be "
            "archived.",
            {"status": locked.status},
        )
    locked.status = AgentVersion.Status.ARCHIVED
    locked.save(update_fields=["status"])
    return locked
