from django.urls import path

from sessions_app.api import conversations as apis_conversations
from sessions_app.api import keys as apis_keys
from sessions_app.api import maintenance as apis_maintenance
from sessions_app.api import tool_calls as apis_tool_calls
from sessions_app.api import turns as apis_turns
from sessions_app.api import usage as apis_usage
from sessions_app.api import views as apis

S = "sessions/<str:session_id>/"

urlpatterns = [
    path("sessions/", apis.SessionCreateApi.as_view(), name="session-create"),
    # A client's conversation id is its own string, `/` included (as a tool call id).
    path(
        "gateway-conversations/<path:conversation_id>/",
        apis_conversations.GatewayConversationApi.as_view(),
        name="gateway-conversation",
    ),
    path(S, apis.SessionDetailApi.as_view(), name="session-detail"),
    path(S + "inputs/", apis.SessionInputApi.as_view(), name="session-inputs"),
    path(S + "messages/", apis.SessionMessagesApi.as_view(), name="session-messages"),
    path(S + "projection/", apis.ProjectionApi.as_view(), name="session-projection"),
    path(S + "tools/", apis.SessionToolsApi.as_view(), name="session-tools"),
    path(S + "turns/", apis_turns.TurnApi.as_view(), name="session-turns"),
    path(
        S + "session-key/rotate/",
        apis_keys.SessionKeyRotateApi.as_view(),
        name="session-key-rotate",
    ),
    path(
        S + "session-key/revoke/",
        apis_keys.SessionKeyRevokeApi.as_view(),
        name="session-key-revoke",
    ),
    # A tool call id is whatever the provider made, `/` included (contract §5.2): servers decode
    # `%2F` before routing, so the id is everything between `tool-calls/` and the action.
    # The body forms come first: `tool-calls/dispatch/` is not the path form of an id.
    path(
        S + "tool-calls/dispatch/",
        apis_tool_calls.ToolDispatchByBodyApi.as_view(),
        name="session-dispatch-by-body",
    ),
    path(
        S + "tool-calls/abandon/",
        apis_tool_calls.ToolAbandonByBodyApi.as_view(),
        name="session-abandon-by-body",
    ),
    path(
        S + "tool-calls/<path:tool_call_id>/dispatch/",
        apis_tool_calls.ToolDispatchApi.as_view(),
        name="session-dispatch",
    ),
    path(
        S + "tool-calls/<path:tool_call_id>/abandon/",
        apis_tool_calls.ToolAbandonApi.as_view(),
        name="session-abandon",
    ),
    path(S + "windows/", apis.WindowsApi.as_view(), name="session-windows"),
    path(S + "folds/", apis.FoldsApi.as_view(), name="session-folds"),
    path(S + "snapshots/", apis.SnapshotsApi.as_view(), name="session-snapshots"),
    path(
        S + "snapshots/<str:snapshot_id>/",
        apis.SnapshotApi.as_view(),
        name="session-snapshot",
    ),
    path(
        S + "snapshots/<str:snapshot_id>/usage/",
        apis_usage.SnapshotUsageApi.as_view(),
        name="session-snapshot-usage",
    ),
    path(S + "kv/", apis.KvApi.as_view(), name="session-kv"),
    path(S + "fork/", apis.SessionForkApi.as_view(), name="session-fork"),
    path(
        S + "maintenance/",
        apis_maintenance.MaintenanceJobsApi.as_view(),
        name="session-maintenance-jobs",
    ),
    path(
        S + "windows/<str:window_id>/maintenance/",
        apis_maintenance.MaintenanceRequestApi.as_view(),
        name="maintenance-request",
    ),
    path(
        S + "windows/<str:window_id>/maintenance/plan/",
        apis_maintenance.MaintenancePlanApi.as_view(),
        name="maintenance-plan",
    ),
    path(
        S + "windows/<str:window_id>/maintenance/<str:job_id>/pages/<int:page>/",
        apis_maintenance.MaintenancePageApi.as_view(),
        name="maintenance-page",
    ),
    path(
        S + "windows/<str:window_id>/maintenance/<str:job_id>/commit/",
        apis_maintenance.MaintenanceCommitApi.as_view(),
        name="maintenance-commit",
    ),
]
