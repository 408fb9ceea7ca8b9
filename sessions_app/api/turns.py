"""`POST sessions/{id}/turns/`: a host records one model answer in one call (contract §5.2a)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from contextproto.api import AnyJSONField, StrictSerializer
from contextproto.protocol.model_answers import answer_from_host
from contextproto.telemetry.views import TracedView
from sessions_app.api import shapes, turn_traces
from sessions_app.api.usage import provider_counts, usage_counts
from sessions_app.api.views import session_for
from sessions_app.services import turns


class TurnApi(TracedView, APIView):
    """Record the model's answer to a view: its text and calls, its usage, the dispatch of its
    first call when that is a protocol tool, the error results of its later calls.

    `answer` is the provider's reply as its SDK returned it (an OpenAI chat.completion or its
    `choices[0].message`, an Anthropic message) or `{content, toolCalls: [{id, name,
    arguments}]}`. Text beside calls goes into the first call's `content`; an Anthropic
    answer's thinking blocks are stored with it as given. `usage` (the service's counts or the
    provider's usage object) wins over the reply's own. Answer: the messages written, the
    receipt of the dispatched call, the call the host runs now (`hostCall`, with the id to
    write its result under), the run's status. The same body again answers the same with
    `replayed: true` (200); another body for the same snapshot is 409
    `snapshot_already_answered`.
    """

    class Input(StrictSerializer):
        snapshotId = serializers.CharField(
            max_length=64, help_text="The view (projection) the model answered."
        )
        answer = AnyJSONField(
            help_text="The model's answer: an OpenAI chat.completion, its choices[0].message, "
            "an Anthropic message, or {content, toolCalls: [{id, name, arguments}]}."
        )
        usage = AnyJSONField(
            required=False,
            allow_null=True,
            help_text="The turn's usage: {inputTokens, outputTokens, cacheReadInputTokens?, "
            "cacheWriteInputTokens?}, or the provider's usage object (OpenAI or Anthropic). "
            "Absent: the reply's own usage, if it has one.",
        )

    @extend_schema(request=Input, responses={201: shapes.Turn, 200: shapes.Turn})
    def post(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        turn_traces.name_session(session)
        data = self.Input.parse(request.data)
        answer = answer_from_host(data["answer"])
        if data.get("usage") is not None:
            usage = usage_counts(data["usage"], root="usage")
        elif answer.usage is not None:
            usage = provider_counts(answer.usage, root=answer.usage_field)
        else:
            usage = None
        recorded = turns.turn_record(
            session_id=session.id,
            snapshot_id=data["snapshotId"],
            answer=answer,
            usage=usage,
            request={"answer": data["answer"], "usage": data.get("usage")},
        )
        # The request's span (TracedView) gets the turn as recorded under it (contract §22).
        turn_traces.record_turn(
            session=session,
            snapshot_id=data["snapshotId"],
            answer=answer,
            sent=data["answer"],
            recorded=recorded,
        )
        code = status.HTTP_200_OK if recorded.replayed else status.HTTP_201_CREATED
        return Response(recorded.to_wire(), status=code)
