"""Every code the gateway's pure modules answer with is registered with its status."""

from __future__ import annotations

from contextproto.errors import ERRORS
from contextproto.protocol import errors as engine
from contextproto.protocol.gateway import wire


def test_gateway_codes_registered():
    assert {wire.INVALID_REQUEST, wire.PARAMETER_UNSUPPORTED} <= set(ERRORS)
    assert ERRORS[engine.GATEWAY_TRANSCRIPT_MISMATCH].status == 409
    assert ERRORS[engine.TOOL_CALL_PENDING].status == 409
    assert ERRORS[engine.GATEWAY_NOTHING_NEW].status == 400
    assert ERRORS["max_turns_reached"].status == 422
    statuses = {
        "gateway_upstream_unauthorized": 401,
        "gateway_upstream_rate_limited": 429,
        "gateway_upstream_failed": 502,
        "gateway_upstream_timeout": 504,
        "gateway_model_not_found": 404,
        "gateway_model_not_runnable": 400,
        "gateway_system_not_accepted": 400,
        "idempotency_key_reused": 409,
    }
    assert {code: ERRORS[code].status for code in statuses} == statuses
