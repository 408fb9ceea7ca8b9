"""A conversation id's session (contract §14, SPEC §19.1 step 3), found or started.

Per Application, a conversation id names one session, started by its first request; a
sub-agent's own id within it names a child session whose parent is the conversation's (or the
sub-agent's that started it). The `GatewayConversation` row's unique constraint is what makes
first requests that arrive at the same moment start one session: the second insert waits for
the first transaction and fails once it commits; its savepoint is rolled back (with the
session it had started) and the request goes on with the first one's session, where §19's
rules for a busy session and an identical request in flight apply.
"""

from __future__ import annotations

from uuid import UUID

from django.db import IntegrityError, transaction

from agents.models import AgentVersion
from contextproto.protocol.gateway.conversations import ConversationRef
from sessions_app.models import GatewayConversation, Session
from sessions_app.services.sessions import session_create
from sessions_app.store.state import session_lock


def conversation_session(application_id: UUID, conversation: ConversationRef) -> Session | None:
    """The session `conversation` names in the Application, locked; None before its first
    request."""
    found = (
        GatewayConversation.objects.filter(
            application_id=application_id,
            conversation_id=conversation.conversation_id,
            agent_id=conversation.agent_id,
        )
        .values_list("session_id", flat=True)
        .first()
    )
    return session_lock(found) if found is not None else None


def conversation_start(
    application_id: UUID, conversation: ConversationRef, version: AgentVersion
) -> tuple[Session, str | None]:
    """Start the session `conversation` names on `version` and return it, locked, with its key;
    when another request started it at the same moment, that one's session and no key."""
    parent = _parent_session(application_id, conversation)
    try:
        with transaction.atomic():
            session, key = session_create(agent_version=version)
            GatewayConversation.objects.create(
                application_id=application_id,
                conversation_id=conversation.conversation_id,
                agent_id=conversation.agent_id,
                session=session,
                parent_id=parent,
            )
    except IntegrityError:
        found = conversation_session(application_id, conversation)
        if found is None:  # not a race on this conversation: let it surface
            raise
        return found, None
    return session_lock(session.id), key


def _parent_session(application_id: UUID, conversation: ConversationRef) -> UUID | None:
    """A sub-agent's parent session: the sub-agent that started it, else the conversation's
    own session (None when neither has made a request yet)."""
    if not conversation.agent_id:
        return None
    wanted = [conversation.parent_agent_id, ""] if conversation.parent_agent_id else [""]
    rows = dict(
        GatewayConversation.objects.filter(
            application_id=application_id,
            conversation_id=conversation.conversation_id,
            agent_id__in=wanted,
        ).values_list("agent_id", "session_id")
    )
    return next((rows[w] for w in wanted if w in rows), None)
