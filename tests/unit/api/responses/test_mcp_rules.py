"""The mcp tools' pure rules: who approves, how MCP items come back in input, what the Response echoes."""

from __future__ import annotations

import pytest
from marshmallow import ValidationError

from app.api.http.errors import InvalidRequestError
from app.api.prompting.items import normalized_input, with_id
from app.api.responses.conversion import messages
from app.api.responses.mcp_tools import allowing, answered, needs_approval
from app.api.responses.objects import ResponseHeader
from app.api.responses.request import ResponseRequest

ADD = {"name": "add", "annotations": {"readOnlyHint": True}}  # as the test MCP server lists them
FAIL = {"name": "fail", "annotations": None}


@pytest.mark.parametrize(
    ("policy", "tool", "needed"),
    [
        ("always", ADD, True),
        ("never", ADD, False),
        ({"never": {"tool_names": ["add"]}}, ADD, False),
        ({"never": {"tool_names": ["add"]}}, FAIL, True),
        ({"always": {"tool_names": ["fail"]}}, ADD, True),  # not matched under never: asked
        ({"never": {"read_only": True}}, ADD, False),
        ({"never": {"read_only": True}}, FAIL, True),
        ({"never": {"read_only": True, "tool_names": ["fail"]}}, ADD, True),  # both must hold
        ({"never": {}}, ADD, True),  # a filter that says nothing matches nothing
    ],
)
def test_approval_is_needed_unless_never_matches(policy: str | dict, tool: dict, needed: bool) -> None:
    assert needs_approval(policy, tool) is needed


@pytest.mark.parametrize(
    ("allowed", "on", "off"),
    [
        (None, [ADD, FAIL], []),
        (["fail"], [FAIL], [ADD]),
        ({"tool_names": ["add"]}, [ADD], [FAIL]),
        ({"read_only": True}, [ADD], [FAIL]),
        ({"read_only": False}, [FAIL], [ADD]),
    ],
)
def test_allowed_tools_by_name_or_filter(allowed: list | dict | None, on: list, off: list) -> None:
    allows = allowing(allowed)
    assert all(allows(tool) for tool in on) and not any(allows(tool) for tool in off)


def test_mcp_items_come_back_through_input_and_keep_what_matters() -> None:
    items = normalized_input(
        [
            {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "calc", "tools": [{"name": "add"}]},
            {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "calc", "name": "add",
             "arguments": "{}"},
            {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
            {"type": "mcp_call", "id": "mcp_1", "server_label": "calc", "name": "add", "arguments": "{}",
             "output": "5", "error": None, "status": "completed"},
        ]
    )  # fmt: skip
    assert items[1]["id"] == "mcpr_1"  # the approval response names it
    assert "id" not in items[3] and items[3]["output"] == "5"
    assert with_id(items[3])["status"] == "completed" and with_id(items[3])["id"].startswith("mcp_")
    # To the model, only the call is a turn: a call and its result.
    turns = messages(ResponseRequest(input=tuple(items)))
    assert [t["role"] for t in turns] == ["assistant", "tool"]
    assert turns[0]["tool_calls"][0]["function"]["name"] == "add" and turns[1]["content"] == "5"


def test_a_broken_mcp_item_is_refused() -> None:
    with pytest.raises(ValidationError, match="approve"):
        normalized_input(
            [{"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": "yes"}]
        )


def test_the_response_never_echoes_an_mcp_tools_headers() -> None:
    tool = {"type": "mcp", "server_label": "calc", "server_url": "http://h/mcp", "headers": {"A": "secret"}}
    echoed = ResponseHeader(ResponseRequest(input=(), tools=(tool,)), "m").render("completed")["tools"][0]
    assert echoed["headers"] is None and echoed["require_approval"] == "always"


def test_an_answer_already_acted_on_is_not_acted_on_again() -> None:
    asked = {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "calc",
        "name": "add",
        "arguments": "{}",
    }
    other = {**asked, "id": "mcpr_2"}
    made = {"type": "mcp_call", "server_label": "calc", "name": "add", "approval_request_id": "mcpr_1"}
    yes = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    no = {"type": "mcp_approval_response", "approval_request_id": "mcpr_2", "approve": False}
    assert answered([asked, other], [yes, no], {"calc"}) == [(asked, True), (other, False)]
    assert answered([asked, other, made], [yes, no], {"calc"}) == [(other, False)]  # the call answers mcpr_1
    with pytest.raises(InvalidRequestError, match="mcpr_9"):
        answered([asked], [{**yes, "approval_request_id": "mcpr_9"}], {"calc"})
    with pytest.raises(InvalidRequestError, match="not among this request's mcp tools"):
        answered([asked], [yes], {"other"})  # a 400, not the KeyError it was
    assert answered([asked, made], [yes], {"other"}) == []  # acted on already: nothing to call
