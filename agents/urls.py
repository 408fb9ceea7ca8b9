from django.urls import path

from agents import apis

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
]
