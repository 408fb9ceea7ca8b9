"""Which session a gateway request belongs to (contract §19.1, §21), in the contract's order.

1. A session key, or the application key with `X-Contextproto-Session`.
2. `previous_response_id`: a response of the key's Application. Continuing its session's
   latest reply continues the session; an identical request after it is a retry (its reply
   again); anything else after an earlier reply forks the session at that reply.
3. A `compaction` item of the input: its signed token names the session and the point of
   its log the item stands for.
4. A conversation id the client sends on its own (conversations.py), a sub-agent's own id
   naming a child session.
5. A tool-call id the gateway minted for one of its replies: that call's session.
6. Otherwise a new session of the version `model` names (aliases included).

A request that carries no tools under one of the Application's side models, at a conversation's
start, is a side request (`Located.side`): with a conversation id, the conversation's session
(started by it when it is the first) records it; without one (`SideOnly`) it is answered by the
version its model names and starts nothing.

Everything runs inside the transaction that opens the request, and the session found is
locked. What the request's messages mean for that session is the reconciliation's business;
`Located.implied` are the transcript items a request leaves out because its reference
(`previous_response_id`, a compaction item) stands for them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from django.conf import settings

from agents.models import AgentVersion
from agents.selectors import gateway_version_for_model, is_side_model
from contextproto.errors import PREVIOUS_RESPONSE_NOT_FOUND, ApplicationError, NotFound
from contextproto.ids import canonical_uuid
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.gateway.compaction import read_compaction
from contextproto.protocol.gateway.transcript import Item
from contextproto.protocol.messages import ROLE_ASSISTANT
from sessions_app.gateway.checks import system_check
from sessions_app.gateway.conversations import conversation_session, conversation_start
from sessions_app.gateway.events import Finished
from sessions_app.gateway.incoming import Incoming
from sessions_app.gateway.record import ExchangeRecord
from sessions_app.gateway.reply import stored_reply
from sessions_app.models import GatewayCallId, GatewayExchange, Message, Session
from sessions_app.reads.transcript import transcript_tail
from sessions_app.services.fork import session_fork
from sessions_app.services.sessions import session_create
from sessions_app.store.state import session_lock

NEW_SESSION = "new-session"


@dataclass(frozen=True)
class Located:
    """The request's session, locked. `created_key`: the key of a session this request
    started (a new one or a fork), shown once; `implied`: transcript items the request's
    reference stands for, which come before its own items; `replay`: the reply of an
    identical request, answered again; `forked_from`: the session a fork was made of."""

    session: Session
    created_key: str | None = None
    implied: tuple[Item, ...] = field(default=())
    replay: Finished | None = None
    forked_from: Session | None = None
    warning: str = ""  # `new-session`: a conversation in progress started a session
    side: bool = False  # a side request at the conversation's start (module docstring)


@dataclass(frozen=True)
class SideOnly:
    """A side request before its conversation has a session: answered by `version` (the one
    its model names), it starts no session."""

    version: AgentVersion


def compaction_key() -> bytes:
    """The key compaction tokens are signed with: the service's, for this one purpose."""
    return hashlib.sha256(("contextproto compaction " + settings.SECRET_KEY).encode()).digest()


def locate(
    incoming: Incoming, record: ExchangeRecord, named: str | None, *, side_allowed: bool = True
) -> Located | SideOnly:
    """The request's session (module docstring). Raises what the request cannot get past:
    404 for a session, response or model the key's Application does not have, 400 for a
    compaction item that is not this Application's or was altered."""
    if incoming.session_key_of is not None:
        return Located(session_lock(incoming.session_key_of))
    wanted_name = named or incoming.named_session
    if wanted_name is not None:
        wanted = canonical_uuid(wanted_name)
        found = (
            session_lock(wanted, application_id=incoming.application.pk)
            if wanted is not None
            else None
        )
        if found is None:
            raise NotFound("Session", {"sessionId": wanted_name})
        return Located(found)
    request = incoming.request
    if request.previous_response_id is not None:
        return _after_response(incoming, record, request.previous_response_id)
    if request.compaction is not None:
        return _after_compaction(incoming)
    conversation = incoming.conversation

    def side_first() -> bool:  # asked only at a conversation's start (a settings read)
        return (
            side_allowed
            and not request.tools
            and is_side_model(incoming.application, request.model)
        )

    if conversation is not None:
        found = conversation_session(incoming.application.pk, conversation)
        if found is not None:
            # Before the conversation's own first request, a side request is still one.
            return Located(found, side=found.last_index == 0 and side_first())
    else:
        by_call = _by_minted_call(incoming)
        if by_call is not None:
            return by_call
    version = gateway_version_for_model(application=incoming.application, model=request.model)
    if side_first():
        if conversation is None:
            return SideOnly(version)
        # The conversation's session, started now and empty: its first real request goes on
        # in it (no key is shown: the client names it by its conversation id).
        session, _key = conversation_start(incoming.application.pk, conversation, version)
        return Located(session, side=True)
    system_check(version, request.system)
    if conversation is not None:
        session, key = conversation_start(incoming.application.pk, conversation, version)
        if key is None:  # its first request at the same moment started it
            return Located(session)
    else:
        session, key = session_create(agent_version=version)
        session = session_lock(session.id)
    in_progress = any(item.role == ROLE_ASSISTANT for item in request.items)
    return Located(session, created_key=key, warning=NEW_SESSION if in_progress else "")


def _after_response(incoming: Incoming, record: ExchangeRecord, response_id: str) -> Located:
    """Continue, replay or fork after the response `response_id` (contract §21)."""
    response = (
        GatewayExchange.objects.filter(
            application=incoming.application,
            reply_id=response_id,
            replayed=False,
            stored=True,
            deleted_at__isnull=True,
            status=GatewayExchange.Status.REPLIED,
        )
        .select_related("session")
        .first()
    )
    if response is None or response.session is None or response.reply_end_index is None:
        raise ApplicationError(
            PREVIOUS_RESPONSE_NOT_FOUND,
            f"previous_response_id {response_id!r} names no stored response of this "
            "Application (unknown, deleted, or made with store: false); send the whole "
            "conversation instead, or continue a response the gateway stored.",
            {"previousResponseId": response_id},
        )
    retried = (
        GatewayExchange.objects.filter(
            application=incoming.application,
            continues=response_id,
            request_hash=incoming.body_hash,
            status=GatewayExchange.Status.REPLIED,
            replayed=False,
        )
        .order_by("created_at")
        .first()
    )
    if retried is not None and retried.session_id is not None:
        finished = stored_reply(retried, incoming.wire, incoming.request)
        record.session_id = retried.session_id
        record.replay(finished, request_hash=incoming.body_hash, idempotency_key=None)
        return Located(session_lock(retried.session_id), replay=finished)
    session = session_lock(response.session.pk)
    implied = _reply_items(session, response.reply_end_index)
    if _is_latest(session, response.reply_end_index):
        return Located(session, implied=implied[-1:])
    fork, key = session_fork(
        session=session, through_index=response.reply_end_index, keep_pending_call=True
    )
    return Located(
        session_lock(fork.id), created_key=key, implied=implied[-1:], forked_from=session
    )


def _reply_items(session: Session, through_index: int) -> tuple[Item, ...]:
    """The transcript through `through_index` (its last items: enough to reconcile)."""
    tail = transcript_tail(session.id, session.last_index, wanted=2, before_index=through_index + 1)
    return tuple(i for i in tail.transcript.items if i.position <= through_index)


def _is_latest(session: Session, through_index: int) -> bool:
    """Whether the reply ending at `through_index` is the session's latest: nothing but the
    client's own messages (a request that failed before its reply) follows it."""
    return (
        session.last_index <= through_index
        or not Message.objects.filter(
            session=session, index__gt=through_index, role=ROLE_ASSISTANT
        ).exists()
    )


def _by_minted_call(incoming: Incoming) -> Located | None:
    """The session of the latest call id in the request that the gateway minted for one of
    its replies (of the key's Application), locked; None when there is none."""
    ids: list[str] = []
    for item in incoming.request.items:
        ids.extend(call.id for call in item.calls)
        if item.call_id is not None:
            ids.append(item.call_id)
    if not ids:
        return None
    owners = dict(
        GatewayCallId.objects.filter(
            application=incoming.application, call_id__in=set(ids)
        ).values_list("call_id", "session_id")
    )
    latest = next((owners[i] for i in reversed(ids) if i in owners), None)
    if latest is None:
        return None
    found = session_lock(latest, application_id=incoming.application.pk)
    return Located(found) if found is not None else None


def _after_compaction(incoming: Incoming) -> Located:
    """The session and point a compaction item's token names (contract §21)."""
    compaction = incoming.request.compaction
    assert compaction is not None
    try:
        session_id, through = read_compaction(
            compaction_key(), compaction.token, str(incoming.application.pk)
        )
    except ProtocolError as exc:
        raise ApplicationError.from_protocol(exc) from exc
    session = session_lock(session_id, application_id=incoming.application.pk)
    if session is None:  # signed for this Application, but its session is gone
        raise NotFound("Session", {"sessionId": session_id})
    return Located(session, implied=_reply_items(session, through))
