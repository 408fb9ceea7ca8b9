"""The sessions app's models, one module per concern (docs/architecture.md: store)."""

from sessions_app.models.archive import ArchiveChunk
from sessions_app.models.gateway import GatewayCallId, GatewayConversation, GatewayExchange
from sessions_app.models.log import ImmutableMessageError, Message, MessageQuerySet
from sessions_app.models.maintenance import MaintenanceJob
from sessions_app.models.receipts import ClientWrite, HostTurn, ToolReceipt
from sessions_app.models.sessions import Run, Session
from sessions_app.models.snapshots import CompressedJSONField, ProjectionSnapshot
from sessions_app.models.state import FoldRecord, KVEntry, KVHistory, WindowRecord

__all__ = [
    "ArchiveChunk",
    "ClientWrite",
    "CompressedJSONField",
    "FoldRecord",
    "GatewayCallId",
    "GatewayConversation",
    "GatewayExchange",
    "HostTurn",
    "ImmutableMessageError",
    "KVEntry",
    "KVHistory",
    "MaintenanceJob",
    "Message",
    "MessageQuerySet",
    "ProjectionSnapshot",
    "Run",
    "Session",
    "ToolReceipt",
    "WindowRecord",
]
