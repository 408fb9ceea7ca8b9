"""`POST sessions/{id}/snapshots/{snapshotId}/usage/`: an external host reports a turn's usage."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from contextproto.api import StrictIntegerField, StrictSerializer
from contextproto.protocol.catalog import JSON_INTEGER_MAX
from sessions_app.api.views import session_for
from sessions_app.services.usage import snapshot_usage_report


class TokenCountField(StrictIntegerField):
    """A JSON integer >= 0: no numeric strings, floats or booleans (DRF accepts "12")."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_value=0, max_value=JSON_INTEGER_MAX, **kwargs)


class SnapshotUsageApi(APIView):
    """Report the provider's usage of the turn that used this snapshot (once per snapshot).

    `inputTokens` counts every input token, cache reads and writes included (OpenAI's
    convention; on Anthropic add `input_tokens`, `cache_read_input_tokens` and
    `cache_creation_input_tokens`). Drives the same maintenance trigger as the built-in
    runtime: input tokens at or above `maintenanceTriggerRatio * maxInputTokens` queue
    maintenance of the active window when a maintainer is bound. The turn is priced at the
    version's `model.prices`. The same counts again replay (`replayed: true`); other counts
    for a snapshot already reported are a 409 `usage_already_reported`.
    """

    class Input(StrictSerializer):
        inputTokens = TokenCountField(
            help_text="Every input (prompt) token of the request, cached ones included."
        )
        outputTokens = TokenCountField(help_text="Output (completion) tokens.")
        cacheReadInputTokens = TokenCountField(
            required=False, help_text="Of the input tokens, those read from the provider's cache."
        )
        cachedInputTokens = TokenCountField(
            required=False,
            help_text="Another name of cacheReadInputTokens (send one, or both equal).",
        )
        cacheWriteInputTokens = TokenCountField(
            required=False,
            help_text="Of the input tokens, those written to the provider's cache.",
        )

    class Output(serializers.Serializer):
        snapshotId = serializers.UUIDField()
        usage = serializers.DictField(child=serializers.IntegerField())
        replayed = serializers.BooleanField()
        maintenanceJobId = serializers.UUIDField(
            allow_null=True, help_text="The maintenance job this report queued, if any."
        )

    @extend_schema(request=Input, responses={200: Output})
    def post(self, request: Request, session_id: str, snapshot_id: str) -> Response:
        session = session_for(request, session_id)
        data = self.Input.parse(request.data)
        report = snapshot_usage_report(
            session_id=session.id, snapshot_id=snapshot_id, usage=dict(data)
        )
        job = report.maintenance_job
        return Response(
            {
                "snapshotId": str(report.snapshot.id),
                "usage": report.snapshot.usage,
                "replayed": report.replayed,
                "maintenanceJobId": str(job.id) if job else None,
            }
        )
