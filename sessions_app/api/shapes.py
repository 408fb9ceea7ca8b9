"""Response shapes of the session endpoints (contract §12.1), for the OpenAPI schema.

These serializers describe what the `*_to_wire` builders render; they are not used to
render (the wire dicts are built where the data is). Each shape is named once, as the
TypedDict its builder returns (`api/wire.py` for the views' own, the others beside their
builders); tests/api/test_wire_shapes.py holds every serializer here to its TypedDict, key
for key, and tests/api/test_response_shapes.py and the schemathesis suite check every
response against the schema.
"""

from __future__ import annotations

from rest_framework import serializers

from contextproto import api_schema
from contextproto.api import AnyJSONField


def _nullable_text(**kwargs) -> serializers.CharField:
    return serializers.CharField(allow_null=True, allow_blank=True, **kwargs)


class Frame(serializers.Serializer):
    """The state revision and upper bound a tool call was made against (contract §3.1)."""

    revision = serializers.IntegerField(help_text="The state revision R of the call's view.")
    upperBound = serializers.IntegerField(
        help_text="The upper bound U of the call's view (the call itself is above it)."
    )


class Message(serializers.Serializer):
    """One message of the raw log; fields a message does not have are null."""

    id = serializers.CharField()
    index = serializers.IntegerField()
    windowId = serializers.CharField()
    role = serializers.ChoiceField(choices=api_schema.MESSAGE_ROLES)
    kind = serializers.ChoiceField(choices=api_schema.MESSAGE_KINDS)
    content = AnyJSONField(
        help_text="A string or a list of parts ({type: text|image, ...}; a model's answer may "
        "also carry Anthropic thinking|redacted_thinking parts)."
    )
    runId = _nullable_text(help_text="The run this message was written in (hex).")
    inputRun = _nullable_text(help_text="For an input: the run it started (hex).")
    toolCallId = _nullable_text()
    toolName = _nullable_text()
    arguments = AnyJSONField(
        allow_null=True,
        help_text="A tool call's arguments: an object, or the provider's text as written when "
        "it is not the JSON text of one.",
    )
    isError = serializers.BooleanField(allow_null=True)
    snapshotId = _nullable_text(
        help_text="The view a model's answer was generated from; null for a call made over MCP "
        "(its view is the MCP host's)."
    )
    frame = Frame(
        allow_null=True,
        help_text="On a tool_call: the state revision and upper bound it was made against and "
        "its dispatch acts on (its snapshot's; an MCP call's, the state its client saw). Null "
        "on other kinds.",
    )
    createdAt = serializers.DateTimeField(allow_null=True)


class ForkPoint(serializers.Serializer):
    sessionId = serializers.UUIDField(help_text="The session this one was forked from.")
    throughIndex = serializers.IntegerField(
        help_text="The bound used: messages #1..throughIndex were copied."
    )
    revision = serializers.IntegerField(help_text="The state revision the fork started from.")


class Session(serializers.Serializer):
    id = serializers.UUIDField()
    agentVersionId = serializers.UUIDField()
    inputs = AnyJSONField()
    stateRevision = serializers.IntegerField()
    activeWindow = serializers.CharField()
    currentRunId = _nullable_text(help_text="The current run (hex), if any.")
    lastIndex = serializers.IntegerField()
    createdAt = serializers.DateTimeField()
    forkedFrom = ForkPoint(
        allow_null=True, help_text="Where this session was forked from; null if it is no fork."
    )


class SessionUsage(serializers.Serializer):
    """Tokens and cost summed over the session's turns with reported usage."""

    inputTokens = serializers.IntegerField(
        help_text="Every input token, cache reads and writes included."
    )
    cacheReadInputTokens = serializers.IntegerField(help_text="Input tokens read from a cache.")
    cacheWriteInputTokens = serializers.IntegerField(help_text="Input tokens written to a cache.")
    outputTokens = serializers.IntegerField()
    cost = serializers.FloatField(
        allow_null=True,
        help_text="((input - cacheRead - cacheWrite) x prices.input + cacheRead x "
        "prices.cacheRead + cacheWrite x prices.cacheWrite + output x prices.output) / 1e6, in "
        "the currency of the version's model.prices; null when the version has no prices.",
    )
    turns = serializers.IntegerField(help_text="Turns whose usage was reported.")


class SessionUsageWithSide(SessionUsage):
    """The session's turns' usage, and apart its side requests' (contract §19.1)."""

    sideUsage = SessionUsage(
        help_text="The side requests (a client's background titles and summaries, answered "
        "outside the conversation): their tokens and cost; `turns` counts the requests."
    )


class SessionDetail(Session):
    usage = SessionUsageWithSide()


class SessionCreated(Session):
    sessionKey = serializers.CharField(
        help_text="The session key (cps_…): shown once, only in this response."
    )


class SessionForked(SessionCreated):
    """The new session of a fork, with its session key (shown once) and `forkedFrom` set."""


class ProjectionMessage(serializers.Serializer):
    """One message of the model's view; the tool fields only where the message has them."""

    role = serializers.ChoiceField(choices=api_schema.VIEW_ROLES)
    kind = serializers.ChoiceField(
        choices=api_schema.VIEW_KINDS,
        help_text="A raw message's kind, or a derived message's type.",
    )
    content = AnyJSONField()
    toolCallId = serializers.CharField(required=False)
    toolName = serializers.CharField(required=False)
    arguments = AnyJSONField(required=False)


class ProjectionSource(serializers.Serializer):
    """Which raw messages (if any) `messages[i]` stands for."""

    derivedType = serializers.ChoiceField(choices=api_schema.DERIVED_TYPES)
    foldId = _nullable_text()
    sessionId = serializers.CharField()
    windowId = _nullable_text()
    firstIndex = serializers.IntegerField(allow_null=True)
    lastIndex = serializers.IntegerField(allow_null=True)
    messageIds = serializers.ListField(child=serializers.CharField())


class Snapshot(serializers.Serializer):
    """A stored view (projection): `sources[i]` belongs to `messages[i]`."""

    snapshotId = serializers.UUIDField()
    revision = serializers.IntegerField()
    upperBound = serializers.IntegerField()
    runId = _nullable_text()
    windowId = serializers.CharField()
    protocol = serializers.CharField()
    provider = serializers.ChoiceField(
        choices=api_schema.WIRE_FORMATS, help_text="The wire format of `request`."
    )
    messages = ProjectionMessage(many=True)
    sources = ProjectionSource(many=True)
    request = AnyJSONField(help_text="The request body for `provider`.")
    notes = AnyJSONField()
    usage = AnyJSONField(allow_null=True)
    createdAt = serializers.DateTimeField()


class ToolError(serializers.Serializer):
    """Why a tool call failed; more context fields may follow the three named here."""

    code = serializers.ChoiceField(choices=api_schema.TOOL_RESULT_CODES)
    message = serializers.CharField(help_text="What went wrong, for the model to act on.")
    correctable = serializers.BooleanField(help_text="Whether calling differently can succeed.")


class ToolResult(serializers.Serializer):
    """A tool's answer: its own fields when `success` is true, else `error`."""

    success = serializers.BooleanField()
    error = ToolError(required=False)


class Receipt(serializers.Serializer):
    """The outcome of a dispatched protocol tool call; the same again when replayed."""

    toolCallId = serializers.CharField()
    replayed = serializers.BooleanField()
    stateRevision = serializers.IntegerField()
    result = ToolResult()
    resultMessage = Message()


class HostCall(serializers.Serializer):
    """The call the host executes now; its result is written under this id."""

    toolCallId = serializers.CharField()
    toolName = serializers.CharField()
    arguments = AnyJSONField(
        help_text="An object, or the provider's text as written when it is not the JSON text "
        "of one."
    )


class Turn(serializers.Serializer):
    """A recorded model answer; the same again, with `replayed: true`, for the same body."""

    messages = Message(
        many=True,
        help_text="Every message the turn wrote, in log order: the answer, the service's "
        "results for calls no host runs, the dispatched results.",
    )
    receipt = Receipt(
        allow_null=True,
        help_text="The dispatch of the answer's first call when it is a protocol tool; null "
        "otherwise.",
    )
    hostCall = HostCall(
        allow_null=True, help_text="The call for the host to execute now; null when none."
    )
    runStatus = serializers.ChoiceField(
        choices=api_schema.RUN_STATUSES,
        allow_null=True,
        help_text="The status of the run the answer belongs to (external: a host drives it).",
    )
    replayed = serializers.BooleanField(help_text="True when the same body was recorded before.")


class Window(serializers.Serializer):
    windowId = serializers.CharField()
    active = serializers.BooleanField()
    record = AnyJSONField(allow_null=True, help_text="The window's KV record.")
    checkpoint = AnyJSONField(allow_null=True)
    coveredThrough = serializers.IntegerField()


class Fold(serializers.Serializer):
    foldId = serializers.CharField()
    windowId = serializers.CharField()
    firstIndex = serializers.IntegerField()
    lastIndex = serializers.IntegerField()
    messageIds = serializers.ListField(child=serializers.CharField())
    summary = serializers.CharField(allow_blank=True)
    compressed = serializers.BooleanField(help_text="Its range lies within coveredThrough.")


class KvEntry(serializers.Serializer):
    key = serializers.CharField()
    value = AnyJSONField(allow_null=True)
    revision = serializers.IntegerField()


class MaintenanceJob(serializers.Serializer):
    jobId = serializers.UUIDField()
    status = serializers.CharField()
    windowId = serializers.CharField()
    trigger = serializers.CharField()
    external = serializers.BooleanField()
    frozenRevision = serializers.IntegerField(allow_null=True)
    fromIndex = serializers.IntegerField(allow_null=True)
    throughIndex = serializers.IntegerField(allow_null=True)
    sourceHash = _nullable_text()
    pageCount = serializers.IntegerField()
    pagesRead = serializers.IntegerField()
    attempts = serializers.IntegerField()
    reason = _nullable_text()
    tokensBefore = serializers.IntegerField(allow_null=True)
    tokensAfter = serializers.IntegerField(allow_null=True)


class DependencyChecks(serializers.Serializer):
    """ "ok", or what failed ("error: …", "pending: n")."""

    database = serializers.CharField()
    cache = serializers.CharField()
    migrations = serializers.CharField(required=False)


class CatalogGroup(serializers.Serializer):
    catalogFingerprint = serializers.CharField()
    protocols = serializers.ListField(child=serializers.CharField(), allow_null=True)
    nodes = serializers.ListField(child=serializers.CharField())


class Health(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "degraded"])
    role = serializers.CharField()
    catalogFingerprint = serializers.CharField()
    redis = serializers.BooleanField()
    checks = DependencyChecks()
    registry = serializers.CharField(help_text='"redis", "off" or "error: …".')
    nodes = serializers.ListField(child=serializers.DictField())
    skew = serializers.BooleanField()
    codeSkew = serializers.BooleanField()
    fingerprints = CatalogGroup(many=True)


class HealthLive(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok"])


class HealthReady(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "not_ready"])
    checks = DependencyChecks()


class ChildSession(serializers.Serializer):
    agentId = serializers.CharField(help_text="The sub-agent's own id in the conversation.")
    sessionId = serializers.UUIDField()


class GatewayConversation(serializers.Serializer):
    """A conversation id a client sent on its own, and the sessions it names (contract §14)."""

    conversationId = serializers.CharField()
    sessionId = serializers.UUIDField(help_text="The conversation's session.")
    childSessions = ChildSession(
        many=True, help_text="Its sub-agents' sessions, in the order they began."
    )
