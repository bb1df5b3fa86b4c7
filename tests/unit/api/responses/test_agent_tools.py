"""What Codex sends the Responses API: namespaced, custom and hosted tools, sealed reasoning, compaction."""

from __future__ import annotations

import json
from typing import Any

from flask import Flask

from app.api.generation.loop import ChoiceResult
from app.api.http import sealing
from app.api.prompting.items import normalized_input, with_id
from app.api.responses import conversion
from app.api.responses.objects import ResponseHeader
from app.api.responses.presenter import ResponsesPresenter
from app.api.responses.request import ResponseRequest
from app.api.responses.schemas import response_request_schema
from app.api.responses.tool_kinds import custom_input, kinds_of, partial_input
from app.engine.types import Chunk
from tests.support import sse
from tests.support.formats import reader

PATCH = 'start: "*** Begin Patch" LF line+ "*** End Patch"\nline: /[^\\n]*/ LF\n%import common.LF\n'
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object"}, "strict": False},
    {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents", "tools": [
        {"type": "function", "name": "close_agent", "parameters": {"type": "object"}}]},
    {"type": "custom", "name": "apply_patch", "description": "Edit files",
     "format": {"type": "grammar", "syntax": "lark", "definition": PATCH}},
    {"type": "web_search", "external_web_access": False},
]  # fmt: skip


def load(**fields: Any) -> ResponseRequest:
    loaded: ResponseRequest = response_request_schema.load({"model": "m", "input": "hi", **fields})
    return loaded


def test_codex_tools_become_functions_by_the_names_the_model_calls() -> None:
    codex = {"include": ["reasoning.encrypted_content"], "reasoning": {"summary": "auto"}, "store": False,
             "prompt_cache_key": "k", "client_metadata": {"a": "b"}, "parallel_tool_calls": True}  # fmt: skip
    body = load(tools=TOOLS, tool_choice="auto", **codex)
    kinds = kinds_of(body.tools)
    assert [t["function"]["name"] for t in kinds.functions] == ["exec_command", "multi_agent_v1.close_agent",
                                                               "apply_patch"]  # fmt: skip
    assert kinds.skipped == ["web_search"]
    assert kinds.of("multi_agent_v1.close_agent").namespace == "multi_agent_v1"
    custom = kinds.functions[2]
    assert custom["input_format"] == ("lark", PATCH)
    assert custom["function"]["parameters"]["required"] == ["input"]
    chat = conversion.as_chat(load(tools=TOOLS, tool_choice={"type": "custom", "name": "apply_patch"}))
    assert chat.tool_choice == {"name": "apply_patch"} and chat.tools_forced
    named = load(
        tools=TOOLS, tool_choice={"type": "function", "name": "close_agent", "namespace": "multi_agent_v1"}
    )
    assert conversion.as_chat(named).tool_choice == {"name": "multi_agent_v1.close_agent"}


def test_earlier_custom_and_namespaced_calls_reach_the_model_as_calls() -> None:
    items = normalized_input([
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be Codex."}]},
        {"type": "message", "role": "user", "content": "patch it"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch\n"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "done"},
        {"type": "function_call", "call_id": "c2", "name": "close_agent", "namespace": "multi_agent_v1",
         "arguments": "{not json"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "ok"}]},
        {"type": "web_search_call", "id": "ws1", "status": "completed"},
    ])  # fmt: skip
    messages = conversion.messages(ResponseRequest(input=tuple(items)))
    calls = [m["tool_calls"][0]["function"] for m in messages if m.get("tool_calls")]
    assert calls[0] == {"name": "apply_patch", "arguments": json.dumps({"input": "*** Begin Patch\n"})}
    assert calls[1] == {"name": "multi_agent_v1.close_agent", "arguments": "{not json"}  # passed on as sent
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["done", "ok"]
    assert (
        with_id(items[2])["id"].startswith("ctc_") and with_id(items[3])["type"] == "custom_tool_call_output"
    )


def test_a_custom_calls_input_is_read_whole_and_as_it_streams() -> None:
    arguments = json.dumps({"input": 'line "one"\nline two\\'})
    assert custom_input(arguments) == 'line "one"\nline two\\'
    whole, seen = custom_input(arguments), [partial_input(arguments[:n]) for n in range(len(arguments) + 1)]
    assert all(whole.startswith(part) for part in seen) and seen[-1] == whole
    assert all(len(a) <= len(b) for a, b in zip(seen, seen[1:], strict=False))  # only ever grows
    assert 'line "one"' in seen and 'line "one"\n' in seen  # escapes decoded once complete
    assert custom_input('{"input": "cut sh') == "cut sh"


def _presenter(tools: list[dict[str, Any]], sealed: Any = None) -> ResponsesPresenter:
    body = load(tools=tools)
    kinds = kinds_of(body.tools)
    header = ResponseHeader(body, "test-model")
    thinks = sealed is not None  # a reasoning model's answer, <think> first
    return ResponsesPresenter(header, 7, reader(kinds.functions, thinking=thinks), kinds=kinds, sealed=sealed)


def test_calls_are_answered_in_the_kind_the_client_declared() -> None:
    calls = '{"name": "multi_agent_v1.close_agent", "arguments": {"id": "a1"}}'
    response = _presenter(TOOLS).build([ChoiceResult(0, calls, "stop", 9)])
    (item,) = response["output"]
    assert (item["type"], item["name"], item["namespace"]) == (
        "function_call",
        "close_agent",
        "multi_agent_v1",
    )
    patch = '{"name": "apply_patch", "arguments": {"input": "*** Begin Patch\\n*** End Patch"}}'
    (custom,) = _presenter(TOOLS).build([ChoiceResult(0, patch, "stop", 9)])["output"]
    assert custom["type"] == "custom_tool_call" and custom["input"] == "*** Begin Patch\n*** End Patch"
    assert "arguments" not in custom and "namespace" not in custom
    seen = sse.named(
        b"".join(_presenter(TOOLS).events(iter([Chunk(patch[:40]), Chunk(patch[40:], "stop", 9)])))
    )
    names = [name for name, _ in seen]
    assert (
        "response.custom_tool_call_input.delta" in names
        and "response.function_call_arguments.delta" not in names
    )
    deltas = "".join(d["delta"] for n, d in seen if n == "response.custom_tool_call_input.delta")
    (done,) = [d for n, d in seen if n == "response.custom_tool_call_input.done"]
    assert deltas == done["input"] == "*** Begin Patch\n*** End Patch"
    final = [d for n, d in seen if n == "response.output_item.done"][-1]["item"]
    assert final["type"] == "custom_tool_call" and final["input"] == done["input"]


def test_reasoning_is_sealed_for_a_stateless_client_and_read_back_next_turn(app: Flask) -> None:
    with app.test_request_context():
        sealer = sealing.current()
        answer = _presenter([], sealed=sealer.seal).build(
            [ChoiceResult(0, "<think>plan</think>Hi", "stop", 3)]
        )
        reasoning = answer["output"][0]
        assert reasoning["type"] == "reasoning" and sealer.unseal(reasoning["encrypted_content"]) == "plan"
        carried = {"type": "reasoning", "summary": [], "encrypted_content": reasoning["encrypted_content"]}
        assert normalized_input([carried]) == [{"type": "reasoning", "text": "plan"}]
        summary = {"type": "compaction", "encrypted_content": sealer.seal("We fixed the bug.")}
        (kept,) = normalized_input([summary])
        assert kept["summary"] == "We fixed the bug."
        assert conversion.messages(ResponseRequest(input=(kept,)))[0]["content"].endswith("We fixed the bug.")
        assert normalized_input([{"type": "compaction", "encrypted_content": "openai-blob"}]) == []
        forged = {"type": "reasoning", "encrypted_content": reasoning["encrypted_content"][:-6] + "AAAAAA"}
        assert normalized_input([forged]) == [{"type": "reasoning", "text": ""}]
