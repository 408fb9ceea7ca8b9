"""Session endpoints (contract §12): thin views; the session comes from the credential and path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import selectors as agent_selectors
from contextproto import api_schema, pagination
from contextproto.api import (
    AnyJSONField,
    IdField,
    StrictSerializer,
    application_of,
    credential_of,
    page_limit,
    query_int,
    query_revision,
)
from contextproto.api_schema import AFTER_INDEX, LIMIT, PAGE, PREFIX, REVISION, WINDOW
from contextproto.errors import NotFound
from contextproto.ids import parse_uuid
from contextproto.protocol import adapters, catalog
from contextproto.usage import SessionUsageWire
from sessions_app.api import shapes
from sessions_app.api.wire import (
    FoldWire,
    SessionCreatedWire,
    SessionDetailWire,
    SessionWire,
    WindowWire,
)
from sessions_app.models import Session
from sessions_app.reads import history, lists
from sessions_app.reads import usage as usage_reads
from sessions_app.services import (
    client_writes,
    fork,
    messages,
    projection,
    runs,
    sessions,
)


@extend_schema_field({"type": "string", "enum": api_schema.WRITABLE_KINDS})
class WritableKindField(serializers.CharField):
    pass


def session_for(request: Request, session_id: str) -> Session:
    """The session named in the path, if this credential may reach it; else 404."""
    credential = credential_of(request)
    wanted = parse_uuid(session_id, "Session")
    if credential.is_session_key and credential.session_id != wanted:
        raise NotFound("Session")
    return lists.session_get(session_id=wanted, application_id=credential.application.id)


def session_to_wire(session: Session) -> SessionWire:
    return {
        "id": str(session.id),
        "agentVersionId": str(session.agent_version_id),
        "inputs": session.inputs,
        "stateRevision": session.state_revision,
        "activeWindow": session.active_window,
        "currentRunId": session.current_run_id.hex if session.current_run_id else None,
        "lastIndex": session.last_index,
        "createdAt": session.created_at.isoformat(),
        "forkedFrom": point.to_wire() if (point := fork.fork_point_of(session)) else None,
    }


class SessionCreateApi(APIView):
    class Input(StrictSerializer):
        agentVersionId = IdField()
        inputs = serializers.DictField(required=False)

    @extend_schema(request=Input, responses={201: shapes.SessionCreated})
    def post(self, request: Request) -> Response:
        application = application_of(request)
        data = self.Input.parse(request.data)
        version = agent_selectors.agent_version_for_session(
            application=application, version_id=data["agentVersionId"]
        )
        session, key = sessions.session_create(agent_version=version, inputs=data.get("inputs"))
        body: SessionCreatedWire = {**session_to_wire(session), "sessionKey": key}
        return Response(body, status=status.HTTP_201_CREATED)


class SessionDetailApi(APIView):
    @extend_schema(responses={200: shapes.SessionDetail})
    def get(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        side = usage_reads.session_side_usage(session).to_wire()
        usage: SessionUsageWire = {
            **usage_reads.session_usage(session).to_wire(),
            "sideUsage": side,
        }
        body: SessionDetailWire = {**session_to_wire(session), "usage": usage}
        return Response(body)


CLIENT_MESSAGE_ID = serializers.CharField(
    max_length=128,
    min_length=1,
    required=False,
    allow_null=True,
    help_text="Idempotency key: a retry with the same id replays the first write "
    "(200, header Idempotent-Replayed: true) instead of writing twice.",
)
REPLAYED_HEADER = "Idempotent-Replayed"
REPLAYED = OpenApiParameter(
    REPLAYED_HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[200],
    description='"true": a retry with the same clientMessageId, answered with the first write.',
)


def _written(body: Mapping[str, Any], replayed: bool) -> Response:
    """201 for a new message; 200 and the replay header for a replayed one."""
    if replayed:
        return Response(body, status=status.HTTP_200_OK, headers={REPLAYED_HEADER: "true"})
    return Response(body, status=status.HTTP_201_CREATED)


class SessionInputApi(APIView):
    class Input(StrictSerializer):
        content = AnyJSONField()
        clientMessageId = CLIENT_MESSAGE_ID

    class Output(serializers.Serializer):
        runId = serializers.CharField(help_text="The run this input started (hex).")
        index = serializers.IntegerField()
        message = shapes.Message()

    @extend_schema(request=Input, parameters=[REPLAYED], responses={201: Output, 200: Output})
    def post(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        data = self.Input.parse(request.data)
        message, replayed = runs.run_start_once(
            session_id=session.id,
            content=data["content"],
            client_message_id=data.get("clientMessageId"),
        )
        body = {"runId": message.input_run, "index": message.index, "message": message.to_wire()}
        return _written(body, replayed)


class SessionMessagesApi(APIView):
    class Input(StrictSerializer):
        role = serializers.ChoiceField(choices=["user", "assistant", "tool"])
        # Checked by the service (its codes name input and unknown kinds); an enum in the schema.
        kind = WritableKindField(max_length=32)
        content = AnyJSONField()
        # Checked by the service (tool_call_id_invalid), so every writer gets one rule.
        toolCallId = serializers.CharField(
            trim_whitespace=False, allow_blank=True, required=False, allow_null=True
        )
        toolName = serializers.CharField(max_length=128, required=False, allow_null=True)
        arguments = AnyJSONField(required=False, allow_null=True)
        isError = serializers.BooleanField(required=False, allow_null=True)
        snapshotId = serializers.CharField(max_length=64, required=False, allow_null=True)
        clientMessageId = CLIENT_MESSAGE_ID

    class Page(serializers.Serializer):
        messages = shapes.Message(many=True)
        nextAfterIndex = serializers.IntegerField(
            allow_null=True, help_text="afterIndex of the next page; null on the last."
        )

    @extend_schema(
        request=Input, parameters=[REPLAYED], responses={201: shapes.Message, 200: shapes.Message}
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        data = self.Input.parse(request.data)
        fields = {
            "role": data["role"],
            "kind": data["kind"],
            "content": data["content"],
            "tool_call_id": data.get("toolCallId"),
            "tool_name": data.get("toolName"),
            "arguments": data.get("arguments"),
            "is_error": data.get("isError"),
            "snapshot_id": data.get("snapshotId"),
        }
        message, replayed = client_writes.write_once(
            session_id=session.id,
            client_message_id=data.get("clientMessageId"),
            request=fields,
            write=lambda: messages.message_write(
                session_id=session.id, message=messages.NewMessage(**fields), host=True
            ),
        )
        return _written(message.to_wire(), replayed)

    @extend_schema(parameters=[WINDOW, AFTER_INDEX, LIMIT], responses={200: Page})
    def get(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        limit = page_limit(request.query_params.get("limit"))
        # -1 reads from the start, as context_history_list's afterIndex does.
        after = query_int(
            request.query_params.get("afterIndex"),
            "afterIndex",
            0,
            minimum=-1,
            maximum=catalog.JSON_INTEGER_MAX,
        )
        found, next_after = lists.message_page(
            session.id,
            window_id=request.query_params.get("window") or None,
            after_index=max(after, 0),
            limit=limit,
        )
        return Response({"messages": [m.to_wire() for m in found], "nextAfterIndex": next_after})


class ProjectionApi(APIView):
    class Input(StrictSerializer):
        runId = serializers.CharField(max_length=64, required=False, allow_null=True)
        provider = serializers.ChoiceField(
            choices=adapters.PROVIDERS,
            default=adapters.WireFormat.NEUTRAL.value,
            help_text="The wire format of the request to build (not the model provider).",
            # DRF's message names no choice; and `openai` / `anthropic` are model providers
            # (model.provider), a mix-up worth naming.
            error_messages={
                "invalid_choice": f'"{{input}}" is not a wire format; use one of '
                f"{', '.join(adapters.PROVIDERS)} (model.provider openai speaks openai-chat, "
                "or openai-responses with model.config.api responses; anthropic speaks "
                "anthropic-messages)."
            },
        )

    @extend_schema(request=Input, responses={201: shapes.Snapshot})
    def post(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        data = self.Input.parse(request.data)
        snapshot = projection.projection_build(
            session_id=session.id, provider=data["provider"], run_id=data.get("runId")
        )
        return Response(projection.snapshot_to_wire(snapshot), status=status.HTTP_201_CREATED)


class SessionToolsApi(APIView):
    class Output(serializers.Serializer):
        protocol = serializers.CharField(help_text="id@version")
        tools = serializers.ListField(
            child=serializers.DictField(), help_text="{name, description, inputSchema}"
        )
        protocolTools = serializers.ListField(child=serializers.CharField())

    @extend_schema(responses={200: Output})
    def get(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        version = session.agent_version
        protocol = agent_selectors.protocol_of(version)
        return Response(
            {
                "protocol": protocol.key,
                "tools": agent_selectors.tools_for(version, protocol),
                "protocolTools": sorted(protocol.tools),
            }
        )


def _page_query(request: Request) -> tuple[str | None, int]:
    """The raw `cursor` (checked by the selector) and the `limit` of a list request."""
    return request.query_params.get("cursor"), page_limit(request.query_params.get("limit"))


def window_to_wire(window: lists.WindowView) -> WindowWire:
    return {
        "windowId": window.window_id,
        "active": window.active,
        "record": window.record,
        "checkpoint": window.checkpoint,
        "coveredThrough": window.covered_through,
    }


def fold_to_wire(view: lists.FoldView) -> FoldWire:
    fold = view.fold
    return {
        "foldId": fold.id,
        "windowId": fold.window_id,
        "firstIndex": fold.first_index,
        "lastIndex": fold.last_index,
        "messageIds": list(fold.message_ids),
        "summary": fold.summary,
        "compressed": view.compressed,
    }


class WindowsApi(APIView):
    class Output(serializers.Serializer):
        windows = shapes.Window(many=True)
        nextCursor = serializers.CharField(allow_null=True)

    @extend_schema(parameters=PAGE, responses={200: Output})
    def get(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        cursor, limit = _page_query(request)
        page = lists.window_page(session, cursor=cursor, limit=limit)
        return Response(
            {"windows": [window_to_wire(w) for w in page.items], "nextCursor": page.next_cursor}
        )


class FoldsApi(APIView):
    class Output(serializers.Serializer):
        folds = shapes.Fold(many=True)
        nextCursor = serializers.CharField(allow_null=True)

    @extend_schema(parameters=PAGE, responses={200: Output})
    def get(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        cursor, limit = _page_query(request)
        page = lists.fold_page(session, cursor=cursor, limit=limit)
        return Response(
            {"folds": [fold_to_wire(f) for f in page.items], "nextCursor": page.next_cursor}
        )


class SnapshotsApi(APIView):
    class Output(serializers.Serializer):
        snapshots = shapes.Snapshot(many=True)
        nextCursor = serializers.CharField(allow_null=True)

    @extend_schema(parameters=PAGE, responses={200: Output})
    def get(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        cursor, limit = _page_query(request)
        page = lists.snapshot_page(session, cursor=cursor, limit=limit)
        return Response(
            {
                "snapshots": [projection.snapshot_to_wire(s) for s in page.items],
                "nextCursor": page.next_cursor,
            }
        )


class SnapshotApi(APIView):
    """One turn's snapshot with its whole view: the list's item plus `body`,
    "stored" (as the turn wrote it) or "rebuilt" (from the state at R and the log through U:
    the body was dropped by retention, or its turn's process died before writing it), and
    for a rebuilt one `bodyHashMatches` (its request hashes to the value recorded at the
    turn; null when the turn recorded none)."""

    class Output(shapes.Snapshot):
        body = serializers.ChoiceField(choices=["stored", "rebuilt"])
        bodyHashMatches = serializers.BooleanField(
            required=False,
            allow_null=True,
            help_text="Only on a rebuilt body: whether its request hashes to the turn's.",
        )
        bodyProblem = serializers.CharField(
            required=False, help_text="Only on a body that could not be rebuilt: why."
        )

    @extend_schema(responses={200: Output})
    def get(self, request: Request, session_id: str, snapshot_id: str) -> Response:
        session = session_for(request, session_id)
        snapshot = lists.snapshot_get(session, snapshot_id)
        return Response(projection.snapshot_to_wire(snapshot, provenance=True))


class KvApi(APIView):
    class Output(serializers.Serializer):
        stateRevision = serializers.IntegerField(
            help_text="The revision of the state listed: the current one, or `revision`."
        )
        entries = shapes.KvEntry(many=True)
        nextCursor = serializers.CharField(allow_null=True)

    @extend_schema(parameters=[*PAGE, PREFIX, REVISION], responses={200: Output})
    def get(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        cursor, limit = _page_query(request)
        prefix = request.query_params.get("prefix")
        revision = query_revision(request.query_params.get("revision"))
        page: pagination.Page[Any]
        if revision is None:
            page = lists.kv_page(session, prefix=prefix, cursor=cursor, limit=limit)
        else:
            history.revision_check(session, revision)
            page = history.kv_page_at(session, revision, prefix=prefix, cursor=cursor, limit=limit)
        return Response(
            {
                "stateRevision": session.state_revision if revision is None else revision,
                "entries": [
                    {"key": e.key, "value": e.value, "revision": e.revision} for e in page.items
                ],
                "nextCursor": page.next_cursor,
            }
        )


class SessionForkApi(APIView):
    """Fork the session at a turn: a new session with the log through the turn's bound and the
    state at its revision. Takes the application key."""

    class Input(StrictSerializer):
        snapshotId = serializers.CharField(
            max_length=64,
            required=False,
            help_text="Fork at this turn: the snapshot's upper bound and revision.",
        )
        throughIndex = serializers.IntegerField(
            required=False,
            min_value=-catalog.JSON_INTEGER_MAX,
            max_value=catalog.JSON_INTEGER_MAX,
            help_text="Fork after this message: the state before the next one was written.",
        )
        agentVersionId = serializers.UUIDField(
            required=False,
            help_text="A published version of the same Agent with a state-compatible protocol.",
        )

        def validate(self, data: dict[str, Any]) -> dict[str, Any]:
            if ("snapshotId" in data) == ("throughIndex" in data):
                raise serializers.ValidationError(
                    {"snapshotId": ["Send exactly one of snapshotId and throughIndex."]}
                )
            return data

    @extend_schema(request=Input, responses={201: shapes.SessionForked})
    def post(self, request: Request, session_id: str) -> Response:
        application = application_of(request, "Session")
        original = lists.session_get(session_id=session_id, application_id=application.id)
        data = self.Input.parse(request.data)
        version = None
        if "agentVersionId" in data:
            version = agent_selectors.agent_version_for_session(
                application=application, version_id=data["agentVersionId"]
            )
        forked, key = fork.session_fork(
            session=original,
            snapshot_id=data.get("snapshotId"),
            through_index=data.get("throughIndex"),
            agent_version=version,
        )
        body: SessionCreatedWire = {**session_to_wire(forked), "sessionKey": key}
        return Response(body, status=status.HTTP_201_CREATED)
