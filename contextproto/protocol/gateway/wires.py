"""The client APIs the gateway speaks, by format (contract §14, §21): one `ClientWire` each.

A new client API is one wire module and one entry here; nothing else branches on the format.
"""

from __future__ import annotations

from collections.abc import Mapping

from contextproto.protocol.gateway.anthropic_wire import MessagesWire
from contextproto.protocol.gateway.openai_wire import ChatCompletionsWire
from contextproto.protocol.gateway.responses_wire import ResponsesWire
from contextproto.protocol.gateway.wire import ClientFormat, ClientWire

WIRES: Mapping[ClientFormat, ClientWire] = {
    ClientFormat.OPENAI: ChatCompletionsWire(),
    ClientFormat.ANTHROPIC: MessagesWire(),
    ClientFormat.RESPONSES: ResponsesWire(),
}


def wire_for(client_format: ClientFormat | str) -> ClientWire:
    """The wire of `client_format` (a stored record's format included)."""
    return WIRES[ClientFormat(client_format)]
