"""Session lifecycle: start a session, rotate or revoke its session key."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.models import AgentVersion, hash_key
from agents.services import generate_key
from contextproto.errors import (
    AGENT_VERSION_ARCHIVED,
    AGENT_VERSION_NOT_PUBLISHED,
    ApplicationError,
    NotFound,
)
from contextproto.protocol import state as kvkeys
from sessions_app.models import Session
from sessions_app.store.state import kv_apply_locked

SESSION_KEY_PREFIX = "cps_"


@transaction.atomic
def session_create(
    *, agent_version: AgentVersion, inputs: dict[str, Any] | None = None
) -> tuple[Session, str]:
    """Start a session on a published version with the initial KV; return it and its key.

    The session key is returned in clear only here; it is stored hashed. An archived version
    refuses new sessions (409 `agent_version_archived`); its existing sessions go on.
    """
    agent_version_startable_check(agent_version)
    raw_key, key_hash = session_key_new()
    session = Session.objects.create(
        application_id=agent_version.agent.application_id,
        agent_version=agent_version,
        inputs=inputs or {},
        session_key_hash=key_hash,
        active_window=kvkeys.MAIN_WINDOW,
    )
    kv_apply_locked(session, kvkeys.initial_kv())
    return session, raw_key


def agent_version_startable_check(agent_version: AgentVersion) -> None:
    """Refuse a version new sessions (forks too) cannot start on: archived (409), draft (400)."""
    if agent_version.status == AgentVersion.Status.ARCHIVED:
        raise ApplicationError(
            AGENT_VERSION_ARCHIVED,
            f"Version {agent_version.number} is archived: its sessions go on, but new "
            "sessions start only on published versions; use a newer published version.",
            {"agentVersionId": str(agent_version.id), "status": agent_version.status},
        )
    if agent_version.status != AgentVersion.Status.PUBLISHED:
        raise ApplicationError(
            AGENT_VERSION_NOT_PUBLISHED,
            "Sessions start only on published AgentVersions; publish this version first.",
            {"agentVersionId": str(agent_version.id), "status": agent_version.status},
        )


def session_key_new() -> tuple[str, str]:
    """A new session key and its stored hash; the key is shown once, to its creator."""
    raw_key = generate_key(SESSION_KEY_PREFIX)
    return raw_key, hash_key(raw_key)


def _session_key_replace(session: Session, raw_key: str) -> None:
    # Only the hash column changes: a save() would write back a stale revision or index.
    updated = Session.objects.filter(pk=session.pk).update(session_key_hash=hash_key(raw_key))
    if not updated:
        raise NotFound("Session")


@transaction.atomic
def session_key_rotate(*, session: Session) -> str:
    """Give `session` a new session key; return it (shown once). The old key gets 401 at once."""
    raw_key = generate_key(SESSION_KEY_PREFIX)
    _session_key_replace(session, raw_key)
    return raw_key


@transaction.atomic
def session_key_revoke(*, session: Session) -> None:
    """Revoke the session key of `session`: the next request with it gets 401.

    Session has no revoked flag (and no migration adds one): the stored hash is replaced
    by the hash of a fresh random key that is never shown, so no key matches any more.
    A new key can be issued later with session_key_rotate.
    """
    _session_key_replace(session, generate_key(SESSION_KEY_PREFIX))
