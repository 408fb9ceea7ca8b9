"""`POST sessions/{id}/snapshots/{snapshotId}/usage/`: an external host reports a turn's usage."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from contextproto.api import AnyJSONField, StrictIntegerField, StrictSerializer
from contextproto.protocol.catalog import JSON_INTEGER_MAX
from contextproto.protocol.host_wire import usage_from_provider
from sessions_app.api.views import session_for
from sessions_app.services.usage import snapshot_usage_report


class TokenCountField(StrictIntegerField):
    """A JSON integer >= 0: no numeric strings, floats or booleans (DRF accepts "12")."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_value=0, max_value=JSON_INTEGER_MAX, **kwargs)


class UsageCounts(StrictSerializer):
    """A turn's usage in the service's counts."""

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


class ProviderUsage(StrictSerializer):
    """A turn's usage as the provider's SDK returned it, converted to the counts."""

    usage = AnyJSONField(
        help_text="OpenAI Chat Completions (prompt_tokens, completion_tokens, "
        "prompt_tokens_details.cached_tokens) or Anthropic Messages (input_tokens, "
        "output_tokens, cache_read_input_tokens, cache_creation_input_tokens; the three input "
        "counts are added up). Other fields of the object are ignored."
    )


def provider_counts(usage: Any, *, root: str) -> dict[str, int]:
    """A provider's usage object as the service's counts (400 `usage_invalid` naming the field
    under `root` when it is neither OpenAI's nor Anthropic's)."""
    converted = usage_from_provider(usage, root=root)
    return {
        "inputTokens": converted["inputTokens"],
        "outputTokens": converted["outputTokens"],
        "cacheReadInputTokens": converted["cacheReadInputTokens"],
        "cacheWriteInputTokens": converted["cacheWriteInputTokens"],
    }


def usage_counts(value: Any, *, root: str) -> dict[str, int]:
    """A turn's usage as the usage endpoint takes it: the service's counts (an object with
    `inputTokens`, ...) or the provider's own usage object; refusals name fields under
    `root`."""
    if isinstance(value, dict) and any(name in value for name in UsageCounts().fields):
        counts = UsageCounts(data=value)
        if not counts.is_valid():
            raise serializers.ValidationError({root: counts.errors})
        return dict(counts.validated_data)
    return provider_counts(value, root=root)


USAGE_REPORT = PolymorphicProxySerializer(
    component_name="UsageReport",
    serializers=[UsageCounts, ProviderUsage],
    resource_type_field_name=None,
)


class SnapshotUsageApi(APIView):
    """Report the provider's usage of the turn that used this snapshot (once per snapshot).

    `inputTokens` counts every input token, cache reads and writes included (OpenAI's
    convention; on Anthropic add `input_tokens`, `cache_read_input_tokens` and
    `cache_creation_input_tokens`). Or send `{"usage": {...}}` alone, with the provider's own
    usage object (OpenAI Chat Completions or Anthropic Messages, as its SDK returned it):
    it is converted to these counts. Drives the same maintenance trigger as the built-in
    runtime: input tokens at or above `maintenanceTriggerRatio * maxInputTokens` queue
    maintenance of the active window when a maintainer is bound. The turn is priced at the
    version's `model.prices`. The same counts again replay (`replayed: true`); other counts
    for a snapshot already reported are a 409 `usage_already_reported`.
    """

    class Output(serializers.Serializer):
        snapshotId = serializers.UUIDField()
        usage = serializers.DictField(child=serializers.IntegerField())
        replayed = serializers.BooleanField()
        maintenanceJobId = serializers.UUIDField(
            allow_null=True, help_text="The maintenance job this report queued, if any."
        )

    @extend_schema(request=USAGE_REPORT, responses={200: Output})
    def post(self, request: Request, session_id: str, snapshot_id: str) -> Response:
        session = session_for(request, session_id)
        # The provider's object when the body names one; else the counts (whose refusal then
        # names what is missing).
        counts: dict[str, int]
        if isinstance(request.data, dict) and "usage" in request.data:
            counts = provider_counts(ProviderUsage.parse(request.data)["usage"], root="usage")
        else:
            counts = dict(UsageCounts.parse(request.data))
        report = snapshot_usage_report(session_id=session.id, snapshot_id=snapshot_id, usage=counts)
        job = report.maintenance_job
        return Response(
            {
                "snapshotId": str(report.snapshot.id),
                "usage": report.snapshot.usage,
                "replayed": report.replayed,
                "maintenanceJobId": str(job.id) if job else None,
            }
        )
