"""The Responses presenter: the Response object, and its typed events numbered from 0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from app.api.generation.loop import ChoiceResult
from app.api.http.errors import RateLimitError
from app.api.responses.objects import ResponseHeader
from app.api.responses.presenter import ResponsesPresenter
from app.api.responses.request import ResponseRequest
from app.engine.types import Chunk
from tests.support import sse
from tests.support.formats import reader

TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]


def presenter(tools: list[dict[str, Any]] | None = None, forced: bool = False) -> ResponsesPresenter:
    return ResponsesPresenter(
        ResponseHeader(ResponseRequest(input=()), "test-model"), 7, reader(tools, forced=forced)
    )


def result(
    text: str, finish_reason: str = "stop", completion_tokens: int = 3, cached: int = 2
) -> ChoiceResult:
    return ChoiceResult(0, text, finish_reason, completion_tokens, cached)


def events(chunks: list[Chunk | None], answer: ResponsesPresenter | None = None) -> list[tuple[str, Any]]:
    stream: Iterator[Chunk | None] = iter(chunks)
    return sse.named(b"".join((answer or presenter()).events(stream)))


def test_the_whole_response_holds_one_message_and_usage() -> None:
    response = presenter().build([result("Hello")])
    assert response["object"] == "response" and response["status"] == "completed"
    (item,) = response["output"]
    assert item["type"] == "message" and item["content"][0]["text"] == "Hello"
    assert response["usage"]["input_tokens"] == 7 and response["usage"]["output_tokens"] == 3
    assert response["usage"]["input_tokens_details"]["cached_tokens"] == 2


def test_an_answer_cut_by_max_output_tokens_is_incomplete() -> None:
    response = presenter().build([result("Hel", "length")])
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}


def test_a_call_becomes_function_call_items() -> None:
    response = presenter(TOOLS).build([result('{"name": "weather", "arguments": {"city": "Oslo"}}')])
    (item,) = response["output"]
    assert item["type"] == "function_call" and item["name"] == "weather"
    assert json.loads(item["arguments"]) == {"city": "Oslo"} and item["call_id"].startswith("call_")


def test_events_in_order_numbered_from_zero_each_named_as_its_type() -> None:
    answer = presenter()
    seen = events([Chunk("Hel"), None, Chunk("lo", "stop", 2)], answer)
    assert [name for name, _ in seen] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert all(data["type"] == name for name, data in seen)
    assert [data["sequence_number"] for _, data in seen] == list(range(len(seen)))
    assert "".join(data["delta"] for name, data in seen if name == "response.output_text.delta") == "Hello"
    final = seen[-1][1]["response"]
    assert final["id"] == seen[0][1]["response"]["id"] and final["output"][0]["content"][0]["text"] == "Hello"


def test_a_keepalive_comment_goes_out_while_nothing_comes() -> None:
    answer = presenter()
    frames = list(answer.events(iter([None, Chunk("x", "stop", 1)])))
    assert frames[2] == b": keep-alive\n\n"


def test_a_streamed_call_is_held_to_its_end_then_sent_as_arguments_events() -> None:
    call = '{"name": "weather", "arguments": {"city": "Oslo"}}'
    seen = events([Chunk(call[:10]), Chunk(call[10:], "stop", 9)], presenter(TOOLS))
    names = [name for name, _ in seen]
    assert "response.output_text.delta" not in names
    assert names[2] == "response.output_item.added" and seen[2][1]["item"]["type"] == "function_call"
    arguments = "".join(d["delta"] for n, d in seen if n == "response.function_call_arguments.delta")
    assert json.loads(arguments) == {"city": "Oslo"}
    assert names[-1] == "response.completed"


def test_an_error_after_the_200_is_response_failed() -> None:
    answer = presenter()
    (failed,) = sse.named(answer.failure(RateLimitError("busy", code="queue_full")))
    assert failed[0] == "response.failed" and failed[1]["response"]["status"] == "failed"
    assert failed[1]["response"]["error"] == {"code": "rate_limit_exceeded", "message": "busy"}
