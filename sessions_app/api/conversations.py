"""A gateway conversation over the API (contract §14): which session a client's conversation id
names, and its sub-agents' child sessions."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from contextproto.api import application_of
from sessions_app.api import shapes
from sessions_app.api.wire import GatewayConversationWire
from sessions_app.reads import lists


def conversation_to_wire(conversation: lists.ConversationView) -> GatewayConversationWire:
    return {
        "conversationId": conversation.conversation_id,
        "sessionId": str(conversation.session_id),
        "childSessions": [
            {"agentId": agent_id, "sessionId": str(session_id)}
            for agent_id, session_id in conversation.children
        ],
    }


class GatewayConversationApi(APIView):
    """The session a conversation id names (application key; 404 when the Application has no
    conversation by that id)."""

    @extend_schema(responses={200: shapes.GatewayConversation})
    def get(self, request: Request, conversation_id: str) -> Response:
        application = application_of(request, "Conversation")
        conversation = lists.gateway_conversation_get(
            application_id=application.pk, conversation_id=conversation_id
        )
        return Response(conversation_to_wire(conversation))
