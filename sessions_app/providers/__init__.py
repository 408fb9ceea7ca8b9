"""Model providers the built-in runtime drives (SPEC §8): scripted, OpenAI, Anthropic.

`provider_for(provider, config)` builds one from an AgentVersion's model settings; the
SDK-backed modules are imported only when such a provider is asked for.
"""

from __future__ import annotations

from sessions_app.providers.base import (
    ModelProvider,
    ModelReply,
    ProviderError,
    ToolCallRequest,
    provider_for,
)

__all__ = ["ModelProvider", "ModelReply", "ProviderError", "ToolCallRequest", "provider_for"]
