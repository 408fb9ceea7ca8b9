from django.urls import path

from agents import apis, apis_gateway, apis_keys, apis_tools

urlpatterns = [
    path("protocols/", apis.ProtocolListApi.as_view(), name="protocol-list"),
    path(
        "protocols/<str:protocol_id>/<str:version>/",
        apis.ProtocolDetailApi.as_view(),
        name="protocol-detail",
    ),
    path(
        "protocols/<str:protocol_id>/<str:version>/validate/",
        apis.ProtocolValidateApi.as_view(),
        name="protocol-validate",
    ),
    path("api-keys/", apis_keys.ApiKeysApi.as_view(), name="api-keys"),
    path(
        "api-keys/<str:key_id>/revoke/", apis_keys.ApiKeyRevokeApi.as_view(), name="api-key-revoke"
    ),
    path("tools/", apis_tools.ToolsApi.as_view(), name="tools"),
    path("tools/<str:tool_id>/", apis_tools.ToolDetailApi.as_view(), name="tool-detail"),
    path("gateway-settings/", apis_gateway.GatewaySettingsApi.as_view(), name="gateway-settings"),
    path("agents/", apis.AgentCreateApi.as_view(), name="agent-create"),
    path(
        "agents/<str:agent_id>/versions/",
        apis.AgentVersionCreateApi.as_view(),
        name="agent-version-create",
    ),
    path(
        "agent-versions/<str:version_id>/",
        apis.AgentVersionDetailApi.as_view(),
        name="agent-version-detail",
    ),
    path(
        "agent-versions/<str:version_id>/publish/",
        apis.AgentVersionPublishApi.as_view(),
        name="agent-version-publish",
    ),
    path(
        "agent-versions/<str:version_id>/duplicate/",
        apis.AgentVersionDuplicateApi.as_view(),
        name="agent-version-duplicate",
    ),
    path(
        "agent-versions/<str:version_id>/archive/",
        apis.AgentVersionArchiveApi.as_view(),
        name="agent-version-archive",
    ),
]
