"""Host tools whose schemas a framework generated (contract §12, §11): pydantic models in, checked
arguments out.

The schemas here are not written by hand: `BaseModel.model_json_schema()` makes them, with the
`anyOf` of `Optional[...]`, `$defs` and `$ref` for nested models, `format` for datetime and
URLs, `enum`/`const` for `Literal`, and defaults. They are registered over HTTP as a host would,
read back, and applied to arguments by the engine and by the built-in runtime, whose refusal
names the path of the offending value inside a `$ref`'d model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Literal

import pytest
from pydantic import AnyUrl, BaseModel, ConfigDict, Field, ValidationError

from contextproto.celery import app as celery_app
from contextproto.protocol.host_tools import SchemaProblem, arguments_problem
from tests.conftest import KeyClient


class Address(BaseModel):
    model_config = ConfigDict(extra="forbid")  # additionalProperties: false

    street: str
    city: str
    zip: str = Field(pattern=r"^[0-9]{5}$")


class LineItem(BaseModel):
    sku: str = Field(min_length=1)
    quantity: int = Field(ge=1, le=100)


class Order(BaseModel):
    """Place an order for a customer."""

    customer: str
    email: str | None = None
    shipping: Address
    billing: Address | None = None
    items: list[LineItem] = Field(min_length=1)
    deliver_after: datetime
    tracking_url: AnyUrl | None = None
    priority: Literal["low", "normal", "high"] = "normal"
    kind: Literal["order"] = "order"
    gift: bool = False


ORDER_SCHEMA = Order.model_json_schema()
GOOD = {
    "customer": "Ann",
    "shipping": {"street": "1 Main St", "city": "Springfield", "zip": "12345"},
    "items": [{"sku": "A-1", "quantity": 2}],
    "deliver_after": "2026-05-04T09:30:00Z",
}
GOOD_TOO = {
    **GOOD,
    "email": None,
    "billing": {"street": "2 Side St", "city": "Springfield", "zip": "54321"},
    "items": [{"sku": "A-1", "quantity": 2}, {"sku": "B-2", "quantity": 100}],
    "deliver_after": "2026-05-04T09:30:00.5+02:00",
    "tracking_url": "https://track.example.com/o/17?x=1",
    "priority": "high",
    "kind": "order",
    "gift": True,
}
BAD = [
    # A field missing inside a $ref'd model is named by its path.
    ({**GOOD, "shipping": {"street": "1 Main St", "city": "Springfield"}}, "$.shipping.zip"),
    ({**GOOD, "billing": {"street": "x", "city": "y"}}, "$.billing.zip"),
    ({**GOOD, "shipping": {**GOOD["shipping"], "zip": "1"}}, "$.shipping.zip"),
    ({**GOOD, "shipping": {**GOOD["shipping"], "floor": 3}}, "$.shipping.floor"),
    ({**GOOD, "items": [*GOOD["items"], {"sku": "B-2"}]}, "$.items[1].quantity"),
    ({**GOOD, "items": [{"sku": "A-1", "quantity": 0}]}, "$.items[0].quantity"),
    ({**GOOD, "items": []}, "$.items"),
    ({**GOOD, "email": 5}, "$.email"),
    ({**GOOD, "billing": "same as shipping"}, "$.billing"),
    ({**GOOD, "deliver_after": "next Tuesday"}, "$.deliver_after"),
    ({**GOOD, "tracking_url": "not a url"}, "$.tracking_url"),
    ({**GOOD, "priority": "urgent"}, "$.priority"),
    ({**GOOD, "kind": "refund"}, "$.kind"),
    ({k: v for k, v in GOOD.items() if k != "customer"}, "$.customer"),
]


def test_the_generated_schema_has_what_frameworks_produce():
    """The test below exercises the constructs the old subset refused."""
    properties = ORDER_SCHEMA["properties"]
    assert properties["email"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert properties["shipping"] == {"$ref": "#/$defs/Address"}
    assert {"$ref": "#/$defs/Address"} in properties["billing"]["anyOf"]
    assert properties["items"]["items"] == {"$ref": "#/$defs/LineItem"}
    assert set(ORDER_SCHEMA["$defs"]) == {"Address", "LineItem"}
    assert properties["deliver_after"]["format"] == "date-time"
    assert properties["tracking_url"]["anyOf"][0]["format"] == "uri"
    assert properties["priority"]["enum"] == ["low", "normal", "high"]
    assert properties["kind"]["const"] == "order"
    assert properties["priority"]["default"] == "normal"
    assert ORDER_SCHEMA["$defs"]["Address"]["additionalProperties"] is False


def _register(app: KeyClient, name: str, model: type[BaseModel]) -> dict:
    body = {
        "name": name,
        "description": model.__doc__ or name,
        "inputSchema": model.model_json_schema(),
    }
    response = app.post("tools/", body)
    assert response.status_code == 201, response.content
    return response.json()


def test_pydantic_schemas_register_over_http_and_check_arguments_as_read_back(tenant):
    _, app = tenant("Shop")
    tool = _register(app, "create_order", Order)
    assert tool["inputSchema"] == ORDER_SCHEMA
    stored = app.get(f"tools/{tool['id']}/").json()["inputSchema"]
    for arguments in (GOOD, GOOD_TOO):
        assert arguments_problem(stored, arguments) is None
        Order.model_validate(arguments)  # pydantic agrees: these are valid orders
    for arguments, path in BAD:
        problem = arguments_problem(stored, arguments)
        assert problem is not None and problem.path == path, (arguments, problem)
        assert problem.message.endswith("."), problem
        with pytest.raises(ValidationError):  # and pydantic refuses them too
            Order.model_validate(arguments)
    assert arguments_problem(stored, BAD[0][0]) == SchemaProblem("$.shipping.zip", "is required.")


class Node(BaseModel):
    label: str
    children: list[Node] = []


class Tree(BaseModel):
    root: Node


def test_a_recursive_model_registers_and_its_arguments_are_checked_at_depth(tenant):
    _, app = tenant("Trees")
    stored = _register(app, "plant_tree", Tree)["inputSchema"]
    deep = {"root": {"label": "a", "children": [{"label": "b", "children": [{"children": []}]}]}}
    assert arguments_problem(stored, deep) == SchemaProblem(
        "$.root.children[0].children[0].label", "is required."
    )


STEPS = [
    {
        "comment": "The generated schema reached the model's request, $defs and all.",
        "expect": {"contains": ["create_order", '"$ref": "#/$defs/Address"', "date-time"]},
        "toolCalls": [{"id": "o1", "name": "create_order", "arguments": BAD[0][0]}],
    },
    {
        "comment": "Refused inside the $ref'd Address; the next try misses an item's quantity.",
        "expect": {"contains": ["invalid_arguments", "$.shipping.zip", "is required"]},
        "toolCalls": [{"id": "o2", "name": "create_order", "arguments": BAD[4][0]}],
    },
    {
        "comment": "Refused in the list of nested models; the model sends a valid order.",
        "expect": {"contains": ["invalid_arguments", "$.items[1].quantity"]},
        "toolCalls": [{"id": "o3", "name": "create_order", "arguments": GOOD_TOO}],
    },
    {"expect": {"contains": ["order 17 placed"]}, "text": "Your order is placed (number 17)."},
]


def _at_once(predicate: Callable[[], object], what: str) -> object:
    value = predicate()
    assert value, f"expected {what} right after the request"
    return value


@pytest.mark.django_db(transaction=True)
def test_the_built_in_runtime_refuses_bad_arguments_by_path_and_passes_good_ones(tenant, settings):
    settings.RUNTIME_AUTOSTART = True
    _, app = tenant("Shop runtime")
    tool = _register(app, "create_order", Order)
    agent = app.post("agents/", {"name": "shop"}).json()
    version = app.post(
        f"agents/{agent['id']}/versions/",
        {
            "systemPrompt": "You place orders.\n{{context_protocol}}",
            "contextProtocolId": "unified",
            "contextProtocolVersion": 2,
            "model": {
                "provider": "scripted",
                "name": "script",
                "maxInputTokens": 16000,
                "config": {"steps": STEPS},
            },
            "tools": [tool["id"]],
        },
    )
    assert version.status_code == 201, version.content
    version = version.json()
    assert app.post(f"agent-versions/{version['id']}/publish/").status_code == 200
    session = app.post("sessions/", {"agentVersionId": version["id"]}).json()
    host = KeyClient(session["sessionKey"])
    path = f"sessions/{session['id']}/"

    def log() -> list[dict]:
        return host.get(path + "messages/", limit=200).json()["messages"]

    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True  # turns run in this process, as in the sibling
    try:
        assert host.post(path + "inputs/", {"content": "Order two A-1."}).status_code == 201
        call = _at_once(
            lambda: log()[-1] if log()[-1].get("toolCallId") == "o3" else None,
            "the run to wait for the host's create_order result",
        )
        assert (call["kind"], call["arguments"]) == ("tool_call", GOOD_TOO)
        refusals = {
            m["toolCallId"]: json.loads(m["content"])["error"]
            for m in log()
            if m["kind"] == "tool_result"
        }
        assert set(refusals) == {"o1", "o2"}
        assert {k: (e["code"], e["path"], e["correctable"]) for k, e in refusals.items()} == {
            "o1": ("invalid_arguments", "$.shipping.zip", True),
            "o2": ("invalid_arguments", "$.items[1].quantity", True),
        }
        assert "the arguments at $.shipping.zip is required." in refusals["o1"]["message"]
        written = host.post(
            path + "messages/",
            {
                "role": "tool",
                "kind": "tool_result",
                "content": "order 17 placed",
                "toolCallId": "o3",
            },
        )
        assert written.status_code == 201, written.content
        answer = _at_once(lambda: log()[-1] if log()[-1]["kind"] == "text" else None, "the answer")
        assert answer["content"] == "Your order is placed (number 17)."
    finally:
        celery_app.conf.task_always_eager = eager
