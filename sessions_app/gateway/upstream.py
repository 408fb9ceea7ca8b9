"""A gateway request's upstream (contract §14): the version's model, called from the request.

`upstream_for` builds the provider with the request's options (the client's own provider key,
a call without a key for local upstreams, the version's timeout); `model_pieces` makes one
model call awaited or streamed, bounded as a whole by that timeout, with a keep-alive while
nothing arrives; `upstream_error` turns a provider's failure into the gateway's answer, which
names the upstream provider and model, never the key.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from agents.models import AgentVersion
from contextproto.errors import (
    GATEWAY_UPSTREAM_FAILED,
    GATEWAY_UPSTREAM_RATE_LIMITED,
    GATEWAY_UPSTREAM_REJECTED,
    GATEWAY_UPSTREAM_TIMEOUT,
    GATEWAY_UPSTREAM_UNAUTHORIZED,
    PROVIDER_RATE_LIMITED,
    PROVIDER_REQUEST_REJECTED,
    PROVIDER_UNAVAILABLE,
    ApplicationError,
)
from sessions_app import providers
from sessions_app.gateway.checks import RETRY_AFTER_SECONDS
from sessions_app.providers.base import CallOptions, ModelReply, ProviderError, StreamPiece


@dataclass(frozen=True)
class Heartbeat:
    """Nothing arrived from the upstream for a keep-alive interval."""


def upstream_timeout(version: AgentVersion) -> float:
    """Seconds one upstream call may take as a whole: the version's `timeoutSeconds` when it
    is set, else GATEWAY_UPSTREAM_TIMEOUT_SECONDS (contract §14)."""
    config = version.model_config if isinstance(version.model_config, dict) else {}
    own = config.get("timeoutSeconds")
    if isinstance(own, int | float) and not isinstance(own, bool) and own > 0:
        return float(own)
    return float(settings.GATEWAY_UPSTREAM_TIMEOUT_SECONDS)


def upstream_for(version: AgentVersion, upstream_key: str | None) -> providers.ModelProvider:
    """The version's model as a gateway request calls it (raises ProviderError for a config
    that cannot work)."""
    return providers.provider_for(
        version.model_provider,
        version.model_config or {},
        CallOptions(api_key=upstream_key, require_key=False, timeout=upstream_timeout(version)),
    )


async def model_pieces(
    provider: providers.ModelProvider,
    request: dict[str, Any],
    *,
    model: str,
    step: int | None,
    stream: bool,
    timeout: float,
    keepalive: float,
) -> AsyncGenerator[StreamPiece | Heartbeat, None]:
    """One model call: the upstream's own stream (`stream`) or one awaited answer, its pieces
    as they arrive, a `Heartbeat` after every `keepalive` seconds without one, the whole
    `ModelReply` last. Bounded by `timeout` as a whole (then ProviderError, reason timeout).
    Closing this iterator (or cancelling its consumer) closes the upstream call."""
    source = (
        provider.astream(request, model=model, step=step)
        if stream
        else _one(provider.acomplete(request, model=model, step=step))
    )
    deadline = asyncio.get_running_loop().time() + timeout
    pending: asyncio.Future[StreamPiece] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(source))
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise _timed_out(timeout)
            done, _ = await asyncio.wait({pending}, timeout=min(keepalive, left))
            if not done:
                if asyncio.get_running_loop().time() >= deadline:
                    raise _timed_out(timeout)
                yield Heartbeat()
                continue
            try:
                piece = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield piece
            if isinstance(piece, ModelReply):
                return
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        await source.aclose()


async def _one(answer: Any) -> AsyncGenerator[StreamPiece, None]:
    yield await answer


def _timed_out(timeout: float) -> ProviderError:
    return ProviderError(
        PROVIDER_UNAVAILABLE,
        f"no answer within {timeout:g} s",
        details={"reason": "timeout", "timeoutSeconds": timeout},
    )


def _scrub(value: Any, secret: str | None) -> Any:
    """`value` with every occurrence of `secret` (the client's upstream key) removed."""
    if not secret:
        return value
    if isinstance(value, str):
        return value.replace(secret, "[redacted]")
    if isinstance(value, dict):
        return {k: _scrub(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, secret) for v in value]
    return value


def upstream_error(
    exc: ProviderError, version: AgentVersion, secret: str | None
) -> ApplicationError:
    """A provider failure as the gateway answers it (contract §14), naming the upstream provider
    and model, never the key: 401 a refused key, 429 a rate limit, 504 no answer in time,
    400 another refusal of the request, 502 anything else (a body that is not the provider's
    format included)."""
    details: Mapping[str, Any] = exc.details or {}
    upstream = f"the upstream model ({version.model_provider} {version.model_name})"
    said = _scrub(exc.message, secret)
    status = details.get("status")
    retry_after = details.get("retryAfterSeconds") or RETRY_AFTER_SECONDS
    base = {
        "provider": version.model_provider,
        "model": version.model_name,
        "providerCode": exc.code,
    }
    provider_message = _scrub(details.get("providerMessage"), secret)
    if provider_message:
        base["providerMessage"] = provider_message
    if exc.code == PROVIDER_RATE_LIMITED:
        return ApplicationError(
            GATEWAY_UPSTREAM_RATE_LIMITED,
            f"{upstream} rate-limited the call: {said}",
            {**base, "retryAfterSeconds": retry_after},
        )
    if exc.code == PROVIDER_UNAVAILABLE and details.get("reason") == "timeout":
        return ApplicationError(
            GATEWAY_UPSTREAM_TIMEOUT,
            f"{upstream} did not answer within {upstream_timeout(version):g} s.",
            {**base, "retryAfterSeconds": retry_after},
        )
    if exc.code == PROVIDER_REQUEST_REJECTED and status in (401, 403):
        return ApplicationError(
            GATEWAY_UPSTREAM_UNAUTHORIZED,
            f"{upstream} refused the key (HTTP {status}): send the provider's key in "
            "X-Contextproto-Upstream-Key, or set the version's model config apiKeyEnv.",
            {**base, "status": status},
        )
    if exc.code == PROVIDER_REQUEST_REJECTED:
        return ApplicationError(
            GATEWAY_UPSTREAM_REJECTED,
            f"{upstream} refused the request: {said}",
            {**base, "status": status},
        )
    return ApplicationError(
        GATEWAY_UPSTREAM_FAILED,
        f"{upstream} failed: {said}",
        {**base, "retryAfterSeconds": retry_after},
    )
