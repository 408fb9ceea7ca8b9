"""Routes of the gateway (contract §14, §21): base URLs `…/gateway/openai/v1` and
`…/gateway/anthropic` (with or without its `/v1`)."""

from django.urls import path, re_path

from sessions_app.gateway import views

urlpatterns = [
    path("openai/v1/chat/completions", views.openai_chat_completions, name="gateway-openai-chat"),
    path("openai/v1/models", views.openai_models, name="gateway-openai-models"),
    path("openai/v1/responses", views.openai_responses, name="gateway-openai-responses"),
    path("anthropic/v1/messages", views.anthropic_messages, name="gateway-anthropic-messages"),
    path("anthropic/v1/models", views.anthropic_models, name="gateway-anthropic-models"),
    re_path(r"^(?P<rest>.*)$", views.not_found, name="gateway-not-found"),
]
