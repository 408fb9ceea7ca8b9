"""What a gateway request's turns yield to the edge, which renders each in the client's wire."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contextproto.protocol.gateway.wire import Reply, Usage


@dataclass(frozen=True)
class TextDelta:
    """Text of the reply as it comes (a streamed reply sends it at once)."""

    text: str


@dataclass(frozen=True)
class ReasoningDone:
    """A complete reasoning item of an answer (a wire that shows them sends it at once)."""

    item: dict[str, Any]


@dataclass(frozen=True)
class KeepAlive:
    """Nothing new yet: the model is still working (a stream sends a keep-alive)."""


@dataclass(frozen=True)
class TurnDone:
    """A model call of the request is written; `usage` sums the request's calls so far."""

    usage: Usage


@dataclass(frozen=True)
class Finished:
    """The request's reply: `body` is exactly what a non-streamed reply sends."""

    reply: Reply
    body: str
    headers: dict[str, str]
    replayed: bool = False


Event = TextDelta | ReasoningDone | KeepAlive | TurnDone | Finished
