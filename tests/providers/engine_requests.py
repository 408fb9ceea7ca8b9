"""Provider requests built by the real engine: log -> projection -> adapter body."""

from __future__ import annotations

from typing import Any

from contextproto.protocol import adapters, catalog
from contextproto.protocol.projection import Projection, project
from tests.protocol.logbuilder import LogBuilder, make_input

THINKING = {
    "type": "thinking",
    "thinking": "The customer record has the budget.",
    "signature": "c2lnLTE=",
}


def unified_tools(version: int = 2) -> list[dict[str, Any]]:
    return list(catalog.get_version("unified", version).tools.values())


def history_projection(version: int = 2, **input_kwargs: Any) -> Projection:
    """A unified@N view of a run whose history holds a finished host tool call."""
    log = LogBuilder(window="main")
    log.input("Prepare a quote for ACME in Zürich")
    # The answer as an Anthropic model gives it: thinking, text beside the call, the call.
    call = log.call(
        "lookup_customer",
        {"name": "ACME", "city": "Zürich"},
        call_id="call_lookup1",
        content=[THINKING, {"type": "text", "text": "First I look the customer up."}],
    )
    log.result(call, '{"customer": "ACME", "budget": 12000}', name="lookup_customer")
    log.text("The budget is 12000.")
    failed = log.call("price_list", {"region": "CH"}, call_id="call_prices1")
    log.result(failed, "price service unavailable", is_error=True, name="price_list")
    return project(make_input(log, window="main", version=version, **input_kwargs))


def adapted(provider: str, version: int = 2, **input_kwargs: Any) -> adapters.AdaptedRequest:
    return adapters.adapt(
        history_projection(version, **input_kwargs), provider, unified_tools(version)
    )
