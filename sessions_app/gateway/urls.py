"""Routes of the gateway (contract §14, §21): base URLs `…/gateway/openai/v1` and
`…/gateway/anthropic` (clients differ in whether the Anthropic base URL holds its `/v1`: both
are served)."""

from django.urls import path, re_path

from sessions_app.gateway import lookups, views

urlpatterns = [
    path("openai/v1/chat/completions", views.openai_chat_completions, name="gateway-openai-chat"),
    path("openai/v1/models", views.openai_models, name="gateway-openai-models"),
    path("openai/v1/responses", views.openai_responses, name="gateway-openai-responses"),
    path(
        "openai/v1/responses/input_tokens",
        lookups.responses_input_tokens,
        name="gateway-responses-input-tokens",
    ),
    path("openai/v1/responses/compact", views.responses_compact, name="gateway-responses-compact"),
    path(
        "openai/v1/responses/<str:response_id>",
        lookups.response_detail,
        name="gateway-response",
    ),
    path(
        "openai/v1/responses/<str:response_id>/input_items",
        lookups.response_input_items,
        name="gateway-response-input-items",
    ),
]
for prefix in ("anthropic/v1/", "anthropic/"):
    urlpatterns += [
        path(f"{prefix}messages", views.anthropic_messages),
        path(f"{prefix}messages/count_tokens", lookups.anthropic_count_tokens),
        path(f"{prefix}models", views.anthropic_models),
    ]
# Claude Code's connectivity probe (HEAD, once per run, before its first request).
urlpatterns.append(path("anthropic/api/hello", views.anthropic_hello, name="gateway-hello"))
urlpatterns.append(re_path(r"^(?P<rest>.*)$", views.not_found, name="gateway-not-found"))
